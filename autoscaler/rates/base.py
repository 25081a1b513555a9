"""The RateSource contract. Time is passed in, never read, so sources are testable."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class RateSource(Protocol):
    def read(self, now: float, workloads: Sequence[str]) -> dict[str, float | None]:
        """Current req/s per workload; None where the source has no usable value (missing data)."""
        ...
