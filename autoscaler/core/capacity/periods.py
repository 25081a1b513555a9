"""Recurring patterns of any period in a rate history, and the rise they say is coming. Pure.

`scaling.forecast: auto` (core/capacity/forecast.py) plans for today's forecast, and where a
period was found, for the rise its seasonal profile says comes within the horizon: capacity for a
burst that recurs every hour is launched one boot before it, the way the oracle does.

Finding periods (`find_periods`, refit rarely: the caller passes the time, and `refit_after` says
when a fit is due again: often while the history is young, hourly once it holds half a day): the history is
resampled to a regular grid, linearly detrended, and its periodogram (scipy.signal.periodogram)
searched between `min_period_s` and half the history (two cycles at least). Each candidate, the
strongest first, faces Fisher's g-test against white noise: g = its power / the power left (the
stronger candidates' taken out, Siegel's sequential form), with the false-alarm bound
p <= m (1 - g)^(m - 1) for m Fourier frequencies (the first term of Fisher's exact sum, an upper
bound that needs no permutations); it is significant where p < alpha. A significant frequency
within tolerance of a multiple of a lower one is a harmonic (a burst's shape, not a period of its
own) and joins it. Each period is refined to a fraction of a step by the autocorrelation's peak
near it (the periodogram's bins are 1/span apart: 2 % at an hour over two days). A period found
is then planned with only where it recurs out of sample (`proven`, core/capacity/period_skill.py):
its profile, built from the history before a held-out last stretch, must forecast that stretch
with a skill of `min_skill` at least (1 - its squared error / the level's, beside the periods kept
before it); a smooth day's shape fitted by a few cycles of some period does not. A period longer
than `quick_period_s` is tested only once `occurrences` full cycles precede the held-out stretch
(5.33 cycles of history: a day holds them up to 4.5 hours).

Forecasting (`decompose`, then `rise` each tick): trend = a moving mean over the longest period;
seasonal = per period, the detrended rate folded by phase and averaged over the last
`occurrences` cycles (the stronger period first, its profile taken out before the next); the
residual's quantiles are the bands. At the fit the profile's path over the next `refit_s` (and one
horizon) is tabulated, so a tick only looks one value up: the rise = the highest seasonal value
within [now, now + horizon + lead_s] minus the value now (lead_s: room for a burst that comes
early, its jitter). With max_spread_s > 0 (the policy's `scaling.onset_spread_s`, 0 by default:
benchmarks/forecast_auto.py, docs/simulate.md) the window widens by the spread of the onsets
measured in the history (`_spread`; the whole max_spread_s while two cycles are known), both ways: the
rise is the highest value within [now, now + horizon + lead_s + spread] minus the lowest within
[now - spread, now], so a burst that comes early or late by that much finds its capacity.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from autoscaler.core.capacity.period_skill import skill, trains_full_profile

Array = npt.NDArray[np.float64]
Point = tuple[float, float]  # (time_s, rate_rps)


@dataclass(frozen=True, slots=True)
class PeriodConfig:
    step_s: float = 60.0  # the grid the history is resampled to
    min_period_s: float = 300.0
    max_period_s: float = 7 * 86400.0
    alpha: float = 0.001  # the false-alarm probability of each test
    min_acf: float = 0.25  # the autocorrelation a period must show at its lag (times the overlap)
    min_dip: float = 0.2  # ... and that much above its lowest at a shorter lag
    min_strength: float = 0.02  # the share of the variance a period must carry
    quick_period_s: float = 14400.0  # periods up to this need two cycles in the history, longer ones three
    max_periods: int = 3
    candidates: int = 24  # periodogram peaks tested at most
    sharpen_spread: float = 0.06  # the share of a multiple of the period _sharpen searches
    occurrences: int = 4  # cycles the seasonal profile averages over
    refit_s: float = 3600.0  # the longest a fit holds
    refit_min_s: float = 300.0  # the shortest (a young history: refit_after)
    refit_growth: float = 12.0  # a fit over a span of history holds span / refit_growth
    lead_s: float = 180.0
    max_spread_s: float = 0.0  # the most the onsets' spread widens the look (_spread); 0: off, the default
    quantiles: tuple[float, float] = (0.1, 0.9)
    holdout_share: float = 0.25  # the share of the history a period's skill is measured on, one cycle at least
    min_skill: float = 0.15  # the out-of-sample skill a period must show to be planned with (period_skill.py)


@dataclass(frozen=True, slots=True)
class Period:
    """A significant period: its length, its strength (the share of the detrended variance the
    fundamental and its harmonics carry) and the false-alarm bound of its fundamental."""

    period_s: float
    strength: float
    p_value: float


@dataclass(frozen=True, slots=True)
class Fit:
    """One workload's decomposition at `fitted_at`: the periods, the trend at the fit (the mean
    over the last longest period), the residual's quantiles, and the seasonal component on the
    grid from fitted_at (`table`) with the rise each grid point looks ahead to (`ahead`)."""

    fitted_at: float
    step_s: float
    periods: tuple[Period, ...]
    trend: float = 0.0
    bands: tuple[float, float] = (0.0, 0.0)
    table: tuple[float, ...] = ()
    ahead: tuple[float, ...] = ()

    def seasonal(self, t: float) -> float:
        """The seasonal component at t (0 outside the tabulated stretch)."""
        i = int((t - self.fitted_at) // self.step_s)
        return self.table[i] if 0 <= i < len(self.table) else 0.0

    def rise(self, t: float) -> float:
        """How far the seasonal component climbs within the horizon from t (0 with no period or
        past the table: the caller refits)."""
        i = int((t - self.fitted_at) // self.step_s)
        return self.ahead[i] if 0 <= i < len(self.ahead) else 0.0


def refit_after(span_s: float, cfg: PeriodConfig) -> float:
    """How long a fit over `span_s` of history holds before the next: span_s / refit_growth,
    within [refit_min_s, refit_s]. A period shows once the history holds two cycles of it, so a
    young history is refit often (a 45-minute period is found at 90 minutes, not at the next
    hourly refit; a period found on two jittered cycles is refined on the third soon after), and an
    old one hourly. A fit's CPU grows with its span, so these refits cost no more a second than the
    steady state's: span x growth / span against a day's fit an hour (benchmarks/forecast_speed.py)."""
    return min(cfg.refit_s, max(cfg.refit_min_s, span_s / cfg.refit_growth))


def grid(points: Sequence[Point], step_s: float, end: float) -> tuple[Array, Array]:
    """(times, rates) on a regular grid ending at `end`: bin means, empty bins interpolated."""
    pts = np.asarray([p for p in points if math.isfinite(p[1]) and p[1] >= 0 and p[0] <= end], dtype=float)
    if len(pts) < 2:
        return np.zeros(0), np.zeros(0)
    n = int((end - pts[0, 0]) // step_s) + 1
    idx = np.clip(((pts[:, 0] - (end - (n - 1) * step_s)) / step_s + 0.5).astype(int), 0, n - 1)
    counts = np.bincount(idx, minlength=n).astype(float)
    sums = np.bincount(idx, weights=pts[:, 1], minlength=n)
    times = end - step_s * np.arange(n - 1, -1, -1, dtype=float)
    have = counts > 0
    rates = np.interp(times, times[have], sums[have] / counts[have])
    return times, rates


def _p_value(g: float, m: int) -> float:
    """Fisher's false-alarm bound m (1 - g)^(m - 1) (clipped to 1)."""
    if g >= 1.0:
        return 0.0
    return min(1.0, math.exp(math.log(m) + (m - 1) * math.log1p(-g)))


