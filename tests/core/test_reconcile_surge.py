"""reconcile with surge capacity: the budget (scaling.max_surge), the limits that forbid it (and the
Breach they cause), the gateway's `drained` hook, and surge instances that never outlive a move."""

from __future__ import annotations

from autoscaler.core.lifecycle import State
from autoscaler.core.reconcile import Configure, Drain, Launch, Limits, Terminate
from autoscaler.core.surge import TypeInfo, is_surge_slot, surge_budget
from tests.core.test_reconcile import done, never_below, rec, run, share, slot
from tests.kit.paperfleet import fleet

P3 = {"p3": TypeInfo(name="p3", gpu="v100", gpus=1, price_per_hour=3.0)}
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
