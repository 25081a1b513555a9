"""reconcile with surge capacity: the budget (scaling.max_surge), the limits that forbid it (and the
Breach they cause), the gateway's `drained` hook, and surge instances that never outlive a move."""

from __future__ import annotations

from dataclasses import replace

import pytest

from autoscaler.core.fleet.lifecycle import State
from autoscaler.core.rollout.reconcile import Configure, Drain, Launch, Limits, Terminate
from autoscaler.core.rollout.surge import TypeInfo, is_surge_slot, surge_budget
from tests.core.test_reconcile import done, never_below, rec, run, share, slot
from tests.kit.paperfleet import fleet

pytestmark = pytest.mark.unit


P3 = {"p3": TypeInfo(name="p3", gpu="v100", gpus=1, price_per_hour=3.0)}
CALM = Limits(types=P3, burst=False)  # free share left to planned servers: where surge goes without bursting
SWAP = [slot("s0", share("a-1", "a", 1, 70.0)), slot("s1", share("b-1", "b", 0, 60.0))]
SWAP_APPLIED = {"s0": (share("b-0", "b", 0, 60.0),), "s1": (share("a-0", "a", 0, 70.0),)}
SWAP_RECORDS = [rec("s0"), rec("s1")]


def launches(d) -> list[Launch]:  # type: ignore[no-untyped-def]
    return [a for a in d.actions if isinstance(a, Launch)]


def test_the_default_budget_is_one_or_ten_percent_of_the_fleet() -> None:
    assert [surge_budget(None, n) for n in (0, 1, 9, 10, 11, 25)] == [1, 1, 1, 1, 2, 3]
    assert surge_budget(0, 50) == 0 and surge_budget(4, 3) == 4
    assert surge_budget("25%", 10) == 3 and surge_budget("0%", 10) == 0


def test_a_surge_instance_is_the_cheapest_type_with_the_blocked_gpu() -> None:
    types = {
        "p3": TypeInfo(name="p3", gpu="v100", gpus=1, price_per_hour=3.0),
        "p3x4": TypeInfo(name="p3x4", gpu="v100", gpus=4, price_per_hour=2.5),
        "g5": TypeInfo(name="g5", gpu="a10", gpus=1, price_per_hour=1.0),
    }
    d = run(SWAP, SWAP_RECORDS, SWAP_APPLIED, ready={"a-0", "b-0"}, limits=Limits(types=types, fleet="f"))
    [surge] = launches(d)
    assert surge.instance_type == "p3x4" and surge.slot == "f-p3x4-surge0" and "surge" in surge.reason


def test_max_surge_zero_allows_break_before_make_and_says_so() -> None:
    d = run(SWAP, SWAP_RECORDS, SWAP_APPLIED, ready={"a-0", "b-0"}, limits=Limits(max_surge=0, types=P3))
    assert not launches(d)
    [breach] = d.breaches
    assert breach.limit == "max_surge" and breach.servers in (("b-0",), ("a-0",))
    assert any("break-before-make" in n and "max_surge" in n for n in d.notes)
    assert d.step is not None and d.step.short()  # the workload it broke is below its floor, shown


def test_max_instances_forbidding_the_surge_is_a_breach() -> None:
    capped = {"p3": TypeInfo(name="p3", gpu="v100", gpus=1, price_per_hour=3.0, max_instances=2)}
    d = run(SWAP, SWAP_RECORDS, SWAP_APPLIED, ready={"a-0", "b-0"}, limits=Limits(types=capped))
    assert not launches(d) and [b.limit for b in d.breaches] == ["max_instances"]


def test_the_fleets_instance_limit_forbidding_the_surge_is_a_breach() -> None:
    """scaling.max_instances counts surge instances too: at the limit, the swap breaks, reported."""
    d = run(SWAP, SWAP_RECORDS, SWAP_APPLIED, ready={"a-0", "b-0"}, limits=Limits(types=P3, max_instances=2))
    assert not launches(d) and [b.limit for b in d.breaches] == ["max_instances"]
    d = run(SWAP, SWAP_RECORDS, SWAP_APPLIED, ready={"a-0", "b-0"}, limits=Limits(types=P3, max_instances=3))
    assert len(launches(d)) == 1 and not d.breaches


