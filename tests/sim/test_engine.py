"""The replay engine: real controller, simulated clock and provider, trace-driven rates."""

from __future__ import annotations

import numpy as np
import pytest

from autoscaler.loop.tick.controller import Controller
from autoscaler.sim.compare import compare
from autoscaler.sim.engine import Replay, SimOptions, default_plan_fn, simulate
from autoscaler.sim.memo import MemoPlanner
from autoscaler.sim.trace_rates import TraceRates
from autoscaler.sim.traces import Trace

pytestmark = pytest.mark.unit


def trace_of(values: dict[str, list[float]], step: float = 60.0) -> Trace:
    n = len(next(iter(values.values())))
    return Trace("test.csv", np.arange(n) * step, {k: np.array(v, dtype=float) for k, v in values.items()}, step)


def short_times(result, workload: str = "a") -> list[float]:
    short = result.capacity[workload] < result.trace.rates[workload] - 1e-9
    return [float(t) for t in result.trace.times[short]]


def test_constant_rate_is_always_covered_and_costs_the_plan(make_policy):
    policy = make_policy()
    result = simulate(policy, trace_of({"a": [500.0] * 30}))
    s = result.summary()
    assert s["slo_attainment"] == 1.0 and s["worst_shortfall"] == 0.0
    assert s["scaling_actions"] == 0
    assert s["cost_total_usd"] == pytest.approx(0.5 * 30 * 60 / 3600, rel=1e-6)
    assert s["instance_hours"] == {"g4dn.xlarge": 0.5}


def test_step_up_is_short_until_the_new_instance_has_booted(make_policy):
    """Rate doubles at t=600: the second instance launches then, is ready at 780 (boot_s 180)
    and gets its servers at the tick of 780; rows 600, 660 and 720 fall short, 780 does not."""
    policy = make_policy()
    result = simulate(policy, trace_of({"a": [600.0] * 10 + [1200.0] * 10}))
    assert short_times(result) == [600.0, 660.0, 720.0]
    assert result.launches == 1 and result.terminations == 0
    assert result.summary()["worst_shortfall_at"]["time_s"] == 600.0


def test_boot_time_comes_from_the_policy(make_policy):
    policy = make_policy(scaling={"boot_s": 0})
    result = simulate(policy, trace_of({"a": [600.0] * 10 + [1200.0] * 10}))
    assert short_times(result) == [600.0]  # ready at the next tick (60 s later)


def test_scale_in_waits_for_the_scale_down_delay(make_policy):
    policy = make_policy(scaling={"scale_down_delay_s": 300})
    result = simulate(policy, trace_of({"a": [1200.0] * 10 + [500.0] * 15}))
    cost = dict(zip(result.trace.times.tolist(), result.cost_per_hour.tolist()))
    assert cost[540.0] == cost[840.0] == 1.0  # two instances held while the cheaper plan waits
    assert cost[900.0] == 0.5  # cheaper for 300 s: scaled in at the tick of 900
    assert result.terminations == 1 and result.summary()["slo_attainment"] == 1.0


def test_headroom_and_forecast_come_from_the_policy_or_the_options(make_policy):
    policy = make_policy()
    trace = trace_of({"a": [600.0] * 10 + [1200.0] * 10})
    roomy = simulate(policy, trace, SimOptions(headroom=1.0))
    assert short_times(roomy) == []
    assert roomy.headroom == 1.0 and roomy.forecast == "last"
    assert simulate(policy, trace, SimOptions(forecast="holt")).forecast == "holt"


def test_the_engine_drives_the_real_controller_and_store(make_policy):
    policy = make_policy()
    trace = trace_of({"a": [600.0] * 5 + [1200.0] * 5})
    replay = Replay(policy, trace, SimOptions(), default_plan_fn(policy))
    replay.run()
    assert isinstance(replay.controller, Controller)
    kinds = {a["kind"] for a in replay.store.actions()}
    assert {"launch", "configure"} <= kinds
    times = [float(t) for t in replay.tick_times]
    settles = [t for t in times if t % policy.scaling.interval_s]  # make-before-break links (settle_s)
    assert all(t % policy.scaling.interval_s == policy.scaling.settle_s for t in settles)
    assert replay.ticks == 2 + 9 + len(settles)  # warm start (2), one per interval after t0, settle ticks
    assert replay.store.history()  # lifecycle transitions recorded as for `igniter run`


def test_static_peak_cost_is_the_peak_plan_for_the_whole_trace(make_policy):
    policy = make_policy()
    result = simulate(policy, trace_of({"a": [500.0] * 10 + [2000.0] * 2 + [500.0] * 8}))
    assert result.static_peak_cost_usd == pytest.approx(3 * 0.5 * 20 * 60 / 3600)  # 3 instances for 2000 req/s
    static = simulate(policy, result.trace, SimOptions(strategy="static-peak"))
    assert static.attainment() == 1.0 and static.cost_total_usd == pytest.approx(result.static_peak_cost_usd)


