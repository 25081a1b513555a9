"""The RateSource contract. Time is passed in, never read, so sources are testable."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

from autoscaler.transport.base import AgentStatus


class RateSource(Protocol):
    def read(self, now: float, workloads: Sequence[str]) -> dict[str, float | None]:
        """Current req/s per workload; None where the source has no usable value (missing data)."""
        ...


@runtime_checkable
class StatusFed(Protocol):
    """Optional RateSource capability: a source computed from the agents' own counters
    (rates/agents.py) is handed the statuses the controller observed, before it is read."""

    def feed(self, statuses: Mapping[str, AgentStatus]) -> None:
        """The statuses observed this tick, by slot (agents that did not answer are absent)."""
        ...


@runtime_checkable
class Peaked(Protocol):
    """Optional RateSource capability: the busiest rate since the previous read, finer than the
    read's mean (HAProxy's per-second `rate_max`, a trace's busiest row). Capacity must carry
    that peak, not the mean; the headroom step plans for it (core/capacity/headroom.py: the burst floor)."""

    def peaks(self, now: float, workloads: Sequence[str]) -> dict[str, float | None]:
        """Busiest req/s per workload over what the latest read() covered; None where unknown.
        Called right after read() on the same tick."""
        ...