def test_max_cost_per_hour_forbidding_the_surge_is_a_breach() -> None:
    d = run(SWAP, SWAP_RECORDS, SWAP_APPLIED, ready={"a-0", "b-0"}, limits=Limits(types=P3, max_cost_per_hour=8.0))
    assert not launches(d) and [b.limit for b in d.breaches] == ["max_cost_per_hour"]


def test_a_busy_surge_budget_makes_a_move_wait_not_break() -> None:
    """Two independent swaps and a budget of one surge instance: the first gets it (booting), the
    second waits for it, noted, and nothing breaks; with a budget of two both move at once."""
    second = [slot("s2", share("c-1", "c", 1, 70.0)), slot("s3", share("d-1", "d", 0, 60.0))]
    applied = {**SWAP_APPLIED, "s2": (share("d-0", "d", 0, 60.0),), "s3": (share("c-0", "c", 0, 70.0),)}
    records = [*SWAP_RECORDS, rec("s2"), rec("s3"), rec("igniter-p3-surge0", State.PENDING)]
    ready = {"a-0", "b-0", "c-0", "d-0"}
    d = run(SWAP + second, records, applied, ready=ready, limits=Limits(types=P3))
    assert not launches(d) and not d.breaches and d.surge_slots == {"igniter-p3-surge0"}
    assert any("waits for the surge budget" in n for n in d.notes)
    d = run(SWAP + second, records, applied, ready=ready, limits=Limits(types=P3, max_surge=2))
    assert [a.slot for a in launches(d)] == ["igniter-p3-surge1"] and not d.breaches


def test_an_idle_surge_instance_is_retired_at_once() -> None:
    records = [rec("s0"), rec("igniter-p3-surge3"), rec("igniter-p3-surge4", State.PENDING)]
    layout = [slot("s0", share("a-0", "a", 0, 50.0))]
    d = run(layout, records, {"s0": (share("a-0", "a", 0, 50.0),), "igniter-p3-surge3": ()}, ready={"a-0"})
    ends = {a.slot: a.detail for a in d.actions if isinstance(a, Terminate)}
    assert ends == {
        "igniter-p3-surge3": "surge instance no longer needed",
        "igniter-p3-surge4": "surge instance no longer needed",
    }


def test_the_swap_completes_through_surge_and_every_step_keeps_the_floor() -> None:
    pf = fleet(SWAP, dict(SWAP_APPLIED), limits=Limits(types=P3))
    pf.run()
    assert done(pf) and not any(d.breaches for d in pf.diffs)
    never_below(pf)
    surge = [a.slot for d in pf.diffs for a in d.actions if isinstance(a, Launch)]
    assert len(surge) == 1 and is_surge_slot(surge[0]) and surge[0] not in pf.records


def test_with_a_gateway_a_retiring_server_leaves_only_once_drained() -> None:
    """b-0 moves from s0 (surplus) to s1: once b-1 serves, b-0 drains (Diff.draining, for the
    gateway to send it nothing new) and stays assigned until the gateway reports it drained; s0
    terminates only after all its servers have left."""
    layout = [slot("s1", share("b-1", "b", 0, 50.0))]
    applied = {"s0": (share("b-0", "b", 0, 50.0), share("c-0", "c", 1, 30.0)), "s1": (share("b-1", "b", 0, 50.0),)}
    ready = {"b-0", "b-1", "c-0"}
    d = run(layout, [rec("s0"), rec("s1")], applied, ready=ready, drained=frozenset())
    assert d.draining == {"b-0", "c-0"} and not [a for a in d.actions if isinstance(a, (Drain, Terminate))]
    d = run(layout, [rec("s0"), rec("s1")], applied, ready=ready, drained=frozenset({"b-0"}))
    [conf] = [a for a in d.actions if isinstance(a, Configure)]
    assert conf.slot == "s0" and [s.name for s in conf.servers] == ["c-0"] and d.draining == {"c-0"}
    d = run(layout, [rec("s0"), rec("s1")], applied, ready=ready, drained=frozenset({"b-0", "c-0"}))
    assert [(type(a).__name__, a.slot) for a in d.actions] == [("Drain", "s0"), ("Terminate", "s0")]
    assert d.draining == frozenset()
    d = run(layout, [rec("s0"), rec("s1")], applied, ready=ready)  # no gateway: drained at once
    assert [(type(a).__name__, a.slot) for a in d.actions] == [("Drain", "s0"), ("Terminate", "s0")]