def test_trace_rates_report_the_interval_mean_or_max():
    trace = trace_of({"a": [float(i) for i in range(10)]}, step=1.0)
    mean, peak = TraceRates(trace, 3.0), TraceRates(trace, 3.0, "max")
    assert mean.read(5.0, ["a"]) == {"a": 4.0}  # rows 3, 4, 5
    assert peak.read(5.0, ["a"]) == {"a": 5.0}
    assert mean.read(0.0, ["a"]) == {"a": 1.0}  # the first window: rows 0, 1, 2
    assert mean.read(-1.0, ["a"]) == {"a": None}
    coarse = TraceRates(trace_of({"a": [1.0, 2.0]}, step=600.0), 60.0)
    assert coarse.read(900.0, ["a"]) == {"a": 2.0}  # rows coarser than the window: the latest


def test_trace_rates_reading_only_the_past_never_see_a_row_before_it_starts():
    """By default a read at a row's own time counts the row (a tick on the boundary sees the
    coming minute). With `past` a read sees what the gateway's counters would: the mean since the
    previous read and the busiest row begun in that span. So at 120 the minute before; six seconds
    later (a fast tick) those six seconds of the new row; a first read, the window before it."""
    trace = trace_of({"a": [100.0, 100.0, 400.0, 400.0]})
    row, past = TraceRates(trace, 60.0), TraceRates(trace, 60.0, past=True)
    assert row.read(120.0, ["a"]) == row.peaks(120.0, ["a"]) == {"a": 400.0}
    assert past.read(120.0, ["a"]) == past.peaks(120.0, ["a"]) == {"a": 100.0}
    assert past.read(126.0, ["a"]) == past.peaks(126.0, ["a"]) == {"a": 400.0}
    first = TraceRates(trace, 60.0, past=True)
    assert first.read(126.0, ["a"])["a"] == pytest.approx((54 * 100.0 + 6 * 400.0) / 60)
    assert first.peaks(126.0, ["a"]) == {"a": 400.0}
    assert past.read(0.0, ["a"]) == row.read(0.0, ["a"])  # the warm start reads ahead either way
    coarse = TraceRates(trace_of({"a": [1.0, 2.0]}, step=600.0), 60.0, past=True)
    assert coarse.read(600.0, ["a"]) == {"a": 1.0} and coarse.read(660.0, ["a"]) == {"a": 2.0}


def test_reading_only_the_past_the_fast_path_launches_within_seconds_not_at_the_next_tick(make_policy):
    """The step of test_step_up_is_short_until_the_new_instance_has_booted, with ticks that read
    only the past. The tick of 600 still sees 600 req/s; without the fast path the launch waits for
    the tick of 660 and the new instance serves from 840. The fast path's watcher sees the step
    within seconds and the fast tick, reading the seconds since the tick, launches then: ready at
    782, it serves from the wake tick of 795 (never sooner than settle_s after the tick of 780),
    45 s sooner. The rows short are the same (each row is judged by the fleet at its start), the
    time short is not."""
    trace = trace_of({"a": [600.0] * 10 + [1200.0] * 10})
    past = SimOptions(tick_reads="past")
    slow = simulate(make_policy(scaling={"fast_path": {"enabled": False}}), trace, past)
    fast = simulate(make_policy(), trace, past)
    assert short_times(slow) == short_times(fast) == [600.0, 660.0, 720.0, 780.0]
    assert slow.fast_ticks == 0 and fast.fast_ticks == 1
    short_s = [(1 - r.attainment_time()) * r.trace.duration_s for r in (slow, fast)]
    assert short_s[0] == pytest.approx(240.0) and short_s[1] == pytest.approx(195.0)
    assert fast.summary()["tick_reads"] == "past" and simulate(make_policy(), trace).summary()["tick_reads"] == "row"


def test_memo_planner_answers_repeated_questions_once(make_policy):
    policy = make_policy()
    calls = []

    def fn(*args):
        calls.append(args)
        return default_plan_fn(policy)(*args)

    memo = MemoPlanner(fn, policy)
    first = memo(policy, {"a": 100.0}, {}, {}, None)
    assert memo(policy, {"a": 100.0}, {}, {}, None) is first and len(calls) == 1
    memo(policy, {"a": 101.0}, {}, {}, None)
    assert len(calls) == 2 and (memo.hits, memo.misses) == (1, 2)


def test_tick_errors_are_reported_not_hidden(make_policy):
    policy = make_policy(scaling={"fast_path": {"enabled": False}})  # one tick per interval: 5 fail
    real = default_plan_fn(policy)

    def fragile(policy, rates, corrections, caps, current):
        if rates["a"] > 700 and current is not None:  # the static-peak plan (current None) works
            raise RuntimeError("planner exploded")
        return real(policy, rates, corrections, caps, current)

    result = simulate(policy, trace_of({"a": [500.0] * 5 + [900.0] * 5}), plan_fn=fragile)
    assert result.tick_errors and "planner exploded" in result.tick_errors[0]
    assert result.summary()["tick_errors"] == len(result.tick_errors) == 5


