"""Rate history -> the rate to plan for over the next boot_s + interval_s. Pure.

An instance launched now serves traffic only after boot_s, and the next decision comes interval_s
later, so the plan must carry the rate expected over that horizon. Three methods:

- `last`: the latest observation;
- `ewma`: an exponentially weighted mean with time constant `tau_s` (robust to noise);
- `holt`: Holt's linear trend (level + trend, both time-aware), extrapolated across the horizon,
  so a ramp is provisioned for before it arrives;
- `seasonal`: `ewma`, but never below the busiest rate seen over the same stretch of the day (the
  coming horizon, a season earlier: `season_s`, default a day) in the last `seasons` seasons. Like
  AWS predictive scaling in forecast-and-scale mode: capacity for the daily peak is there before
  it arrives, and a lull that the last days did not have (a quiet hour, a collection gap) does not
  scale in what the same hour needed before. The caller passes those past observations (`past`).
- `auto`: `seasonal`, plus where a period was found in the workload's history
  (core/capacity/periods.py) the rise its seasonal profile says comes within the horizon, on top
  of the smoothed level: max(seasonal, ewma + rise). The caller passes the rise (`ahead`); where no
  period is significant it is 0 and `auto` is `seasonal`.

Whatever the method, the forecast never sits below the latest observation: a step up is acted on
the tick that sees it, and the smoothing only slows scale-in. The result is multiplied by
(1 + headroom).

`ramp` is not a method but a floor the controller plans above (loop/tick/tuning.py): where the rate
rose between each of the last few reads, the rise is assumed to go on at the least of those
slopes for the whole horizon. A headroom is a multiple of the rate, so a ramp from a low base
(traffic returning after a quiet spell: 14 to 2,500 req/s in ten minutes) outruns any capped
headroom, while Holt's trend, always on, pays for every wiggle. Requiring the rise on each of
several reads leaves a step (one rise, then flat) and noise (rises that do not persist) alone.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

Method = Literal["last", "ewma", "holt", "seasonal", "auto"]
Point = tuple[float, float]  # (time_s, rate_rps)
# Columns at least this many take the across-workloads path (forecast_columns, ramp_columns): a
# numpy step a row pays for itself only across many workloads; with a handful (the shipped
# examples' 2 or 3) the loop per workload is the cheaper of the two, with the same floats.
COLUMNS_FROM = 32


@dataclass(frozen=True, slots=True)
class ForecastConfig:
    method: Method = "ewma"
    horizon_s: float = 210.0
    headroom: float = 0.1
    tau_s: float = 120.0  # ewma / holt level time constant
    trend_tau_s: float = 300.0  # holt trend time constant
    season_s: float = 86400.0  # seasonal: the period
    seasons: int = 1  # seasonal: how many past periods to look back over


def season_windows(now: float, cfg: ForecastConfig) -> list[tuple[float, float]]:
    """The stretches of history the seasonal method reads: the coming horizon, 1..seasons periods ago."""
    if cfg.method not in ("seasonal", "auto"):
        return []
    return [(now - k * cfg.season_s, now - k * cfg.season_s + cfg.horizon_s) for k in range(1, cfg.seasons + 1)]


def forecast(
    history: Sequence[Point], cfg: ForecastConfig, past: Sequence[Point] = (), ahead: float = 0.0
) -> float | None:
    """Planned rate for one workload, or None with no history at all. `past`: for `seasonal` and
    `auto`, the observations inside season_windows; `ahead`: for `auto`, the seasonal rise coming
    within the horizon (both ignored by the other methods)."""
    points = _valid(history)
    if not points:
        return None
    last = points[-1][1]
    if cfg.method == "last":
        base = last
    elif cfg.method == "holt":
        base = holt(points, cfg.tau_s, cfg.trend_tau_s, cfg.horizon_s)
    else:
        base = ewma(points, cfg.tau_s)
    return _finish(base, last, cfg, past, ahead)


def _finish(base: float, last: float, cfg: ForecastConfig, past: Sequence[Point], ahead: float) -> float:
    """The method's level raised to the seasons' busiest rate (seasonal, auto) and the rise ahead
    (auto), never below the latest rate, times 1 + headroom."""
    if cfg.method in ("seasonal", "auto"):
        level = base
        base = max([base, *(v for _, v in past if math.isfinite(v) and v >= 0)])
        if cfg.method == "auto" and math.isfinite(ahead) and ahead > 0:
            base = max(base, level + ahead)
    return max(base, last) * (1.0 + cfg.headroom)


def forecast_all(
    histories: Mapping[str, Sequence[Point]],
    cfg: ForecastConfig,
    past: Mapping[str, Sequence[Point]] | None = None,
    ahead: Mapping[str, float] | None = None,
) -> dict[str, float | None]:
    return {w: forecast(h, cfg, (past or {}).get(w, ()), (ahead or {}).get(w, 0.0)) for w, h in histories.items()}


def ramp(points: Sequence[Point], horizon_s: float, reads: int) -> float:
    """The rate a sustained rise reaches at the horizon: last + least slope * horizon_s, where the
    rate rose between each of the last `reads` + 1 points; 0 where it did not (or reads is 0).

    A floor is only ever above the latest rate: a rise too small to move it (a slope of 1e-212
    req/s/s adds nothing to 1 req/s in floating point) is no ramp, and a "floor" equal to the
    latest rate would report a ramp (ramp_floor_rps) that plans nothing."""
    if reads <= 0:
        return 0.0
    pts = _valid(points)
    if len(pts) < reads + 1:
        return 0.0
    tail = pts[-(reads + 1) :]
    slopes = [(v1 - v0) / (t1 - t0) if t1 > t0 else 0.0 for (t0, v0), (t1, v1) in itertools.pairwise(tail)]
    last, least = tail[-1][1], min(slopes)
    floor = last + least * horizon_s
    return floor if least > 0 and floor > last else 0.0


def _valid(points: Sequence[Point]) -> list[Point]:
    """The points with a finite rate of at least 0, in time order. A list comprehension and an
    in-place sort: a tick reads an hour of points per workload (240 at 15 s ticks, 1,000
    workloads), already in time order, which the sort then only checks (issue 50: the hour's
    history made this step grow from ~0.06 to ~0.3 s a tick over a replay's first hour). For a
    float v, `0.0 <= v < inf` is `isfinite(v) and v >= 0` (NaN fails both comparisons)."""
    out = [p for p in points if 0.0 <= p[1] < math.inf]
    out.sort()
    return out


def _alpha(dt: float, tau: float) -> float:
    """Smoothing weight for a gap of dt seconds: irregular ticks weigh consistently."""
    if tau <= 0:
        return 1.0
    return 1.0 - math.exp(-max(dt, 0.0) / tau)


def ewma(points: Sequence[Point], tau_s: float) -> float:
    """The smoothed level: per step the weight `_alpha` gives its gap, computed once per call for
    each distinct gap (ticks come at a few: an hour of 15 s reads has 240 gaps, 2 or 3 of them
    different), so the arithmetic, and the result, are those of a weight computed every step."""
    t0, level = points[0]
    weights: dict[float, tuple[float, float]] = {}  # gap -> (a, 1 - a)
    for t1, x in itertools.islice(points, 1, None):
        dt = t1 - t0
        t0 = t1
        w = weights.get(dt)
        if w is None:
            a = _alpha(dt, tau_s)
            w = weights[dt] = (a, 1 - a)
        level = w[0] * x + w[1] * level
    return level


def holt(points: Sequence[Point], tau_s: float, trend_tau_s: float, horizon_s: float) -> float:
    """Level + trend (per second) smoothed over irregular samples; the horizon's highest value."""
    level, trend = points[0][1], 0.0
    for (t0, _), (t1, x) in itertools.pairwise(points):
        dt = t1 - t0
        if dt <= 0:
            continue
        a, b = _alpha(dt, tau_s), _alpha(dt, trend_tau_s)
        prev = level
        level = a * x + (1 - a) * (level + trend * dt)
        trend = b * (level - prev) / dt + (1 - b) * trend
    return max(0.0, level + max(trend, 0.0) * horizon_s)


Matrix = np.ndarray[Any, np.dtype[np.float64]]


@dataclass(frozen=True, eq=False)
class Columns:
    """The rates of many workloads read at the same times (issue 50: 1,000 workloads' hour of
    reads a tick): `values[i, j]` is `names[j]`'s rate read at `times[i]`, NaN where it was not
    read; rows oldest first. `points` is one workload's history as `forecast` takes it."""

    times: Matrix
    names: tuple[str, ...]
    values: Matrix

    def points(self, j: int) -> list[Point]:
        """Column j's (time, rate) pairs, NaN skipped, in row order."""
        return [(t, v) for t, v in zip(self.times.tolist(), self.values[:, j].tolist(), strict=True) if v == v]

    def all_points(self) -> dict[str, list[Point]]:
        """`points` of every column, by name: the times and the matrix converted once, not the
        times once a column (8,500 workloads and an hour of rows: a million floats a tick)."""
        times = self.times.tolist()
        columns = self.values.T.tolist()
        return {
            w: [(t, v) for t, v in zip(times, col, strict=True) if v == v]
            for w, col in zip(self.names, columns, strict=True)
        }

    def read(self) -> list[bool]:
        """Per column: whether any row holds a rate (not NaN) for it."""
        seen: list[bool] = np.any(~np.isnan(self.values), axis=0).tolist()
        return seen

    def with_row(self, now: float, row: Mapping[str, float]) -> Columns:
        """One more row at `now` (workloads not named yet get new columns, NaN before)."""
        have = set(self.names)
        new = sorted(w for w in row if w not in have)
        names = self.names + tuple(new)
        index = {w: j for j, w in enumerate(names)}
        values = np.full((len(self.times) + 1, len(names)), np.nan)
        values[:-1, : len(self.names)] = self.values
        for w, v in row.items():
            values[-1, index[w]] = v
        return Columns(np.append(self.times, now), names, values)

    def ordered(self) -> Columns | None:
        """The columns with each column's valid rates in `_valid`'s order, row by row: as they are
        where times strictly increase; where times repeat (two ticks at one time), each run of
        equal times with its valid rates sorted up (the rest NaN), as `_valid`'s sort of (time,
        rate) orders them; None where a time goes back (the callers then take each column)."""
        steps = self.times[1:] - self.times[:-1]
        if bool(np.all(steps > 0)):
            return self
        if not bool(np.all(steps >= 0)):
            return None
        values = np.where((self.values >= 0.0) & (self.values < math.inf), self.values, np.nan)
        edges = np.flatnonzero(steps > 0) + 1
        for lo, hi in zip([0, *edges.tolist()], [*edges.tolist(), len(self.times)], strict=True):
            if hi - lo > 1:
                values[lo:hi] = np.sort(values[lo:hi], axis=0, kind="stable")  # NaN last
        return Columns(self.times, self.names, values)


def forecast_columns(
    cols: Columns,
    cfg: ForecastConfig,
    past: Mapping[str, Sequence[Point]] | None = None,
    ahead: Mapping[str, float] | None = None,
    wide_from: int = COLUMNS_FROM,
) -> dict[str, float | None]:
    """forecast_all on every column's points, with the same floats: the ewma runs across the
    workloads at once (ewma_columns: the same products and sums, elementwise); `last` and `holt`,
    times that do not strictly increase, or fewer than `wide_from` columns take forecast_all
    itself."""
    past, ahead = past or {}, ahead or {}
    ordered = cols.ordered() if len(cols.names) >= wide_from else None
    if cfg.method not in ("ewma", "seasonal", "auto") or ordered is None:
        return forecast_all(cols.all_points(), cfg, past, ahead)
    level, last, count = (a.tolist() for a in ewma_columns(ordered.times, ordered.values, cfg.tau_s))
    return {
        w: _finish(level[j], last[j], cfg, past.get(w, ()), ahead.get(w, 0.0)) if count[j] else None
        for j, w in enumerate(cols.names)
    }


def ewma_columns(times: Matrix, values: Matrix, tau_s: float) -> tuple[Matrix, Matrix, Matrix]:
    """Per column: `ewma` of its valid points (a finite rate of at least 0; times never going
    back, a column's rates at one time in `_valid`'s order: Columns.ordered), the latest valid rate and how many there are (level and last NaN where none).
    Row by row each column whose point is valid steps as `ewma` steps it, a * x + (1 - a) * level
    with `_alpha`'s weight of its own gap (math.exp, once per distinct gap): IEEE products and sums
    elementwise, so the floats are those of the loop per workload."""
    n = values.shape[1] if values.ndim == 2 else 0
    level, last, since = np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan)
    started, count = np.zeros(n, dtype=bool), np.zeros(n, dtype=np.int64)
    weights: dict[float, tuple[float, float]] = {}
    aligned = False  # every column started, its latest valid point at `prev` (`since` not kept)
    prev = math.nan
    with np.errstate(all="ignore"):
        for t, x in zip(times.tolist(), values, strict=True):
            ok = (x >= 0.0) & (x < math.inf)
            if aligned and ok.all():
                a, b = _weights(weights, t - prev, tau_s)
                level = a * x + b * level
                last = x
                count += 1
            else:
                if aligned:
                    since = np.full(n, prev)
                step = ok & started
                if step.any():
                    level = np.where(step, _stepped(weights, t - since, step, x, level, tau_s), level)
                level = np.where(ok & ~started, x, level)
                since = np.where(ok, t, since)
                last = np.where(ok, x, last)
                started |= ok
                count += ok
                aligned = bool(ok.all())
            prev = t
    return level, last, count


