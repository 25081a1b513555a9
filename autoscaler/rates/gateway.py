"""Rates from the gateway: the change of each workload backend's request counter (HAProxy's
`req_tot`, every request routed to the workload, answered or not) between two reads, per second.

This is what users send, measured where they send it, which neither the servers' counters (a
refused or retried request is not counted where it failed) nor a client can see. The first read
has no previous sample (missing data: the controller plans for the layout's rate meanwhile); a
counter that goes down is a restarted gateway and counts from zero. A workload the gateway has no
backend for yet is missing data too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from autoscaler.core.routing import GatewayView, Sample, counter_rate


class GatewayRates:
    def __init__(self, observe: Callable[[], GatewayView]) -> None:
        self.observe = observe
        self._prev: dict[str, Sample] = {}

    def read(self, now: float, workloads: Sequence[str]) -> dict[str, float | None]:
        view = self.observe()  # a failure raises: the RateReader keeps the last good values
        out: dict[str, float | None] = {}
        for w in workloads:
            seen = view.backends.get(w)
            if seen is None:
                out[w] = None
                continue
            out[w] = counter_rate(self._prev.get(w), now, seen.requests_total)
            self._prev[w] = (now, seen.requests_total)
        return out