def test_compare_runs_every_strategy_side_by_side(make_policy):
    policy = make_policy()
    results = compare(policy, trace_of({"a": [500.0] * 5 + [900.0] * 5}))
    assert [r.label for r in results] == [
        "igniter/last",
        "igniter/ewma",
        "igniter/holt",
        "igniter/seasonal",
        "igniter/last headroom auto",  # the policy fixes its headroom (0): what auto would have done
        "ffd/last",
        "gslice/last",
        "gpulets/last",
        "static-peak",
        "reactive",
        "oracle",
    ]
    assert len({r.static_peak_cost_usd for r in results}) >= 1
    assert all(0.0 <= r.attainment() <= 1.0 for r in results)


def test_time_weighted_attainment_counts_only_the_short_time(make_policy):
    """Rows of 600 s, ticks every 60 s: the rise at 600 is short until the tick of 780, so the row
    counts short but only 180 s of its 600 s are."""
    policy = make_policy()
    result = simulate(policy, trace_of({"a": [600.0] * 2 + [1200.0] * 2}, step=600.0))
    assert result.attainment() == 0.75
    assert result.attainment_time() == pytest.approx(1 - 180 / 2400)
    assert result.summary()["slo_attainment_time"] == pytest.approx(1 - 180 / 2400, abs=1e-6)


def test_capacity_is_re_predicted_so_an_over_packed_gpu_counts_as_short():
    """An interference-blind packing (what ffd produced for m-mid 1184 / m-small 972 req/s): the two
    servers fit 75 + 25 % of a T4, but co-located both break their latency budget, so neither adds
    capacity; m-mid alone on the same share does."""
    from autoscaler.config.policy import load_policy
    from autoscaler.sim.result import feasible_capacity
    from tests.conftest import ROOT

    policy = load_policy(ROOT / "policies" / "servegen-sim.yaml")
    packed = [("m-mid", "resnet50", 10, 75.0), ("m-small", "alexnet", 9, 25.0)]
    cap, broken = feasible_capacity(policy, [("t4-synthetic", packed)])
    assert (cap, broken) == ({}, 2)
    alone, broken = feasible_capacity(policy, [("t4-synthetic", packed[:1])])
    assert broken == 0 and alone["m-mid"] > 500


def test_min_rate_floor_keeps_a_server_through_a_zero_gap(make_policy):
    """Traffic stops for 15 minutes, then returns: with no floor the fleet scales to nothing and the
    return finds no capacity until a new instance has booted; a 300 req/s floor keeps a server."""
    trace = trace_of({"a": [500.0] * 5 + [0.0] * 15 + [500.0] * 10})
    wl = {"name": "a", "model": "resnet50", "slo_ms": 40, "rate_rps": 600}
    bare = simulate(make_policy(workloads=[wl]), trace)
    floored = simulate(make_policy(workloads=[{**wl, "min_rate_rps": 500}]), trace)
    assert short_times(bare)[0] == 1200.0 and bare.capacity["a"][19] == 0.0
    assert short_times(floored) == [] and floored.capacity["a"].min() >= 500.0
    assert floored.cost_total_usd > bare.cost_total_usd


def test_the_warm_fleet_covers_a_workload_idle_at_the_first_row(make_policy):
    """The warm fleet is sized for the first boot_s + interval_s (what any first plan must cover):
    a workload with no traffic at the first instant and traffic a minute later is not left empty."""
    result = simulate(make_policy(), trace_of({"a": [0.0] + [500.0] * 12}))
    assert result.outage_steps() == 0 and result.summary()["outage_steps"] == 0


def test_outage_and_reconfiguration_rows_are_counted_apart_from_the_forecasts_misses():
    """outage: traffic and no capacity; reconfig short: short, and the capacity before the change
    under way (change_base, NaN at rest) would have covered the row."""
    from autoscaler.sim.result import SimResult

    trace = trace_of({"a": [100.0, 100.0, 300.0, 100.0, 100.0]})
    capacity = {"a": np.array([150.0, 0.0, 200.0, 50.0, 150.0])}
    base = {"a": np.array([np.nan, 150.0, 150.0, 150.0, np.nan])}
    r = SimResult(
        label="t",
        strategy="oracle",
        planner="igniter",
        forecast="last",
        headroom=0.0,
        trace=trace,
        capacity=capacity,
        cost_per_hour=np.zeros(5),
        cost_total_usd=1.0,
        static_peak_cost_usd=1.0,
        instance_hours={},
        change_base=base,
    )
    assert r.outage_steps() == 1  # row 1
    assert r.reconfig_short_steps() == 2  # rows 1 and 3; row 2 (300 > 150 before) is the forecast's
    assert r.summary()["outage_steps"] == 1 and r.summary()["reconfig_short_steps"] == 2
