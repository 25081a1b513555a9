"""The warm pool through the real controller on a simulated clock: the bursty trace of test_reach
(5 x within one minute, 180 s boots). With a pool the scale-outs start stopped members (ready in
warm_boot_s), so fewer rows are short; the pool's own bill (members warming up, then stopped at
their volumes' price) is counted, and apart."""

from __future__ import annotations

import pytest

from autoscaler.sim.engine import simulate
from tests.sim.test_reach import bursty

pytestmark = [pytest.mark.unit, pytest.mark.slow]


def test_a_pool_starts_members_for_bursts_and_bills_them(make_policy):
    off = simulate(make_policy(scaling={"headroom": 0.2, "burst": False}), bursty(8)).summary()
    pool = make_policy(scaling={"headroom": 0.2, "burst": False, "warm_pool": {"size": 2}})
    on = simulate(pool, bursty(8)).summary()
    assert off["warm_starts"] == 0 and off["warm_pool_cost_usd"] == 0
    assert on["warm_starts"] > 0
    assert on["shortfall_steps"] < off["shortfall_steps"]  # 45 s boots instead of 180 s
    assert 0 < on["warm_pool_cost_usd"] < on["cost_total_usd"]  # counted in the total, and apart


def test_auto_sizes_the_pool_from_the_days_bursts(make_policy):
    auto = make_policy(scaling={"headroom": 0.2, "burst": False, "warm_pool": {"size": "auto"}})
    s = simulate(auto, bursty(8)).summary()
    assert s["warm_starts"] > 0  # the first burst sized it; later bursts started members


def test_stopped_members_cost_their_volumes_only(make_policy):
    cheap = {"size": 2, "volume_gb": 0.0}
    dear = {"size": 2, "volume_gb": 2000.0, "price_per_gb_month": 1.0}
    costs = [
        simulate(make_policy(scaling={"headroom": 0.2, "burst": False, "warm_pool": p}), bursty(4)).warm_pool_cost_usd
        for p in (cheap, dear)
    ]
    # 2000 GB at $1/GB-month is $2.74/h per stopped member: the pool's bill grows by that, no more
    assert costs[1] > costs[0] > 0


def test_a_launch_that_started_a_member_ticks_again_after_warm_boot_s(make_policy):
    """The controller's early tick comes warm_boot_s after a launch that started a pool member (its
    servers go to work then), and boot_s after one that launched a new instance."""
    from autoscaler.sim.engine import Replay, SimOptions, default_plan_fn

    wakes = {}
    for label, pool in (("pool", {"size": 4}), ("none", {"size": 0})):
        scaling = {"headroom": 0.2, "burst": False, "warm_pool": pool, "fast_path": {"enabled": False}}
        policy = make_policy(scaling=scaling)
        trace = bursty(2)
        replay = Replay(policy, trace, SimOptions(), default_plan_fn(policy))
        replay.warm_start()
        t0 = float(trace.times[0])
        replay.tick(t0 + 60)  # the pool is filled
        replay.tick(t0 + 300)  # its members are up: stopped
        report = replay.tick(t0 + 3600)  # the burst: launches
        wakes[label] = (report.outcome.warm_starts, report.wake_at - (t0 + 3600))
    assert wakes["pool"][0] > 0 and wakes["pool"][1] == pytest.approx(45.0)
    assert wakes["none"] == (0, pytest.approx(180.0))


def test_scale_in_refills_the_pool_with_the_instances_it_retires(make_policy):
    """reuse_on_scale_in (EC2 Auto Scaling's ReuseOnScaleIn): after each burst the plan retires
    instances; those stopped into the pool refill it, so fewer members are launched (each warming
    up at the full price) and the pool costs less, with the same bursts covered as well."""
    runs = {}
    for reuse in (True, False):
        pool = {"size": 2, "reuse_on_scale_in": reuse}
        runs[reuse] = simulate(make_policy(scaling={"headroom": 0.2, "burst": False, "warm_pool": pool}), bursty(8))
    on, off = runs[True], runs[False]
    assert off.warm_pool_returns == 0 and on.warm_pool_returns > 0
    assert on.warm_starts >= off.warm_starts > 0  # returned instances are started for later bursts
    assert on.warm_pool_cost_usd < off.warm_pool_cost_usd
    assert on.cost_total_usd < off.cost_total_usd
    assert on.summary()["shortfall_steps"] <= off.summary()["shortfall_steps"]