def test_a_draining_server_goes_back_to_serving_when_it_is_needed_again() -> None:
    """b-1 stopped reporting ready: b-0 no longer drains (the gateway gives it traffic again)."""
    layout = [slot("s1", share("b-1", "b", 0, 50.0))]
    applied = {"s0": (share("b-0", "b", 0, 50.0),), "s1": (share("b-1", "b", 0, 50.0),)}
    d = run(layout, [rec("s0"), rec("s1")], applied, ready={"b-0"}, drained=frozenset())
    assert d.draining == frozenset() and d.actions == ()


def test_a_spare_booting_instance_stays_as_surge_instead_of_a_new_launch() -> None:
    """A re-plan no longer wants s9 (booting, launched for an earlier plan) and puts the swap on GPUs
    still full: the stand-in goes on s9 on paper, which stays (it is ready sooner than a new surge
    instance and paid for already) and counts against the surge budget."""
    records = [*SWAP_RECORDS, rec("s9", State.PENDING)]
    d = run(SWAP, records, SWAP_APPLIED, ready={"a-0", "b-0"}, limits=Limits(types=P3))
    assert not launches(d) and not d.breaches and d.surge_slots == {"s9"}
    assert not [a for a in d.actions if isinstance(a, Terminate)]
    assert any("s9, no longer planned, stays" in n for n in d.notes)
    d = run(SWAP, records, SWAP_APPLIED, ready={"a-0", "b-0"}, limits=Limits(types=P3, max_surge=0))
    assert [a.slot for a in d.actions if isinstance(a, Terminate)] == ["s9"] and d.breaches


def test_a_spare_ready_instance_takes_the_stand_in_at_once() -> None:
    records = [*SWAP_RECORDS, rec("s9")]
    d = run(SWAP, records, {**SWAP_APPLIED, "s9": ()}, ready={"a-0", "b-0"}, limits=Limits(types=P3))
    assert not launches(d) and not d.breaches and d.surge_slots == {"s9"}
    [conf] = [a for a in d.actions if isinstance(a, Configure) and a.slot == "s9"]
    assert [s.name for s in conf.servers] in (["a-1-s0"], ["b-1-s0"])


def test_the_swap_completes_on_a_spare_and_retires_it() -> None:
    """The whole move with a ready spare: no surge launch, the floor kept at every step, and the
    spare is retired once the move is done."""
    pf = fleet(SWAP, {**SWAP_APPLIED, "s9": ()}, limits=Limits(types=P3))
    pf.run()
    assert done(pf) and not any(d.breaches for d in pf.diffs) and "s9" not in pf.records
    assert not [a for d in pf.diffs for a in d.actions if isinstance(a, Launch)]
    never_below(pf)


