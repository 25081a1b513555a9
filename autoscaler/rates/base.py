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
