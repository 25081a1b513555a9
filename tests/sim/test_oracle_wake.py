"""The oracle strategy (a perfect forecast of the coming boot_s + interval_s), early ticks at
TickReport.wake_at in the replay, and the compare list that includes both seasonal and oracle."""

from __future__ import annotations

import math

import numpy as np
import pytest

from autoscaler.sim.compare import compare_options
from autoscaler.sim.engine import SimOptions, simulate, with_overrides
from autoscaler.sim.strategies import oracle_horizon_s
from autoscaler.sim.trace_rates import FutureRates
from autoscaler.sim.traces import Trace

pytestmark = pytest.mark.unit


STEP_UP = [600.0] * 10 + [1200.0] * 10  # rows of 60 s: the rate doubles at t=600


def trace_of(values: list[float], step: float = 60.0) -> Trace:
    return Trace("test.csv", np.arange(len(values)) * step, {"a": np.array(values, dtype=float)}, step)


def grid_ticks(policy, trace: Trace) -> int:  # type: ignore[no-untyped-def]
    """Warm start (2) and one per interval after t0 (Replay.run's grid, early ticks aside)."""
    return 2 + math.ceil(trace.duration_s / policy.scaling.interval_s) - 1


# -- the oracle ------------------------------------------------------------------------------------
def test_future_rates_report_the_busiest_row_of_the_coming_horizon():
    trace = trace_of([1.0, 5.0, 2.0, 9.0, 3.0, 0.0, 7.0], step=1.0)
    future = FutureRates(trace, 2.0)
    assert future.read(0.0, ["a"]) == {"a": 5.0}  # rows 0, 1, 2
    assert future.read(1.5, ["a"]) == {"a": 9.0}  # row 1 (holds at 1.5) to 3.5: rows 1, 2, 3
    assert future.read(4.0, ["a"]) == {"a": 7.0}  # rows 4, 5, 6
    assert future.read(6.0, ["a"]) == {"a": 7.0}  # past the end: the last row
    assert future.read(0.0, ["a", "b"])["b"] is None


def test_oracle_covers_a_step_up_that_last_with_no_headroom_misses(make_policy):
    policy = make_policy(scaling={"forecast": "last", "headroom": 0.0})
    trace = trace_of(STEP_UP)
    last = simulate(policy, trace)
    oracle = simulate(policy, trace, SimOptions(strategy="oracle"))
    assert last.attainment() < 1.0
    assert oracle.attainment() == 1.0 and oracle.summary()["slo_attainment"] == 1.0
    assert oracle.attainment_time() == 1.0
    assert oracle.label == "oracle" and oracle.forecast == "last" and oracle.headroom == 0.0
    assert oracle.cost_total_usd <= simulate(policy, trace, SimOptions(strategy="static-peak")).cost_total_usd


def test_oracle_ignores_the_policys_forecast_and_headroom(make_policy):
    policy = make_policy(scaling={"forecast": "holt", "headroom": 0.5})
    sc = with_overrides(policy, SimOptions(strategy="oracle", headroom=0.5, forecast="ewma")).scaling
    assert (sc.forecast, sc.headroom) == ("last", 0.0)


# -- early ticks -----------------------------------------------------------------------------------
# boot_s 150 with a 60 s interval: a boot ends between two grid ticks, so waking for it is an extra
# tick; 30 s rows: the rows between the boot's end and the next grid tick see the difference.
def _wake_runs(make_policy):  # type: ignore[no-untyped-def]
    trace = trace_of([600.0] * 20 + [1200.0] * 20, step=30.0)
    off = make_policy(scaling={"boot_s": 150, "settle_s": 0, "fast_path": {"enabled": False}})
    on = make_policy(scaling={"boot_s": 150})  # settle_s: the default (15)
    assert on.scaling.settle_s > 0
    return trace, off, simulate(off, trace), on, simulate(on, trace)


def test_settle_s_zero_ticks_on_the_grid_only(make_policy):
    trace, off, no_wake, _, _ = _wake_runs(make_policy)
    assert no_wake.launches >= 1  # there was a boot to wake for
    assert no_wake.ticks == grid_ticks(off, trace)
    assert no_wake.summary()["ticks"] == grid_ticks(off, trace)