def test_a_booting_surge_instance_launched_first_carries_a_new_server_still_booting() -> None:
    """A re-plan drops the move a booting surge instance was launched for and plans b's new server
    on an instance launched now: the surge instance is ready first, so it stays and carries b's
    stand-in on paper meanwhile. One launched after the planned instance is retired."""
    layout = [slot("s0", share("a-0", "a", 0, 50.0)), slot("s1", share("b-0", "b", 0, 50.0))]
    applied = {"s0": (share("a-0", "a", 0, 50.0),)}
    surge = rec("igniter-p3-surge0", State.PENDING, age=60.0)
    d = run(layout, [rec("s0"), surge], applied, ready={"a-0"}, limits=CALM)
    assert [a.slot for a in launches(d)] == ["s1"] and d.surge_slots == {"igniter-p3-surge0"}
    assert not [a for a in d.actions if isinstance(a, Terminate)]
    later = rec("igniter-p3-surge0", State.PENDING, age=10.0)
    d = run(layout, [rec("s0"), rec("s1", State.PENDING, age=30.0), later], applied, ready={"a-0"}, limits=CALM)
    assert [a.slot for a in d.actions if isinstance(a, Terminate)] == ["igniter-p3-surge0"]


def test_a_ready_spare_carries_a_new_server_until_its_instance_is_ready() -> None:
    """s0 is surplus and ready; b's server is planned on s2, launched now: b gets a stand-in on s0
    at once, s0 is retired once b-0 serves, and the floors hold at every step."""
    layout = [slot("s1", share("a-1", "a", 0, 50.0)), slot("s2", share("b-0", "b", 0, 50.0))]
    applied = {"s0": (), "s1": (share("a-1", "a", 0, 50.0),)}
    d = run(layout, [rec("s0"), rec("s1")], applied, ready={"a-1"}, limits=CALM)
    [conf] = [a for a in d.actions if isinstance(a, Configure)]
    assert conf.slot == "s0" and [s.name for s in conf.servers] == ["b-0-s0"] and d.surge_slots == {"s0"}
    pf = fleet(layout, dict(applied), limits=CALM)
    pf.run()
    assert done(pf) and "s0" not in pf.records and not any(d.breaches for d in pf.diffs)
    assert any(c.get("b", 0.0) > 0 for c in pf.history[1:3])  # b serves before s2 is ready
    never_below(pf)


def test_no_stand_in_for_a_booting_server_when_the_workload_is_covered() -> None:
    """a grows onto s2 (launched now) but its observed rate is within what a-1 serves: s0 is retired."""
    layout = [slot("s1", share("a-1", "a", 0, 50.0)), slot("s2", share("a-2", "a", 0, 50.0))]
    applied = {"s0": (), "s1": (share("a-1", "a", 0, 50.0),)}
    d = run(layout, [rec("s0"), rec("s1")], applied, ready={"a-1"}, limits=CALM, rates={"a": 100.0})
    assert [a.slot for a in d.actions if isinstance(a, Terminate)] == ["s0"] and not d.surge_slots
    d = run(layout, [rec("s0"), rec("s1")], applied, ready={"a-1"}, limits=CALM, rates={"a": 200.0})
    assert d.surge_slots == {"s0"}


def test_a_move_that_waits_gets_its_stand_in_on_a_surge_instance_ready_sooner() -> None:
    """a-1 waits on s0 for b-0 to leave, and b-0 for b-1 on s1, launched now; a is short of its
    rate. The surge instance booting since earlier is ready first: it stays and carries a-1's
    stand-in on paper. With a covered, it is retired."""
    layout = [
        slot("s0", replace(share("a-1", "a", 2, 70.0), replaces="a-0")),
        slot("s1", share("b-1", "b", 0, 60.0)),
    ]
    applied = {"s0": (share("a-0", "a", 0, 40.0), share("b-0", "b", 1, 60.0))}
    records = [rec("s0"), rec("igniter-p3-surge0", State.PENDING, age=60.0)]
    ready = {"a-0", "b-0"}
    d = run(layout, records, applied, ready=ready, limits=Limits(types=P3), rates={"a": 130.0, "b": 100.0})
    assert any("start once b-0 leave" in n for n in d.notes)
    assert d.surge_slots == {"igniter-p3-surge0"} and [a.slot for a in launches(d)] == ["s1"]
    d = run(layout, records, applied, ready=ready, limits=Limits(types=P3), rates={"a": 100.0, "b": 100.0})
    assert [a.slot for a in d.actions if isinstance(a, Terminate)] == ["igniter-p3-surge0"]
