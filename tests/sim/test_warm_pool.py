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