def _stepped(
    memo: dict[float, tuple[float, float]], gaps: Matrix, step: Matrix, x: Matrix, level: Matrix, tau_s: float
) -> Matrix:
    """a * x + (1 - a) * level with each stepping column's own gap's weights (the others: junk)."""
    mine = gaps[step]
    lo, hi = float(mine.min()), float(mine.max())
    if lo == hi:  # one gap (the usual case: a few workloads missed the same reads)
        a, b = _weights(memo, lo, tau_s)
        return a * x + b * level
    a_s, b_s = np.zeros(len(x)), np.zeros(len(x))
    for gap in np.unique(mine).tolist():
        at = step & (gaps == gap)
        a_s[at], b_s[at] = _weights(memo, gap, tau_s)
    return a_s * x + b_s * level


def _weights(memo: dict[float, tuple[float, float]], gap: float, tau_s: float) -> tuple[float, float]:
    w = memo.get(gap)
    if w is None:
        a = _alpha(gap, tau_s)
        w = memo[gap] = (a, 1 - a)
    return w


def ramp_columns(cols: Columns, horizon_s: float, reads: int, wide_from: int = COLUMNS_FROM) -> dict[str, float]:
    """`ramp` of every column's points, with the same floats: where a column's last reads + 1 rows
    are all valid (Columns.ordered), those rows are its tail (a slope over no time is 0, as there), and the slopes, their
    least and the floor are computed across such columns at once (elementwise, as `ramp` does
    them; the least of equal slopes may differ only in a zero's sign, which `least > 0` ignores);
    any other column, and every column where there are fewer than `wide_from`, takes `ramp` itself."""
    names = cols.names
    if reads <= 0:
        return dict.fromkeys(names, 0.0)
    m = reads + 1
    ordered = cols.ordered() if len(names) >= wide_from else None
    if ordered is None or len(cols.times) < m:
        return {w: ramp(points, horizon_s, reads) for w, points in cols.all_points().items()}
    cols = ordered
    tail, t = cols.values[-m:], cols.times[-m:]
    full: Matrix = np.all((tail >= 0.0) & (tail < math.inf), axis=0)
    v = tail[:, full]
    with np.errstate(all="ignore"):
        gaps = (t[1:] - t[:-1])[:, None]
        slopes = np.where(gaps > 0, (v[1:] - v[:-1]) / gaps, 0.0)
        least = slopes.min(axis=0)
        lastv = v[-1]
        floor = lastv + least * horizon_s
        rises = np.where((least > 0) & (floor > lastv), floor, 0.0).tolist()
    out: dict[str, float] = {}
    it = iter(rises)
    valid = None
    for j, (w, whole) in enumerate(zip(names, full.tolist(), strict=True)):
        if whole:
            out[w] = next(it)
            continue
        if valid is None:
            valid = (cols.values >= 0.0) & (cols.values < math.inf)
        rows = np.flatnonzero(valid[:, j])[-m:]  # its last valid points: `ramp`'s tail, in time order
        points = list(zip(cols.times[rows].tolist(), cols.values[rows, j].tolist(), strict=True))
        out[w] = ramp(points, horizon_s, reads)
    return out
