"""Rates from the gateway: the change of each workload backend's request counter (HAProxy's
`req_tot`, every request routed to the workload, answered or not) between two reads, per second.

This is what users send, measured where they send it, which neither the servers' counters (a
refused or retried request is not counted where it failed) nor a client can see. The first read
has no previous sample (missing data: the controller plans for the layout's rate meanwhile); a
counter that goes down is a restarted gateway and counts from zero. A workload the gateway has no
backend for yet is missing data too.

Peaks (rates.base.Peaked): each backend's `rate_max`, its busiest second since the maxima were
last cleared, read with the counter. Given `clear` (Gateway.clear_maxima), the source clears them
after each read, so a read's peak is the busiest second since the previous read: what capacity
had to carry, which the interval's mean smooths away. Without `clear`, or when clearing fails,
the peak spans longer (from the last clear, or the gateway's start): never less than the truth.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from autoscaler.core.routing.routes import GatewayView, Sample, counter_rate

log = logging.getLogger(__name__)


class GatewayRates:
    def __init__(self, observe: Callable[[], GatewayView], clear: Callable[[], None] | None = None) -> None:
        self.observe = observe
        self.clear = clear
        self._prev: dict[str, Sample] = {}
        self._peaks: dict[str, float] = {}

    def read(self, now: float, workloads: Sequence[str]) -> dict[str, float | None]:
        view = self.observe()  # a failure raises: the RateReader keeps the last good values
        out: dict[str, float | None] = {}
        self._peaks = {w: float(b.rate_max) for w, b in view.backends.items()}
        for w in workloads:
            seen = view.backends.get(w)
            if seen is None:
                out[w] = None
                continue
            out[w] = counter_rate(self._prev.get(w), now, seen.requests_total)
            self._prev[w] = (now, seen.requests_total)
        self._clear()
        return out

    def peaks(self, now: float, workloads: Sequence[str]) -> dict[str, float | None]:
        """The busiest second of each backend as the latest read saw it (None: no backend)."""
        return {w: self._peaks.get(w) for w in workloads}

    def _clear(self) -> None:
        if self.clear is None:
            return
        try:
            self.clear()
        except Exception as exc:  # the rates are read: a peak that spans two reads is only high
            log.warning("gateway: clearing the maxima failed (the next peak spans longer): %s", exc)
