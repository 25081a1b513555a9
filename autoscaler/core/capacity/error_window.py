"""The forecast's recent error, per quantile: what /v1/headroom and the metrics show. Pure.

Why these numbers: the forecaster (core/capacity/forecast.py) yields one number per workload, the
rate to plan for over the next boot_s + interval_s, not a distribution. `seasonal` and `auto`
take the busiest of the smoothed level, the same stretch a season ago and the seasonal rise, so
that number is meant to sit above the median: a pinball loss per forecast quantile would score
quantiles it never made (the decomposition's residual bands are not planned with). What can be
said honestly is how far the traffic went from that one number. Each sample is the headroom
estimator's (core/capacity/headroom.py: forecast_error): the rate observed / the base forecast
(before headroom) made boot_s earlier, whose new instances are the newest that can serve now,
minus 1. The quantiles of a window of them say:

- 0.5: the bias (below 0: the forecast sat above the traffic, as a plan-for forecast mostly should);
- 0.9 and 0.99: how far above the forecast the traffic went in its worse moments, what headroom
  must cover (0.25: 25 % above);
- 0.1: how far below it went (what planning above costs).

The window: the samples of the last `window_s` (an hour, as attainment_1h), each weighted by the
seconds since the window's previous sample, at most `max_gap_s` (so the quantiles are fractions of
time whatever the tick rate: event ticks a few seconds apart do not outweigh the regular ones),
the first by `first_s`; at most `size` samples (the oldest leave first). A quantile is the
smallest sample with at least that share of the weight at or below it: a value that was seen,
never one interpolated between two.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

QUANTILES: tuple[float, ...] = (0.1, 0.5, 0.9, 0.99)
Array = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class WindowConfig:
    window_s: float = 3600.0
    max_gap_s: float = 210.0  # boot_s + interval_s: the most seconds one sample weighs
    first_s: float = 30.0  # interval_s: what the first sample weighs
    size: int = 240  # the most samples kept (an hour of 15 s ticks)


def label(q: float) -> str:
    """A quantile as /v1/headroom's key and the metric's `quantile` label: 0.99 -> "0.99"."""
    return f"{q:g}"


def _need(q: float, total: float) -> float:
    """The weight at or below a q quantile (a hair less than q: the sum of weights rounds)."""
    return min(max(q, 0.0), 1.0) * total * (1.0 - 1e-12)


def weighted_quantiles(pairs: Iterable[tuple[float, float]], qs: Sequence[float]) -> list[float]:
    """For each q, the smallest value with at least q of the total weight at or below it
    ((value, weight) pairs; weights <= 0 count for nothing); [] where no weight is left."""
    ordered = sorted((v, s) for v, s in pairs if s > 0 and math.isfinite(v))
    if not ordered:
        return []
    cum = list(itertools.accumulate(s for _, s in ordered))
    last = len(ordered) - 1
    return [ordered[min(bisect.bisect_left(cum, _need(q, cum[-1])), last)][0] for q in qs]


@dataclass(frozen=True, slots=True, eq=False)
class Windows:
    """Every workload's window, one row each (`names`), in arrays: a ring of `size` samples per
    row (time, error, weight; an empty slot's time is NaN), where each row writes next (`heads`)
    and its newest sample's time (`last`). One controller's, carried between ticks. Arrays, not a
    tuple per workload: a tick's quantiles for 1,000 workloads are one sort of the whole table
    (a few ms of CPU; a sort per workload in Python took 35 ms)."""

    names: tuple[str, ...] = ()
    times: Array = field(default_factory=lambda: np.zeros((0, 1)))
    errors: Array = field(default_factory=lambda: np.zeros((0, 1)))
    weights: Array = field(default_factory=lambda: np.zeros((0, 1)))
    heads: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    last: Array = field(default_factory=lambda: np.zeros(0))

    def keep(self, names: Sequence[str], cfg: WindowConfig) -> Windows:
        """The windows of `names`, in that order: a name not here starts empty, one not named leaves."""
        names = tuple(names)
        size = max(cfg.size, 1)
        if names == self.names and self.times.shape[1] == size:
            return self
        rows = {n: k for k, n in enumerate(self.names)}
        fresh = Windows(
            names,
            np.full((len(names), size), np.nan),
            np.zeros((len(names), size)),
            np.zeros((len(names), size)),
            np.zeros(len(names), dtype=np.int64),
            np.full(len(names), np.nan),
        )
        if self.times.shape[1] != size:
            return fresh
        src = [rows[n] for n in names if n in rows]
        dst = [k for k, n in enumerate(names) if n in rows]
        for a, b in ((fresh.times, self.times), (fresh.errors, self.errors), (fresh.weights, self.weights)):
            a[dst] = b[src]
        fresh.heads[dst], fresh.last[dst] = self.heads[src], self.last[src]
        return fresh

    def update(self, now: float, errors: Mapping[str, float], cfg: WindowConfig) -> Windows:
        """The windows with this tick's errors added (see push: the same rules, every row at once);
        a workload without a row adds nothing (keep() first)."""
        rows = {n: k for k, n in enumerate(self.names)}
        pairs = [(rows[n], e) for n, e in errors.items() if n in rows and math.isfinite(e)]
        r = np.asarray([k for k, _ in pairs], dtype=np.int64)
        v = np.asarray([e for _, e in pairs], dtype=float)
        prev = self.last[r]
        new = np.isnan(prev) | (now > prev)
        r, v, prev = r[new], v[new], prev[new]
        first = min(cfg.first_s, cfg.max_gap_s)
        w = np.where(np.isnan(prev) | (prev <= now - cfg.window_s), first, np.minimum(now - prev, cfg.max_gap_s))
        out = Windows(
            self.names, self.times.copy(), self.errors.copy(), self.weights.copy(), self.heads.copy(), self.last.copy()
        )
        col = out.heads[r]
        out.times[r, col], out.errors[r, col], out.weights[r, col] = now, v, w
        out.heads[r] = (col + 1) % out.times.shape[1]
        out.last[r] = now
        return out

    def quantiles(self, now: float, cfg: WindowConfig, qs: Sequence[float] = QUANTILES) -> dict[str, dict[str, float]]:
        """Per workload with errors in the last window_s, each quantile (see the module doc)."""
        if not self.names:
            return {}
        with np.errstate(invalid="ignore"):
            live = self.times > now - cfg.window_s
        err = np.where(live, self.errors, np.inf)
        order = np.argsort(err, axis=1)
        ranked = np.take_along_axis(err, order, axis=1)
        cum = np.cumsum(np.take_along_axis(np.where(live, self.weights, 0.0), order, axis=1), axis=1)
        total, count = cum[:, -1], live.sum(axis=1)
        at = np.arange(len(self.names))
        cols = [
            ranked[at, np.minimum((cum < _need(q, 1.0) * total[:, None]).sum(axis=1), np.maximum(count - 1, 0))]
            for q in qs
        ]
        keys = [label(q) for q in qs]
        table = np.stack(cols, axis=1).tolist() if cols else [[] for _ in self.names]
        return {
            n: dict(zip(keys, row, strict=True))
            for n, row, t in zip(self.names, table, total.tolist(), strict=True)
            if t > 0
        }


@dataclass(frozen=True)
class Recent:
    """A tick's windows and their quantiles at its time, computed when first asked: the status
    endpoint asks once a tick; the simulator never does (it keeps every error itself), and a
    14-day replay of 30 s ticks would otherwise pay 2 s for quantiles nobody reads."""

    windows: Windows = field(default_factory=Windows)
    now: float = 0.0
    cfg: WindowConfig = field(default_factory=WindowConfig)

    @functools.cached_property
    def quantiles(self) -> dict[str, dict[str, float]]:
        """Per workload with errors in the last window_s, each quantile (Windows.quantiles)."""
        return self.windows.quantiles(self.now, self.cfg)
