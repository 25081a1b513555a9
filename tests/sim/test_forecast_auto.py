"""`forecast: auto` in a replay through the real controller (loop/tick/tuning.py, core/capacity/
periods.py): on a generated trace with an hourly burst (benchmarks/burst_traces.py), the period is
found and, from the third occurrence on, the capacity for each burst is launched a boot ahead of
it, so the burst's first minute is covered; the default forecast (`seasonal`) reacts to every
burst one boot late. A wrong forecast's extra capacity leaves on the normal scale-down rules."""

from __future__ import annotations

import numpy as np
import pytest

from autoscaler.core.capacity.periods import PeriodConfig, decompose
from autoscaler.sim.engine import simulate
from tests.kit import benchmod

pytestmark = pytest.mark.unit

bt = benchmod.load("burst_traces")


def burst_starts(trace, base: float) -> list[int]:
    """The first row of each burst: above twice the base after a row below it."""
    hot = trace.rates["a"] > 2 * base
    return [i for i in range(1, len(hot)) if hot[i] and not hot[i - 1]]


def short(result) -> set[int]:
    return set(np.flatnonzero(result.capacity["a"] < result.trace.rates["a"] - 1e-9).tolist())


@pytest.mark.slow  # replays 12 to 16 hours of bursts, 3 s of CPU
def test_auto_covers_each_burst_after_the_second_from_its_first_minute(make_policy) -> None:
    """Six hours, a burst of 300 -> 1,200 req/s every hour (rise 90 s, +-60 s jitter, 3 % noise;
    seed 5, not one the constants were chosen on). `seasonal` (ewma, a day's season: no history
    of it here) is short in the first rows of all six bursts; `auto` finds the hour after two
    occurrences and is short only in the first two, at a cost above `seasonal`'s (it pays for
    the burst's capacity a boot + lead early) but below twice it."""
    trace = bt.make({"a": bt.Bursts(base_rps=300.0)}, 6.0, seed=5)
    pts = list(zip(trace.times.tolist(), trace.rates["a"].tolist(), strict=True))
    found = decompose([p for p in pts if p[0] <= 7200.0], 7200.0, 240.0, PeriodConfig()).periods
    assert len(found) == 1 and abs(found[0].period_s - 3600.0) < 0.03 * 3600.0
    starts = burst_starts(trace, 300.0)
    assert len(starts) == 6
    auto = simulate(make_policy(scaling={"forecast": "auto"}), trace)
    seasonal = simulate(make_policy(scaling={"forecast": "seasonal"}), trace)
    assert all(s in short(seasonal) for s in starts)
    assert [s for s in starts if s in short(auto)] == starts[:2]
    assert short(auto) <= short(seasonal) and max(short(auto)) < starts[2]
    cost_auto, cost_seasonal = auto.summary()["cost_total_usd"], seasonal.summary()["cost_total_usd"]
    assert cost_seasonal < cost_auto < 2 * cost_seasonal
    periods = auto.summary()["forecast_periods_s"]["a"]  # simulate --json: what auto found, and used
    assert len(periods) == 1 and abs(periods[0] - 3600.0) < 0.03 * 3600.0
    assert auto.summary()["forecast_ahead_ticks"]["a"] >= 4 * 4  # bursts 3-6, a boot + lead ahead of each
    assert seasonal.summary()["forecast_ahead_ticks"] == {"a": 0} and seasonal.summary()["forecast_periods_s"] == {
        "a": []
    }


def test_auto_on_noise_plans_as_seasonal(make_policy) -> None:
    """No period in three hours of noise: `auto` falls back to `seasonal`, to the cent."""
    rng = np.random.default_rng(11)
    rates = 400.0 * (1 + 0.05 * rng.standard_normal(180))
    trace = bt.Trace("noise.csv", np.arange(180) * 60.0, {"a": np.maximum(rates, 0.0)}, 60.0)
    auto = simulate(make_policy(scaling={"forecast": "auto"}), trace)
    seasonal = simulate(make_policy(scaling={"forecast": "seasonal"}), trace)
    assert auto.summary()["cost_total_usd"] == seasonal.summary()["cost_total_usd"]
    assert short(auto) == short(seasonal)


@pytest.mark.slow  # replays 12 to 16 hours of bursts, 3 s of CPU
def test_a_burst_that_does_not_come_leaves_on_the_scale_down_rules(make_policy) -> None:
    """Hourly bursts for four hours, then none: ahead of the fifth hour's (absent) burst `auto`
    launches its capacity, and the normal scale-down (scale_down_delay_s 300 s) takes it away:
    by half an hour after the missing burst's time the fleet is the one `seasonal` holds."""
    trace = bt.make({"a": bt.Bursts(base_rps=300.0)}, 6.0, seed=6)
    rates = trace.rates["a"].copy()
    rates[4 * 60 :] = np.minimum(rates[4 * 60 :], 330.0)
    quiet = bt.Trace("quiet.csv", trace.times, {"a": rates}, 60.0)
    auto = simulate(make_policy(scaling={"forecast": "auto"}), quiet)
    seasonal = simulate(make_policy(scaling={"forecast": "seasonal"}), quiet)
    missing = 4 * 60 + 20  # the fifth burst's row, had it come
    assert auto.capacity["a"][missing - 4 : missing + 4].max() > seasonal.capacity["a"][missing - 4 : missing + 4].max()
    assert np.array_equal(auto.capacity["a"][missing + 30 : 5 * 60], seasonal.capacity["a"][missing + 30 : 5 * 60])
    assert not short(auto) & set(range(4 * 60, 6 * 60))


@pytest.mark.slow  # replays 12 to 16 hours of bursts, 3 s of CPU
def test_onset_spread_covers_a_jittered_third_burst(make_policy) -> None:
    """Eight hours of an hourly burst whose onsets wander +-180 s (benchmarks/forecast_auto.py's
    `hourly, jitter 180 s`, tune seed 10). Fit on two cycles, the period is the first two onsets'
    gap and `auto` plans the third burst where it did not come, so that burst is short at its
    first row; with `scaling.onset_spread_s: 300` the two-cycle fit is widened by all of it (the
    spread cannot be measured before a third cycle) and every burst from the third on is covered
    from its first minute, for a little more money."""
    spec = bt.Bursts(jitter_s=180.0, base_rps=300.0)
    trace = bt.make({"a": spec}, 8.0, seed=10)
    starts = burst_starts(trace, 300.0)[2:]
    plain = simulate(make_policy(scaling={"forecast": "auto"}), trace)
    wide = simulate(make_policy(scaling={"forecast": "auto", "onset_spread_s": 300.0}), trace)
    assert [s for s in starts if s in short(plain)] == starts[:1]
    assert not [s for s in starts if s in short(wide)]
    assert short(wide) <= short(plain)
    assert (
        plain.summary()["cost_total_usd"] < wide.summary()["cost_total_usd"] < 1.1 * plain.summary()["cost_total_usd"]
    )
