"""The warm pool's pure decisions (core/fleet/warm_pool.py): which launches start a stopped member,
what the pool needs, and how big `auto` makes it."""

from __future__ import annotations

import pytest

from autoscaler.config.offerings import SPOT
from autoscaler.config.scaling import WarmPoolConfig
from autoscaler.core.fleet.warm_pool import (
    DAY_S,
    Retiring,
    Wanted,
    assign,
    auto_size,
    pooled_types,
    refill,
    refill_waits,
    returns,
    targets,
)
from autoscaler.fleet.base import Instance

pytestmark = pytest.mark.unit


def member(iid: str, state: str = "stopped", itype: str = "g5", at: float = 0.0) -> Instance:
    return Instance(id=iid, instance_type=itype, slot=f"pool-{iid}", state=state, launched_at=at)  # type: ignore[arg-type]


def test_each_on_demand_launch_starts_a_stopped_member_of_its_type_oldest_first():
    members = [member("new", at=50), member("old", at=10), member("warming", "running"), member("p3", itype="p3")]
    wanted = [
        Wanted(slot="a", attempt=0, instance_type="g5"),
        Wanted(slot="b", attempt=2, instance_type="g5", capacity_type=SPOT),  # spot: a new instance
        Wanted(slot="c", attempt=0, instance_type="g5"),
        Wanted(slot="d", attempt=0, instance_type="g5"),  # two stopped g5 only: launched
        Wanted(slot="e", attempt=1, instance_type="p3"),
    ]
    assert assign(wanted, members) == {("a", 0): "old", ("c", 0): "new", ("e", 1): "p3"}


def test_refill_launches_what_lacks_stops_the_initialised_and_trims_stopped_first():
    members = [
        member("s1", at=1),
        member("s2", at=2),
        member("ready", "running", at=3),
        member("booting", "pending", at=99),
        member("other", itype="p3"),
    ]
    out = refill({"g5": 2, "p3": 2}, members, frozenset({"ready"}), now=100, timeout_s=900)
    # g5 holds 4 for a target of 2: the two stopped (oldest first) go; "ready" is stopped; p3 lacks one
    assert out.terminate == ("s1", "s2") and out.stop == ("ready",) and out.launch == ("p3",)
    assert refill({"g5": 4, "p3": 1}, members, frozenset(), now=100, timeout_s=900).empty()


def test_scale_in_returns_on_demand_instances_to_a_pool_below_its_target():
    """ReuseOnScaleIn: a retiring on-demand instance is stopped into its type's pool while the pool
    (members not claimed this tick, launches not yet answered) is below target; no further."""
    members = [member("s1"), member("claimed"), member("p3", itype="p3")]
    retiring = [
        Retiring(slot="a", attempt=0, instance_type="g5"),
        Retiring(slot="b", attempt=1, instance_type="g5", capacity_type=SPOT),  # spot: terminated
        Retiring(slot="c", attempt=0, instance_type="g5"),
        Retiring(slot="d", attempt=0, instance_type="g5"),  # g5 is full again: terminated
        Retiring(slot="e", attempt=0, instance_type="p3"),  # p3's pool is full
        Retiring(slot="f", attempt=0, instance_type="t4"),  # no pool for t4
    ]
    out = returns({"g5": 3, "p3": 1}, members, {"claimed"}, retiring, {})
    assert out == [("a", 0), ("c", 0)]  # g5: 3 wanted, "s1" left after the claim
    assert returns({"g5": 3, "p3": 1}, members, {"claimed"}, retiring, {"g5": 1}) == [("a", 0)]  # one launch pending
    assert returns({"g5": 1}, members, (), retiring, {}) == []  # full


def test_a_type_that_just_gave_a_member_waits_for_the_scale_in_to_refill_it():
    waiting = refill_waits({"g5": 1000.0, "p3": 100.0}, now=1500.0, delay_s=1800.0)
    assert waiting == {"g5", "p3"}
    assert refill_waits({"g5": 1000.0, "p3": 100.0}, now=2000.0, delay_s=1800.0) == {"g5"}  # p3 waited long enough
    assert refill_waits({"g5": 1000.0}, now=1001.0, delay_s=0.0) == frozenset()  # no wait
    out = refill(
        {"g5": 2, "p3": 1}, [member("ready", "running")], frozenset({"ready"}), now=0, timeout_s=9, waiting={"g5"}
    )
    assert out.launch == ("p3",) and out.stop == ("ready",)  # g5 launches nothing, but stops what warmed up


def test_a_member_that_never_finishes_warming_is_replaced():
    members = [member("stuck", "running", at=0)]
    out = refill({"g5": 1}, members, frozenset(), now=1000, timeout_s=900)
    assert out.terminate == ("stuck",) and out.launch == ("g5",)


def test_auto_is_the_largest_scale_out_within_a_boot_over_the_last_day_bringup_excepted():
    now = 10 * DAY_S
    bring_up = [now - 20000 + i for i in range(30)]  # the fleet's first launches: no burst
    burst = [now - 9000, now - 8950, now - 8900]  # three within 180 s
    lone = [now - 3000]
    old = [now - 2 * DAY_S + i for i in range(9)]  # more than a day ago
    first = bring_up[0]
    assert auto_size(bring_up + burst + lone + old, now, 180.0, cap=10, bring_up=first) == 3
    assert auto_size(bring_up + burst, now, 180.0, cap=2, bring_up=first) == 2  # capped at max
    assert auto_size(bring_up, now, 180.0, cap=10, bring_up=first) == 0
    assert auto_size(bring_up, now, 180.0, cap=10, bring_up=None) == 10  # no bring-up known: a burst
    assert auto_size([], now, 180.0, cap=10, bring_up=None) == 0


def test_targets_per_type():
    fixed = WarmPoolConfig(size=2)
    assert targets(fixed, ("g5", "p3"), {}, 0.0, 180.0) == {"g5": 2, "p3": 2}
    auto = WarmPoolConfig(size="auto", max=5)
    now = DAY_S
    launches = {"g5": [now - 5000, now - 3000, now - 2990]}
    assert targets(auto, ("g5", "p3"), launches, now, 180.0) == {"g5": 2, "p3": 0}
    assert pooled_types(WarmPoolConfig(size=1, types=["p3"]), ["g5", "p3"]) == ("p3",)
    assert pooled_types(WarmPoolConfig(size=1), ["g5", "p3"]) == ("g5", "p3")
