"""Which planned instance a booting slot becomes (core/layout/slots.py): it is up before any launch,
so while a workload is short it trades the instance it was matched to for a launch that carries
more of the shortfall; it never trades with a slot that runs servers. A paper fleet of single-GPU instances: `f-p3-0` runs `a`, `f-p3-1` runs `b`,
and `f-p3-2` boots, planned for `b`."""

from __future__ import annotations

from dataclasses import replace

import pytest

from autoscaler.core.layout.layout import layout_from_plan
from autoscaler.core.layout.layout_types import Layout, LayoutInput, PlannedServer, WorkloadInfo
from autoscaler.planner.types import GpuOut, InstanceOut, PlacementOut, Plan

pytestmark = pytest.mark.unit

INFO = {"a": WorkloadInfo("/models/a", 7.5), "b": WorkloadInfo("/models/b", 20.0)}


def place(w: str, mps: float = 100.0) -> PlacementOut:
    return PlacementOut(w, "alexnet" if w == "a" else "resnet50", 4, mps, 100.0, 5.0, 3 * mps)


def instance(*placements: PlacementOut) -> InstanceOut:
    return InstanceOut("p3", 3.0, (GpuOut(0, "v100", placements),))


def fleet() -> Layout:
    """-0 runs a, -1 runs b (both ready), -2 was launched for more b and boots."""
    first = layout_from_plan(Plan("x", (instance(place("a")), instance(place("b")))), base(None))
    slots = frozenset(s.slot for s in first.slots)
    return layout_from_plan(
        Plan("x", (instance(place("a")), instance(place("b")), instance(place("b")))), base(first, slots)
    )


def base(previous: Layout | None, taken: frozenset[str] = frozenset()) -> LayoutInput:
    running: dict[str, tuple[PlannedServer, ...]] = {}
    for s in previous.slots[:2] if previous else ():
        running[s.slot] = s.servers
    return LayoutInput(
        fleet="f",
        previous=previous,
        extra_slots={},
        taken_slots=taken,
        reserved_servers={k: frozenset((v.name, v.index) for v in vs) for k, vs in running.items()},
        workloads=INFO,
        rates={"a": 500.0, "b": 300.0},
        running=running,
    )


def workloads(layout: Layout) -> dict[str, list[str]]:
    return {s.slot: sorted(v.workload for v in s.servers) for s in layout.slots}


# the re-plan: a's rate jumped (one more instance of a), b still wants its second instance
REPLAN = Plan("x", (instance(place("a")), instance(place("b")), instance(place("b")), instance(place("a"))))


def test_a_booting_slot_goes_to_the_workload_that_is_short_now() -> None:
    prev = fleet()
    assert workloads(prev) == {"f-p3-0": ["a"], "f-p3-1": ["b"], "f-p3-2": ["b"]}
    taken = frozenset({"f-p3-0", "f-p3-1", "f-p3-2"})
    inp = replace(base(prev, taken), booting=("f-p3-2",), short={"a": 200.0})
    out = workloads(layout_from_plan(REPLAN, inp))
    # -2 comes up first: it carries a, which is short; b's second instance (b is not short) is launched
    assert out == {"f-p3-0": ["a"], "f-p3-1": ["b"], "f-p3-2": ["a"], "f-p3-3": ["b"]}


def test_with_nothing_short_a_booting_slot_keeps_what_it_was_launched_for() -> None:
    prev = fleet()
    taken = frozenset({"f-p3-0", "f-p3-1", "f-p3-2"})
    for inp in (base(prev, taken), replace(base(prev, taken), booting=("f-p3-2",))):
        out = workloads(layout_from_plan(REPLAN, inp))
        assert out == {"f-p3-0": ["a"], "f-p3-1": ["b"], "f-p3-2": ["b"], "f-p3-3": ["a"]}


def test_the_booting_slot_ready_first_takes_the_shortfall_and_the_next_only_what_is_left() -> None:
    """-2 and -3 both boot for b, -3 ready sooner (a started pool member, say). a is short: the
    instance that is up first carries it; the other moves off b only while a shortfall is left
    uncovered (one instance of a carries 300 req/s)."""
    prev = fleet()
    taken = frozenset({"f-p3-0", "f-p3-1", "f-p3-2"})
    grown = layout_from_plan(Plan("x", (*REPLAN.instances[:3], instance(place("b")))), base(prev, taken))
    assert workloads(grown) == {"f-p3-0": ["a"], "f-p3-1": ["b"], "f-p3-2": ["b"], "f-p3-3": ["b"]}
    taken |= {"f-p3-3"}
    plan = Plan("x", (*REPLAN.instances[:3], instance(place("b")), instance(place("a")), instance(place("a"))))
    inp = replace(base(grown, taken), booting=("f-p3-3", "f-p3-2"))
    one = workloads(layout_from_plan(plan, replace(inp, short={"a": 200.0})))
    assert (one["f-p3-3"], one["f-p3-2"]) == (["a"], ["b"])
    two = workloads(layout_from_plan(plan, replace(inp, short={"a": 400.0})))
    assert (two["f-p3-3"], two["f-p3-2"]) == (["a"], ["a"])
    late = workloads(layout_from_plan(plan, replace(inp, booting=("f-p3-2", "f-p3-3"), short={"a": 200.0})))
    assert (late["f-p3-2"], late["f-p3-3"]) == (["a"], ["b"])


