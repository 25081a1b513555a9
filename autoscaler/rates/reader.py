"""Missing-data policy for any rate source: keep the last good value for a bounded time.

A source that fails (raises) or has no value for a workload is logged; the workload's last good
value is used while it is younger than `stale_after_s`; after that the workload is *missing*. The
controller never scales in on a tick with missing data.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from autoscaler.rates.base import Peaked, RateSource

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Reading:
    rates: dict[str, float]  # usable values (fresh or still within the stale bound)
    fresh: dict[str, float]  # values the source gave this tick
    missing: frozenset[str]  # no usable value at all
    error: str | None = None  # the source's failure this tick, if any
    peaks: dict[str, float] = field(default_factory=dict)  # busiest rate of a fresh value's read (Peaked)


class RateReader:
    def __init__(self, source: RateSource, stale_after_s: float) -> None:
        self.source = source
        self.stale_after_s = stale_after_s
        self.last_good: dict[str, tuple[float, float]] = {}

    def read(self, now: float, workloads: Sequence[str]) -> Reading:
        error = None
        try:
            raw = self.source.read(now, workloads)
        except Exception as exc:  # any source failure is data loss, never a crash of the tick
            error = f"{type(self.source).__name__}: {exc}"
            log.warning("rate source failed, keeping last good values: %s", error)
            raw = {}
        named = frozenset(workloads)  # a list's `in` is a scan: quadratic at 2,000 workloads
        fresh = {w: float(v) for w, v in raw.items() if v is not None and w in named and v >= 0}
        for w, v in fresh.items():
            self.last_good[w] = (now, v)
        rates = {w: v for w, (t, v) in self.last_good.items() if w in named and now - t <= self.stale_after_s}
        missing = frozenset(w for w in workloads if w not in rates)
        return Reading(rates, fresh, missing, error, self._peaks(now, fresh) if error is None else {})

    def _peaks(self, now: float, fresh: dict[str, float]) -> dict[str, float]:
        """A Peaked source's peaks for the fresh values, never below the value read; a failure
        gives none (the rates read still count)."""
        if not isinstance(self.source, Peaked) or not fresh:
            return {}
        try:
            raw = self.source.peaks(now, list(fresh))
        except Exception as exc:  # a peak is a refinement: losing it never loses the tick's rates
            log.warning("rate source peaks failed: %s: %s", type(self.source).__name__, exc)
            return {}
        return {w: max(float(v), fresh[w]) for w, v in raw.items() if w in fresh and v is not None and v >= 0}