def test_default_settle_ticks_early_when_a_boot_is_due(make_policy):
    trace, _, _, on, wake = _wake_runs(make_policy)
    assert wake.launches >= 1
    assert wake.ticks > grid_ticks(on, trace)
    assert wake.tick_times is not None
    off_grid = [t for t in wake.tick_times.tolist() if (t - float(trace.times[0])) % on.scaling.interval_s]
    assert off_grid, "an early tick off the interval grid"


def test_early_ticks_never_lower_attainment(make_policy):
    _, _, no_wake, _, wake = _wake_runs(make_policy)
    assert wake.attainment() >= no_wake.attainment()
    assert wake.attainment_time() >= no_wake.attainment_time()
    assert wake.attainment() > no_wake.attainment()  # on this trace the new instance serves one row sooner
    short = lambda r: set(r.trace.times[r.capacity["a"] < r.trace.rates["a"] - 1e-9].tolist())  # noqa: E731
    assert short(wake) <= short(no_wake)  # every row short with wakes was short without


def test_boot_on_the_grid_adds_no_ticks(make_policy):
    """boot_s 180 = 3 intervals: the wake for a boot falls on a grid tick, which it does not repeat.
    The only ticks off the grid are make-before-break links, settle_s after the tick before."""
    policy = make_policy()
    trace = trace_of(STEP_UP)
    result = simulate(policy, trace)
    assert result.tick_times is not None
    times = result.tick_times.tolist()[1:]  # the warm start's two ticks share t0
    off = [t for t in times if t % policy.scaling.interval_s]
    assert len(times) == len(set(times)) and all(t % policy.scaling.interval_s == policy.scaling.settle_s for t in off)
    assert result.launches >= 1 and result.ticks == grid_ticks(policy, trace) + len(off)


# -- compare -----------------------------------------------------------------------------------------
def test_compare_options_include_seasonal_and_oracle(make_policy):
    policy = make_policy()
    opts = compare_options(policy, SimOptions(headroom=0.3))
    labels = [o.describe(with_overrides(policy, o)) for o in opts]
    assert "igniter/seasonal" in labels and "oracle" in labels
    assert len(labels) == len(set(labels))
    oracle = opts[labels.index("oracle")]
    assert oracle.strategy == "oracle" and oracle.headroom == 0.3  # base's headroom kept (the override drops it)
    assert opts[labels.index("igniter/seasonal")].forecast == "seasonal"


def test_seasonal_runs_in_the_simulator_like_ewma_on_a_trace_shorter_than_a_season(make_policy):
    """No past season in a short trace: seasonal is ewma."""
    policy = make_policy()
    trace = trace_of([600.0] * 5 + [1200.0] * 5 + [600.0] * 10)
    seasonal = simulate(policy, trace, SimOptions(forecast="seasonal"))
    ewma = simulate(policy, trace, SimOptions(forecast="ewma"))
    assert seasonal.forecast == "seasonal"
    assert np.array_equal(seasonal.capacity["a"], ewma.capacity["a"])
    assert seasonal.cost_total_usd == pytest.approx(ewma.cost_total_usd)


@pytest.mark.parametrize("boot_s", [40.0, 180.0])
def test_the_oracle_looks_ahead_over_interval_plus_boot(make_policy, boot_s):
    """A tick's decision stands until the next tick's launches are ready: interval_s + boot_s. A
    burst in the last row of that window is planned for now, one a row beyond it is not; the
    window is as long with a 40 s boot as the decision stands, not shorter."""
    policy = make_policy(scaling={"interval_s": 60, "boot_s": boot_s})
    h = oracle_horizon_s(policy.scaling)
    assert h == 60.0 + boot_s
    rows = [1.0] * 40
    last = int(h // 10)  # 10 s rows: the row holding now + h
    rows[last] = 9.0
    future = FutureRates(trace_of(rows, step=10.0), h)
    assert future.read(0.0, ["a"]) == {"a": 9.0}
    assert future.read(10.0, ["a"]) == {"a": 9.0}
    rows[last], rows[last + 1] = 1.0, 9.0
    assert FutureRates(trace_of(rows, step=10.0), h).read(0.0, ["a"]) == {"a": 1.0}