def test_the_booting_slot_ready_first_takes_the_shortfall_from_a_slot_up_later() -> None:
    """-2 boots for b (b's forecast rose); then a jumped and a fast tick launched -3 for it, which
    boots too. At the next tick a is still short and the plan wants the same four instances, so no
    launch is left to trade with: -2, up first, takes a's instance and -3 b's, else a waits a
    second boot's head start while -2 comes up for b, which is not short."""
    prev = fleet()
    taken = frozenset({"f-p3-0", "f-p3-1", "f-p3-2"})
    grown = layout_from_plan(REPLAN, base(prev, taken))
    assert workloads(grown) == {"f-p3-0": ["a"], "f-p3-1": ["b"], "f-p3-2": ["b"], "f-p3-3": ["a"]}
    inp = replace(base(grown, taken | {"f-p3-3"}), booting=("f-p3-2", "f-p3-3"))
    assert workloads(layout_from_plan(REPLAN, inp)) == workloads(grown)  # nothing short: both keep theirs
    out = workloads(layout_from_plan(REPLAN, replace(inp, short={"a": 200.0})))
    assert (out["f-p3-2"], out["f-p3-3"]) == (["a"], ["b"])
    late = workloads(layout_from_plan(REPLAN, replace(inp, booting=("f-p3-3", "f-p3-2"), short={"a": 200.0})))
    assert (late["f-p3-3"], late["f-p3-2"]) == (["a"], ["b"])  # -3 up first already carries a


def test_a_booting_slot_trades_only_with_a_launch_never_with_a_slot_that_runs() -> None:
    """-0 runs a at 30 %; -1 boots, planned for a 60 % + b 30 %. The re-plan matches the a + b
    instance to -1 (its plan: a fresh cut) and b's to -0. With b short, -1 has no launch to trade
    with, so nothing changes: handing -1's instance to -0 would make a fresh instance's plan a
    re-cut in place of what runs there (tests/sim/test_rollout_property.py BOOTING_KEEPS_ITS_CUT
    is the MIG fleet where that cost capacity)."""
    prev = layout_from_plan(
        Plan("x", (instance(place("a", 30.0)), instance(place("a", 60.0), place("b", 30.0)))), base(None)
    )
    running = {"f-p3-0": prev.slots[0].servers}
    inp = replace(base(prev, frozenset({"f-p3-0", "f-p3-1"})), running=running, reserved_servers={})
    plan = Plan("x", (instance(place("a", 60.0), place("b", 30.0)), instance(place("b", 30.0))))
    today = workloads(layout_from_plan(plan, inp))
    assert today == {"f-p3-1": ["a", "b"], "f-p3-0": ["b"]}
    for short in ({"b": 100.0}, {"a": 100.0}):
        assert workloads(layout_from_plan(plan, replace(inp, booting=("f-p3-1",), short=short))) == today


def test_a_booting_slot_a_move_waits_for_keeps_its_plan() -> None:
    """-0 still runs a-9, which the layout moved to -1 (booting): a-9 leaves once a serves there,
    and whatever waits for its room on -0 waits with it. b is short, but moving a's destination to
    a later launch would hold the move for a whole boot, so -1 keeps a."""
    prev = layout_from_plan(Plan("x", (instance(place("b")), instance(place("a")))), base(None))
    leaving = PlannedServer(name="a-9", workload="a", model="alexnet", gpu_index=0, index=5, batch=4, mps_percent=30.0)
    running = {"f-p3-0": (*prev.slots[0].servers, leaving)}
    inp = replace(base(prev, frozenset({"f-p3-0", "f-p3-1"})), running=running, booting=("f-p3-1",), short={"b": 200.0})
    plan = Plan("x", (instance(place("b")), instance(place("b")), instance(place("a"))))
    assert workloads(layout_from_plan(plan, inp)) == {"f-p3-0": ["b"], "f-p3-1": ["a"], "f-p3-2": ["b"]}
    settled = replace(inp, running={"f-p3-0": prev.slots[0].servers})  # a-9 has left: b gets -1
    assert workloads(layout_from_plan(plan, settled)) == {"f-p3-0": ["b"], "f-p3-1": ["b"], "f-p3-2": ["a"]}