def _acf(x: Array) -> Array:
    """The autocorrelation at every lag (each lag's mean product, so long lags are not shrunk), 1 at lag 0."""
    n = len(x)
    spec = np.fft.rfft(x - x.mean(), 2 * n)
    acf = np.fft.irfft(spec * np.conj(spec))[:n] / np.arange(n, 0, -1)
    return acf / acf[0] if acf[0] > 0 else np.zeros(n)


def _refine(acf: Array, period: float, step_s: float, spread: float = 0.03) -> tuple[float, float]:
    """The autocorrelation's peak within `spread` (a fraction) of `period`, to a fraction of a
    step, and its height there; height 0 where the window holds no peak (only a slope)."""
    n = len(acf)
    lag = period / step_s
    lo, hi = max(1, int(lag * (1 - spread)) - 1), min(n - 2, int(lag * (1 + spread)) + 2)
    if hi <= lo:
        return period, 0.0
    k = lo + int(np.argmax(acf[lo : hi + 1]))
    a, b, c = acf[k - 1], acf[k], acf[k + 1]
    if b < a or b < c:
        return period, 0.0
    den = a - 2 * b + c
    shift = max(-0.5, min(0.5, 0.5 * (a - c) / den)) if den < 0 else 0.0
    return float((k + shift) * step_s), float(b)


