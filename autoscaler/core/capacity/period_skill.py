"""Whether a found period recurs out of sample: its skill on a held-out stretch. Pure.

A period that passes core/capacity/periods.py's tests (Fisher's g, the autocorrelation) can still
be false: on ServeGen's days every one of the 41 periods found in the first half's refits was
(benchmarks/forecast_why.py), a smooth day's shape fitted by a few cycles of whatever period
matched it best, and planning for their "bursts" cost money. A true period's profile, built from
the history before a stretch, forecasts that stretch; a false one's does not. So the last stretch
of the history (`holdout_steps`: at least one cycle, every phase once, and at least a share of the
history) is held out, the profiles are built from the history before it as `decompose` builds
them (the rate less a moving mean over the longest period, folded by phase over the last
`occurrences` cycles, the stronger period first), and the held-out rates are forecast as the
level at its start (the mean over the longest period) plus the profiles at each point's phase.
A period's skill is 1 - SSE(with it) / SSE(without it), the periods kept before it in both: 1 a
perfect forecast, 0 no better than the level, below 0 worse (a profile that says a burst comes
where none does). `decompose` plans only with periods whose skill reaches PeriodConfig.min_skill.
With `scaling.onset_spread_s` set, the period's own profile may come up to that spread early or
late on the held-out stretch, the best shift counting (`skill`'s `spread_steps`): a burst that far
off its fold is one the widened forecast covers, so it does not count against the period.

Two cycles are enough to test a period up to PeriodConfig.quick_period_s: the profile of the
first forecasts the second (the period was measured on both, so this shows the shape recurs at
that phase, not that the length does; the third cycle's refit tests that), and a burst's third
occurrence is planned for. A longer period is tested on the profile the forecast will plan with
(`trains_full_profile`): `occurrences` full cycles before the held-out stretch, so the history must
hold occurrences / (1 - holdout_share) of them (5.33: 5.3 days for a daily period). On ServeGen a
period of 4.6 to 5 hours passed the test on a day's history (5.2 cycles, its profile built from
3.9 of them) for four hourly refits and then stopped recurring; the fleet it left behind cost
more than the defaults in two replayed cells (docs/simulate.md). The arithmetic is a few folds of
the history: nothing next to the periodogram's cost at a refit.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.float64]


def holdout_steps(n: int, period_steps: int, share: float) -> int:
    """Grid points held out to test a period of `period_steps`: one cycle at least, `share` of the
    `n` points if more, and never so many that less than one cycle is left to build it from (0:
    too short a history to test)."""
    return max(0, min(max(period_steps, round(share * n)), n - period_steps))


def trains_full_profile(n: int, period_steps: int, share: float, occurrences: int) -> bool:
    """Whether the `n` points before the held-out stretch of a period of `period_steps` hold
    `occurrences` full cycles: the test then judges a profile built as the forecast's is."""
    return n - holdout_steps(n, period_steps, share) >= occurrences * period_steps


def _phase(times: Array, period_s: float, bins: int) -> npt.NDArray[np.int64]:
    out: npt.NDArray[np.int64] = ((np.mod(times, period_s) / period_s) * bins).astype(np.int64) % bins
    return out


def holdout_forecast(
    times: Array,
    rates: Array,
    periods_s: Sequence[float],
    hold: int,
    level_s: float,
    step_s: float,
    occurrences: int,
    late_steps: int = 0,
) -> Array:
    """The last `hold` rates forecast from the ones before: the mean of the last `level_s` of them
    plus each period's profile (the stronger first, each taken out before the next). `late_steps`:
    the last period's profile read that many grid steps later (earlier where negative), as a burst
    that comes off the fold would be."""
    from scipy import ndimage  # as in periods.py: only a refit needs it

    train_t, train, test_t = times[:-hold], rates[:-hold], times[-hold:]
    width = max(1, min(len(train), round(level_s / step_s)))
    resid = train - ndimage.uniform_filter1d(train, width, mode="nearest")
    out = np.full(hold, float(train[-width:].mean()))
    for k, period in enumerate(periods_s):
        bins = max(1, round(period / step_s))
        phase = _phase(train_t, period, bins)
        recent = train_t > train_t[-1] - occurrences * period
        sums = np.bincount(phase[recent], weights=resid[recent], minlength=bins)
        counts = np.bincount(phase[recent], minlength=bins)
        prof = np.where(counts > 0, sums / np.maximum(counts, 1), 0.0)
        resid = resid - prof[phase]
        late = late_steps * step_s if k == len(periods_s) - 1 else 0.0
        out += prof[_phase(test_t - late, period, bins)]
    return out


def skill(
    times: Array,
    rates: Array,
    kept_s: Sequence[float],
    period_s: float,
    share: float,
    step_s: float,
    occurrences: int,
    spread_steps: int = 0,
) -> float:
    """`period_s`'s out-of-sample skill beside the periods already kept (see the module doc);
    -inf where the history is too short to hold a stretch out. `spread_steps`: the policy's bound
    on how far a burst's onset wanders (scaling.onset_spread_s, on the grid); the period's profile
    may then come up to that many steps early or late on the held-out stretch, the best of those
    shifts counting. The forecast planning with the period is widened by as much
    (periods.py `_spread`), so a burst that far off the fold is one it covers: two jittered onsets
    fix the period as their gap, and the third burst, some minutes off, would otherwise fail the
    test that the widening was declared for."""
    hold = holdout_steps(len(rates), max(1, round(period_s / step_s)), share)
    if hold <= 0:
        return -np.inf
    level_s = max([period_s, *kept_s])
    actual = rates[-hold:]
    without = holdout_forecast(times, rates, kept_s, hold, level_s, step_s, occurrences)
    base = float(np.square(actual - without).sum())
    if base <= 0:
        return 0.0
    periods = [*kept_s, period_s]

    def sse(late: int) -> float:
        with_it = holdout_forecast(times, rates, periods, hold, level_s, step_s, occurrences, late)
        return float(np.square(actual - with_it).sum())

    return 1.0 - min(sse(d) for d in range(-spread_steps, spread_steps + 1)) / base