def test_a_returned_instance_is_billed_as_a_fleet_instance_then_at_its_volumes_price():
    """The simulated provider's pool_return: the instance's fleet life ends (kept in the bill), a
    stopped spell begins at the volumes' price, and a later claim starts it again under a new slot."""
    from autoscaler.fleet.base import POOL_MEMBER, TAG_POOL
    from autoscaler.fleet.sim import SimProvider
    from autoscaler.sim.engine import SimClock

    clock = SimClock(0.0)
    p = SimProvider("f", clock, {"g5": 3.6}, boot_s=180.0, stopped_price_per_hour=0.036)
    inst = p.launch("f-g5-1", "g5", 1)
    clock.t = 3600.0
    p.pool_return(inst.id, "pool-f-1")
    p.pool_return(inst.id, "pool-f-1")  # again: nothing more
    assert [m.id for m in p.pool_members()] == [inst.id] and p.pool_members()[0].state == "stopped"
    assert p.pool_members()[0].tags[TAG_POOL] == POOL_MEMBER and not p.list_instances()
    clock.t = 7200.0
    assert p.cost_usd(7200.0) == pytest.approx(3.6 + 0.036) and p.pool_cost_usd(7200.0) == pytest.approx(0.036)
    again = p.start_pooled(inst.id, "f-g5-2", "g5", 2)
    assert again.id == inst.id and p.warm_starts == 1 and p.returned == 1
    clock.t = 10800.0
    assert p.cost_usd(10800.0) == pytest.approx(2 * 3.6 + 0.036)
    assert p.instance_hours(10800.0) == {"g5": pytest.approx(2.0)}


def test_rows_coarser_than_a_boot_are_scored_where_no_pool_can_help(make_policy):
    """Why the pool buys nothing on ServeGen's 10-minute rows (docs/simulate.md "The warm pool"): a
    row is scored at its first instant, where its jump begins, so only capacity planned before the
    jump covers it; a started member (45 s) is as late there as a new instance (180 s). With a fixed
    headroom the short rows are the same with and without a pool; the pool only shortens the time
    short inside the rows (which headroom auto's feedback then spends on less headroom)."""
    from autoscaler.sim.traces import Trace

    fine = bursty(8)
    rows = fine.rates["a"][::10]  # 10-minute rows: each jump is one whole row
    coarse = Trace("coarse.csv", fine.times[::10], {"a": rows}, 600.0)
    runs = {}
    for size in (0, 2):
        scaling = {"headroom": 0.2, "burst": False, "warm_pool": {"size": size}, "interval_s": 30}
        runs[size] = simulate(make_policy(scaling=scaling), coarse)
    assert runs[2].warm_starts > 0
    assert runs[2].summary()["shortfall_steps"] == runs[0].summary()["shortfall_steps"] > 0
    assert runs[2].summary()["slo_attainment_time"] > runs[0].summary()["slo_attainment_time"]


def test_a_pool_the_scale_in_never_refills_is_refilled_by_launches_after_refill_delay_s(make_policy):
    """Traffic that steps up and stays up retires nothing: the members it started are replaced by
    launches, but only refill_delay_s after the start (until then a scale-in could have refilled
    the pool with no warm-up)."""
    import numpy as np

    from autoscaler.sim.engine import Replay, SimOptions, default_plan_fn
    from autoscaler.sim.traces import Trace

    rows = np.concatenate([np.full(60, 300.0), np.full(120, 1500.0)])  # up at 1 h, for good
    trace = Trace("step.csv", np.arange(len(rows)) * 60.0, {"a": rows}, 60.0)
    pool = {"size": 2, "refill_delay_s": 1800}
    policy = make_policy(scaling={"headroom": 0.2, "burst": False, "warm_pool": pool, "fast_path": {"enabled": False}})
    replay = Replay(policy, trace, SimOptions(), default_plan_fn(policy))
    replay.warm_start()
    for t in (60.0, 300.0):  # the pool is filled, then its members stopped
        replay.tick(t)
    assert len(replay.provider.pool_members()) == 2
    started = replay.tick(3600.0 + 60.0).outcome.warm_starts
    assert started > 0
    left = 2 - started
    for t in np.arange(3720.0, 3660.0 + 1800.0, 60.0):  # within refill_delay_s: no launch
        replay.tick(float(t))
        assert len(replay.provider.pool_members()) == left
    for t in (3660.0 + 1800.0, 3660.0 + 1860.0):  # past it: launched again
        replay.tick(t)
    assert len(replay.provider.pool_members()) == 2 and replay.provider.returned == 0