def find_periods(times: Array, rates: Array, cfg: PeriodConfig) -> tuple[Period, ...]:
    """The significant periods of a gridded rate series, strongest first (see the module doc)."""
    n = len(rates)
    span = n * cfg.step_s
    if n < 8 or float(np.ptp(rates)) <= 0:
        return ()
    from scipy import signal  # here, not at import: it costs every igniter process 0.6 s, and only auto needs it

    x = signal.detrend(rates)
    freqs, power = signal.periodogram(x, fs=1.0 / cfg.step_s, detrend=False)
    freqs, power = freqs[1:], power[1:]  # no DC
    m = len(power)
    band = (freqs >= 1.0 / min(cfg.max_period_s, span / 2.0)) & (freqs <= 1.0 / cfg.min_period_s)
    order = [int(i) for i in np.argsort(power)[::-1] if band[i]][: cfg.candidates]
    left, total, found = float(power.sum()), float(power.sum()), []
    taken: set[int] = set()
    for i in order:
        if i in taken or left <= 0:
            continue
        g = float(power[i]) / left
        p = _p_value(g, m)
        if p >= cfg.alpha:
            break
        found.append((float(freqs[i]), float(power[i]) / total, p))
        near = range(max(0, i - 1), min(m, i + 2))
        taken.update(near)
        left -= float(power[list(near)].sum())
    return _fundamentals(found, float(freqs[0]), times, x, span, cfg)


def _fundamentals(
    found: list[tuple[float, float, float]], df: float, times: Array, x: Array, span: float, cfg: PeriodConfig
) -> tuple[Period, ...]:
    """Significant frequencies as periods, the strongest line first: a line near a multiple of a
    kept period's frequency is its harmonic (a burst's shape: its share of the variance adds to
    the period's strength); any other is refined on the autocorrelation of what the kept periods
    leave (their folded profiles taken out) and kept only where that repeats there (_repeats: a
    lone burst's leakage is significant against white noise, but does not repeat). A multiple that
    repeats clearly better is the period (the line was a harmonic of it); a significant shorter
    one that repeats as well is too (the line leaked from it)."""
    kept: list[tuple[float, float, float]] = []  # (period, strength, p)
    freqs = [f for f, _, _ in found]
    resid = x - x.mean()
    acf = _acf(resid)
    for f, share, p in sorted(found, key=lambda c: -c[1]):
        k = next((j for j, (q, _, _) in enumerate(kept) if _harmonic(f, 1.0 / q, df)), None)
        if k is not None:
            q, s, pv = kept[k]
            kept[k] = (q, s + share, pv)
            continue
        period, r = _refine(acf, 1.0 / f, cfg.step_s, max(0.03, 0.6 * df / f))
        for mult in range(2, 5):
            if mult * period > span / 2:
                break
            longer, r2 = _refine(acf, mult * period, cfg.step_s)
            if r2 > r + 0.1:
                period, r = longer, r2
        for div in (4, 3, 2):
            shorter, r2 = _refine(acf, period / div, cfg.step_s)
            if (
                shorter > 0
                and r2 >= r - 0.1
                and any(abs(g - 1.0 / shorter) <= df for g in freqs)
                and _repeats(acf, shorter, r2, cfg)
            ):
                period, r = shorter, r2
                break
        if _fits(period, span, cfg) and _repeats(acf, period, r, cfg):
            period = _sharpen(acf, period, span, cfg)
            kept.append((period, share, p))
            resid = resid - _fold(times, resid, period, cfg.step_s, len(resid))
            acf = _acf(resid)
    out = [Period(q, s, pv) for q, s, pv in kept if s >= cfg.min_strength]
    return tuple(sorted(out, key=lambda q: -q.strength)[: cfg.max_periods])


def _fold(times: Array, values: Array, period: float, step_s: float, last: int) -> Array:
    """Each point's phase mean over the last `last` points (the profile, read back at every point)."""
    bins = max(1, round(period / step_s))
    phase = ((np.mod(times, period) / period) * bins).astype(int) % bins
    sums = np.bincount(phase[-last:], weights=values[-last:], minlength=bins)
    counts = np.bincount(phase[-last:], minlength=bins)
    prof = np.where(counts > 0, sums / np.maximum(counts, 1), 0.0)
    back: Array = prof[phase]
    return back


def _fits(period: float, span: float, cfg: PeriodConfig) -> bool:
    """Whether the history can show `period`: min_period_s or longer, and two cycles of it in the
    history if it is at most quick_period_s, three if longer. A day's history (the controller's
    default) holds "two cycles" of any smooth half-day shape: over ServeGen's days, periods of 9 to
    15 h passed every test in 1 refit in 6 (benchmarks/forecast_auto.py); a burst that recurs
    hourly, or every 3 hours (quick_period_s 4 h), still counts from its third occurrence. A day's
    history holds three cycles of any period up to 8 h, so only a history younger than 12 h sees
    the difference between two and three."""
    cycles = 2.0 if period <= cfg.quick_period_s else 3.0
    return cfg.min_period_s <= period <= 1.05 * span / cycles  # 5 %: the refined period may sit past a bin


