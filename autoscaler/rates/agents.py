"""Rates from the agents' own counters: the change in each server's requests_total over the time
between two ticks, summed per workload. The controller feeds it the statuses it observed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from autoscaler.transport.base import AgentStatus


class AgentsRates:
    def __init__(self) -> None:
        self._statuses: Mapping[str, AgentStatus] = {}
        self._prev: dict[tuple[str, str], tuple[float, int]] = {}

    def feed(self, statuses: Mapping[str, AgentStatus]) -> None:
        """The statuses observed this tick, by slot (agents that did not answer are absent)."""
        self._statuses = statuses

    def read(self, now: float, workloads: Sequence[str]) -> dict[str, float | None]:
        totals: dict[str, float] = {}
        seen: dict[tuple[str, str], tuple[float, int]] = {}
        for slot, status in self._statuses.items():
            for srv in status.servers:
                key = (slot, srv.name)
                seen[key] = (now, srv.requests_total)
                rate = _rate(self._prev.get(key), now, srv.requests_total)
                if rate is not None:
                    totals[srv.workload] = totals.get(srv.workload, 0.0) + rate
        self._prev = seen
        return {w: totals.get(w) for w in workloads}


def _rate(prev: tuple[float, int] | None, now: float, total: int) -> float | None:
    """Requests per second since `prev`; a counter that went down restarted from zero."""
    if prev is None or now <= prev[0]:
        return None
    delta = total - prev[1] if total >= prev[1] else total
    return delta / (now - prev[0])
