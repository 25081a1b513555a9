"""Why `forecast: auto` finds no daily period in ServeGen's m-large and m-mid: the detrend, or the
traffic? (issue 52)

core/capacity/periods.py removes a straight line (scipy.signal.detrend) before its periodogram
and autocorrelation tests. A weekly swing or a slow drift is not a line, so the question was
whether a detrend that follows it would let the daily period through. Each variant below replaces
that one call, and nothing else, while find_periods runs on each shipped trace's whole history
(1-minute grid) and on the controller's hourly refits of the last day:

- `linear`: today's;
- `median 1 d`: minus a moving median over a day (ndimage.median_filter): follows the weekly
  swing, keeps anything shorter than a day;
- `mean span/3`: minus a moving mean over a third of the history;
- `bp 2 d`: scipy.signal.detrend with a breakpoint every two days (a piecewise line).

Per workload and variant: the periods found over the whole trace, the share of the detrended
variance at the daily bin, and the autocorrelation's peak within 3 % of a day's lag (0: it has
none there; the repetition test asks PeriodConfig.min_acf = 0.25 of it, times the overlap); and
how many hourly refits of the last day found a period (a day holds no daily period: longer ones
need three cycles; these are the shorter ones `auto` plans with). A variant would be adopted only where it found the daily period and then left every
shipped trace no worse in a replay (forecast_auto.py --replay).

    python benchmarks/forecast_detrend.py      # about 15 s

Writes benchmarks/results/forecast_detrend.json.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import numpy as np
from _results import ROOT, Results
from scipy import ndimage, signal

from autoscaler.core.capacity import periods as P
from autoscaler.sim.traces import read_wide

TRACES = ("servegen-3models-1min.csv",)  # the wide file holds the same rates; Azure's 1-minute trace is an hour
DAY = 86400.0
Detrend = Callable[[np.ndarray], np.ndarray]
LINEAR: Detrend = signal.detrend


def _median_day(x: np.ndarray) -> np.ndarray:
    return x - ndimage.median_filter(x, size=min(len(x), 1441) | 1, mode="nearest")


def _mean_third(x: np.ndarray) -> np.ndarray:
    return x - ndimage.uniform_filter1d(x, max(3, len(x) // 3), mode="nearest")


def _breakpoints(x: np.ndarray) -> np.ndarray:
    return LINEAR(x, bp=list(range(2880, len(x), 2880))) if len(x) > 2880 else LINEAR(x)


VARIANTS: dict[str, Detrend] = {
    "linear": LINEAR,
    "median 1 d": _median_day,
    "mean span/3": _mean_third,
    "bp 2 d": _breakpoints,
}


@contextlib.contextmanager
def detrending(fn: Detrend) -> Iterator[None]:
    """find_periods' one call to scipy.signal.detrend(rates) answered by `fn` (other calls as before)."""

    def call(x: np.ndarray, *args: object, **kw: object) -> np.ndarray:
        return LINEAR(x, *args, **kw) if args or kw else fn(x)

    signal.detrend = call
    try:
        yield
    finally:
        signal.detrend = LINEAR


def daily(rates: np.ndarray, fn: Detrend) -> tuple[float, float]:
    """(the daily bin's share of the detrended variance, the autocorrelation's peak near a day)."""
    x = fn(rates)
    f, p = signal.periodogram(x, fs=1.0 / 60.0, detrend=False)
    share = float(p[int(np.argmin(abs(f - 1.0 / DAY)))] / p[1:].sum())
    _, r = P._refine(P._acf(x - x.mean()), DAY, 60.0)
    return share, r


def main() -> None:
    res = Results("forecast_detrend", "python benchmarks/forecast_detrend.py")
    res.line(
        "whole",
        "| trace | workload | detrend | periods found (h) | daily share | ACF peak at 1 d | hourly refits with a period |",
    )
    res.line("whole", "| --- | --- | --- | --- | --- | --- | --- |")
    cfg = P.PeriodConfig()
    for name in TRACES:
        tr = read_wide(ROOT / "traces" / name)
        for w in tr.names:
            pts = list(zip(tr.times.tolist(), tr.rates[w].tolist(), strict=True))
            times, rates = P.grid(pts, 60.0, float(tr.times[-1]))
            ends = np.arange(tr.times[0] + 7200.0, tr.times[-1], cfg.refit_s)
            lo = np.searchsorted(tr.times, ends - DAY, side="left")
            hi = np.searchsorted(tr.times, ends, side="right")
            spans = list(zip(lo.tolist(), hi.tolist(), ends.tolist(), strict=True))
            for label, fn in VARIANTS.items():
                with detrending(fn):
                    found = P.find_periods(times, rates, cfg)
                    refits = sum(bool(P.decompose(pts[a:b], float(end), 240.0, cfg).periods) for a, b, end in spans)
                share, r = daily(rates, fn) if len(rates) > 2 * DAY / 60 else (0.0, 0.0)
                key = f"{name.split('.')[0]}/{w}/{label.replace(' ', '_').replace('/', '_')}"
                res.figure(f"{key}/daily_found", int(any(abs(p.period_s - DAY) < 0.05 * DAY for p in found)))
                res.figure(f"{key}/refits_with_period", refits)
                periods = ", ".join(f"{p.period_s / 3600:.2f}" for p in found) or "-"
                res.line(
                    "whole",
                    f"| {name} | {w} | {label} | {periods} | {share:.3f} | {r:.3f} | {refits} of {len(ends)} |",
                )
    res.write()


if __name__ == "__main__":
    main()