def history_to_plan_s(period_s: float, cfg: PeriodConfig) -> float | None:
    """The history a period longer than quick_period_s needs before a refit plans with it:
    `occurrences` full cycles before the held-out stretch (period_skill.trains_full_profile), so
    occurrences / (1 - holdout_share) cycles in all (5.33: a day's cycle needs five days and eight
    hours). None for a shorter period: two cycles show it, and the test uses what there is."""
    if period_s <= cfg.quick_period_s:
        return None
    return cfg.occurrences / (1.0 - cfg.holdout_share) * period_s


def _sharpen(acf: Array, period: float, span: float, cfg: PeriodConfig) -> float:
    """The period measured at its multiples within half the history (up to 8), each from the
    estimate the one before gave: a lag's error is a fraction of a step whatever the lag, so m
    periods give the period m times finer. The first estimate is the autocorrelation's peak at one
    period, where jittered bursts' most common gap wins (two gaps of 55 minutes and one of 64 put it
    at 56, where the mean is 58): `sharpen_spread` of each multiple is searched, and each step
    narrows the error the next multiple has to find."""
    top = min(8, int(span / 2 // period))
    est = period
    for m in range(2, top + 1):
        longer, r = _refine(acf, m * est, cfg.step_s, cfg.sharpen_spread)
        if r >= cfg.min_acf:
            est = longer / m
    return est


def _repeats(acf: Array, period: float, r: float, cfg: PeriodConfig) -> bool:
    """Whether the series repeats at `period`: its autocorrelation there, times the share of the
    series that overlaps at that lag, is at least min_acf, and it is at least min_dip above its
    lowest at a shorter lag (a smooth, slow series correlates with
    itself at every short lag without repeating)."""
    k = round(period / cfg.step_s)
    shown = r * (1.0 - k / len(acf))  # the overlap's share: two cycles of a long history prove little
    return 1 < k < len(acf) and shown >= cfg.min_acf and r - float(acf[1:k].min()) >= cfg.min_dip


def _harmonic(f: float, f0: float, df: float) -> bool:
    """Whether f is (within a bin and 1 % per multiple) a multiple of f0."""
    k = round(f / f0)
    return 2 <= k <= 24 and abs(f - k * f0) <= df + 0.01 * k * f0


def _profile(times: Array, resid: Array, period: float, cfg: PeriodConfig) -> tuple[Array, Array]:
    """The detrended rate folded by phase over the last `occurrences` cycles: (profile, each point's value)."""
    bins = max(1, round(period / cfg.step_s))
    phase = ((np.mod(times, period) / period) * bins).astype(int) % bins
    recent = times > times[-1] - cfg.occurrences * period
    sums = np.bincount(phase[recent], weights=resid[recent], minlength=bins)
    counts = np.bincount(phase[recent], minlength=bins)
    prof = np.where(counts > 0, sums / np.maximum(counts, 1), 0.0)
    return prof, prof[phase]


def _path(periods: Sequence[Period], profiles: Sequence[Array], start: float, count: int, step_s: float) -> Array:
    """The seasonal component (the sum of the profiles) at start + j * step_s, j < count."""
    t = start + step_s * np.arange(count, dtype=float)
    out = np.zeros(count)
    for per, prof in zip(periods, profiles, strict=True):
        bins = len(prof)
        out += prof[((np.mod(t, per.period_s) / per.period_s) * bins).astype(int) % bins]
    return out


def decompose(points: Sequence[Point], now: float, horizon_s: float, cfg: PeriodConfig) -> Fit:
    """Find the periods of one workload's history up to `now` and tabulate the rise ahead for the
    next refit_s (see the module doc). No significant period: a Fit with none, whose rise is 0."""
    times, rates = grid(points, cfg.step_s, now)
    periods = proven(times, rates, find_periods(times, rates, cfg), cfg)
    if not periods:
        return Fit(now, cfg.step_s, ())
    longest = max(p.period_s for p in periods)
    width = max(1, min(len(rates), round(longest / cfg.step_s)))
    from scipy import ndimage  # as in find_periods: only a refit needs it

    trend = ndimage.uniform_filter1d(rates, width, mode="nearest")
    resid = rates - trend
    profiles: list[Array] = []
    for per in periods:
        prof, fitted = _profile(times, resid, per.period_s, cfg)
        profiles.append(prof)
        resid = resid - fitted
    lo, hi = np.quantile(resid[-int(cfg.occurrences * longest / cfg.step_s) :], cfg.quantiles)
    back = math.ceil(_spread(times, rates - trend, periods[0].period_s, profiles[0], cfg) / cfg.step_s)
    look = math.ceil((horizon_s + cfg.lead_s) / cfg.step_s) + back
    count = math.ceil(cfg.refit_s / cfg.step_s) + 2
    path = _path(periods, profiles, now - back * cfg.step_s, back + count + look, cfg.step_s)
    ahead = _ahead(path, back, look, count)
    return Fit(
        now,
        cfg.step_s,
        periods,
        float(rates[-width:].mean()),
        (float(lo), float(hi)),
        tuple(path[back:].tolist()),
        tuple(ahead.tolist()),
    )


def proven(times: Array, rates: Array, periods: Sequence[Period], cfg: PeriodConfig) -> tuple[Period, ...]:
    """The periods that recur out of sample, strongest first: each one's profile, built from the
    history before a held-out stretch, forecasts that stretch with a skill of min_skill at least
    beside the periods kept before it (core/capacity/period_skill.py); the others are dropped. A
    period longer than quick_period_s is tested only on `occurrences` full cycles before that
    stretch (the profile the forecast plans with: period_skill.trains_full_profile), else dropped."""
    kept: list[Period] = []
    for per in periods:
        steps = max(1, round(per.period_s / cfg.step_s))
        if per.period_s > cfg.quick_period_s and not trains_full_profile(
            len(rates), steps, cfg.holdout_share, cfg.occurrences
        ):
            continue
        score = skill(
            times,
            rates,
            [k.period_s for k in kept],
            per.period_s,
            cfg.holdout_share,
            cfg.step_s,
            cfg.occurrences,
            int(cfg.max_spread_s // cfg.step_s),
        )
        if score >= cfg.min_skill:
            kept.append(per)
    return tuple(kept)


def _ahead(path: Array, back: int, look: int, count: int) -> Array:
    """The rise at each of `count` grid points (path[back:] is now on): the highest value within
    `look` steps ahead minus the lowest within `back` steps behind. back 0: the rise from the value
    now. back > 0 (a spread of onsets): a burst due at p is planned for from p - back - look and held
    until p + back, so one that comes that much early or late finds its capacity; one that comes on
    time is planned above its own level for up to `back` steps (the cost of the hold)."""
    view = np.lib.stride_tricks.sliding_window_view
    highs = view(path[back:], look + 1).max(axis=1)[:count]
    lows = view(path, back + 1).min(axis=1)[:count]
    out: Array = np.maximum(highs - lows, 0.0)
    return out


def _spread(times: Array, resid: Array, period: float, profile: Array, cfg: PeriodConfig) -> float:
    """How far the bursts' onsets wander (seconds, at most max_spread_s; 0 when that is 0): each of
    the last `occurrences` full cycles is matched (cross-correlation, shifts up to max_spread_s) to
    the mean of the others (leave-one-out: a cycle inside the mean pulls its shift to 0), and the
    largest shift is the spread. Two cycles measure each other's offset only after the period
    absorbed it, so the spread shows from the third; with two, it is not known, and the most it
    may be is taken: two jittered onsets fix the period as their gap, and the third burst can then
    come several times the jitter off the fold (docs/simulate.md, "Widening by the onsets' spread")."""
    shifts = int(cfg.max_spread_s // cfg.step_s)
    bins = len(profile)
    cycles = [c for c in range(cfg.occurrences) if times[-1] - (c + 1) * period >= times[0] - cfg.step_s]
    if shifts <= 0:
        return 0.0
    if len(cycles) < 3:
        return float(shifts * cfg.step_s)
    phase = ((np.mod(times, period) / period) * bins).astype(int) % bins
    segs = []
    for c in cycles:
        sel = (times > times[-1] - (c + 1) * period) & (times <= times[-1] - c * period)
        sums = np.bincount(phase[sel], weights=resid[sel], minlength=bins)
        counts = np.bincount(phase[sel], minlength=bins)
        segs.append(np.where(counts > 0, sums / np.maximum(counts, 1), 0.0))
    folded = np.asarray(segs)
    worst = 0
    for k in range(len(folded)):
        own = folded[k] - folded[k].mean()
        rest = np.delete(folded, k, axis=0).mean(axis=0)
        scores = [float(np.dot(own, np.roll(rest, d))) for d in range(-shifts, shifts + 1)]
        worst = max(worst, abs(int(np.argmax(scores)) - shifts))
    return float(worst * cfg.step_s)
