"""Plan -> layout: stable slots, stable server names and ports, JSON round trips."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import replace

import pytest
from pydantic import ValidationError

from agents.spec import parse_assignment
from autoscaler.core.layout.assignment import assignment_json
from autoscaler.core.layout.layout import layout_from_plan
from autoscaler.core.layout.layout_types import (
    JUDGED_DIGITS,
    LayoutInput,
    PlannedServer,
    WorkloadInfo,
    layout_from_json,
    layout_to_plan,
)
from autoscaler.core.rollout.colocation import server_tuple
from autoscaler.planner.types import GpuOut, InstanceOut, PlacementOut, Plan

pytestmark = pytest.mark.unit


INFO = {"a": WorkloadInfo("/models/a", 7.5), "b": WorkloadInfo("/models/b", 20.0)}


def place(w: str, mps: float = 30.0, batch: int = 4) -> PlacementOut:
    return PlacementOut(w, "alexnet" if w == "a" else "resnet50", batch, mps, 100.0, 5.0, 120.0)


def instance(*ws: str, itype: str = "p3") -> InstanceOut:
    return InstanceOut(itype, 3.0, (GpuOut(0, "v100", tuple(place(w) for w in ws)),))


def inp(previous=None, taken=frozenset(), reserved=None, extra=None) -> LayoutInput:  # type: ignore[no-untyped-def]
    return LayoutInput(
        fleet="f",
        previous=previous,
        extra_slots=extra or {},
        taken_slots=taken,
        reserved_servers=reserved or {},
        workloads=INFO,
        rates={"a": 200.0, "b": 100.0},
    )


def test_first_layout_names_slots_and_servers() -> None:
    layout = layout_from_plan(Plan("x", (instance("a", "b"), instance("a"))), inp())
    assert [s.slot for s in layout.slots] == ["f-p3-0", "f-p3-1"]
    names = [(slot, s.name, s.index) for slot, s in layout.servers()]
    assert names == [("f-p3-0", "a-0", 0), ("f-p3-0", "b-0", 1), ("f-p3-1", "a-1", 0)]
    srv = layout.slots[0].servers[0]
    assert (srv.model_dir, srv.max_queue_delay_ms) == ("/models/a", 7.5)
    assert layout.capacity() == {"a": 240.0, "b": 120.0}


def test_reordered_plan_keeps_slots_and_names() -> None:
    first = layout_from_plan(Plan("x", (instance("a", "b"), instance("a"))), inp())
    again = layout_from_plan(
        Plan("x", (instance("a"), instance("a", "b"))), inp(first, frozenset({"f-p3-0", "f-p3-1"}))
    )
    assert {s.slot: [v.name for v in s.servers] for s in again.slots} == {"f-p3-0": ["a-0", "b-0"], "f-p3-1": ["a-1"]}


def test_new_placement_gets_fresh_name_and_index() -> None:
    first = layout_from_plan(Plan("x", (instance("a"),)), inp())
    reserved = {"f-p3-0": frozenset({("a-0", 0), ("b-0", 1)})}  # b-0 still runs there, retiring
    nxt = layout_from_plan(Plan("x", (instance("a", "b"),)), inp(first, frozenset({"f-p3-0"}), reserved))
    servers = {v.name: v.index for v in nxt.slots[0].servers}
    assert servers == {"a-0": 0, "b-1": 2}


def test_slot_names_are_never_reused() -> None:
    layout = layout_from_plan(Plan("x", (instance("a"),)), inp(taken=frozenset({"f-p3-0", "f-p3-3"})))
    assert layout.slots[0].slot == "f-p3-4"


def test_extra_live_slots_are_matched_by_type() -> None:
    """After the state was lost, discovered slots are reused before new ones are named."""
    layout = layout_from_plan(
        Plan("x", (instance("a"), instance("b", itype="g5"))),
        inp(extra={"f-g5-7": "g5", "f-p3-2": "p3"}, taken=frozenset({"f-g5-7", "f-p3-2"})),
    )
    assert sorted(s.slot for s in layout.slots) == ["f-g5-7", "f-p3-2"]


def test_a_leaving_live_slot_is_taken_over_only_where_the_plan_fits_beside_what_it_runs() -> None:
    """A live slot the previous layout lacks (scaled in, its servers draining) saves a boot only if
    the planned servers start beside the ones it still runs; a placement that needs their room
    would be a resize in place waiting on surge, so the plan gets a new instance instead."""
    from autoscaler.core.layout.layout_types import PlannedServer

    running = PlannedServer(name="a-3", workload="a", model="alexnet", gpu_index=0, index=0, batch=4, mps_percent=65.0)
    big = Plan("x", (InstanceOut("p3", 3.0, (GpuOut(0, "v100", (place("a", mps=100.0, batch=13),)),)),))
    small = Plan("x", (InstanceOut("p3", 3.0, (GpuOut(0, "v100", (place("a", mps=30.0, batch=2),)),)),))
    same = Plan("x", (InstanceOut("p3", 3.0, (GpuOut(0, "v100", (place("a", mps=65.0, batch=4),)),)),))
    live = replace(inp(extra={"f-p3-2": "p3"}, taken=frozenset({"f-p3-2"})), running={"f-p3-2": (running,)})
    assert [s.slot for s in layout_from_plan(big, live).slots] == ["f-p3-3"]
    assert [s.slot for s in layout_from_plan(small, live).slots] == ["f-p3-2"]
    assert [s.slot for s in layout_from_plan(same, live).slots] == ["f-p3-2"]


def test_changed_share_keeps_the_server_name() -> None:
    first = layout_from_plan(Plan("x", (instance("a"),)), inp())
    bigger = Plan("x", (InstanceOut("p3", 3.0, (GpuOut(0, "v100", (place("a", mps=60.0, batch=8),)),)),))
    nxt = layout_from_plan(bigger, inp(first, frozenset({"f-p3-0"})))
    srv = nxt.slots[0].servers[0]
    assert (srv.name, srv.batch, srv.mps_percent) == ("a-0", 8, 60.0)
    assert srv.agent_key() != first.slots[0].servers[0].agent_key()


def test_json_round_trip_and_plan() -> None:
    layout = layout_from_plan(Plan("x", (instance("a", "b"), instance("a"))), inp())
    again = layout_from_json(layout.to_json())
    assert again == layout
    plan = layout_to_plan(layout)
    assert plan.cost_per_hour == 6.0 and [p.workload for p in plan.instances[0].gpus[0].placements] == ["a", "b"]


def test_assignment_contract() -> None:
    layout = layout_from_plan(Plan("x", (instance("a", "b"),)), inp())
    body = assignment_json(layout.slots[0].servers, 7, 8100)
    assert body["generation"] == 7
    assert body["servers"][1] == {
        "name": "b-0",
        "workload": "b",
        "model_dir": "/models/b",
        "batch": 4,
        "mps_percent": 30.0,
        "gpu_index": 0,
        "port": 8101,
        "host": "127.0.0.1",
        "max_queue_delay_ms": 20.0,
    }
    assert assignment_json(layout.slots[0].servers, 7, 8100, "10.0.1.7")["servers"][0]["host"] == "10.0.1.7"


def test_assignment_is_the_agents_own_model() -> None:
    """One contract: what the autoscaler sends is what agents/spec.py parses, and what it would
    reject is refused before it is sent."""
    layout = layout_from_plan(Plan("x", (instance("a", "b"),)), inp())
    body = assignment_json(layout.slots[0].servers, 7, 8100)
    parsed = parse_assignment(json.dumps(body), "test")
    assert parsed.generation == 7 and [s.port for s in parsed.servers] == [8100, 8101]
    assert parsed.model_dump(mode="json", exclude_unset=True) == body
    broken = dataclasses.replace(layout.slots[0].servers[0], batch=0)
    with pytest.raises(ValidationError, match="batch"):
        assignment_json((broken,), 7, 8100)


def test_slot_candidates_are_built_once_per_plan(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Matching scored every planned instance against candidates rebuilt per instance (quadratic)."""
    import autoscaler.core.layout.slots as slots_mod

    calls = []
    real = slots_mod._candidates
    monkeypatch.setattr(slots_mod, "_candidates", lambda i: calls.append(1) or real(i))
    first = layout_from_plan(Plan("x", (instance("a"), instance("b"), instance("a", "b"))), inp())
    calls.clear()
    again = layout_from_plan(
        Plan("x", (instance("a", "b"), instance("a"), instance("b"))),
        inp(first, frozenset(s.slot for s in first.slots)),
    )
    assert len(calls) == 1
    assert {s.slot: [v.name for v in s.servers] for s in again.slots} == {
        s.slot: [v.name for v in s.servers] for s in first.slots
    }


def _resize(first, mps: float, running):  # type: ignore[no-untyped-def]
    plan = Plan("x", (InstanceOut("p3", 3.0, (GpuOut(0, "v100", (place("a", mps=mps, batch=8),)),)),))
    return layout_from_plan(
        plan,
        LayoutInput(
            fleet="f",
            previous=first,
            extra_slots={},
            taken_slots=frozenset({"f-p3-0"}),
            reserved_servers={"f-p3-0": frozenset((s.name, s.index) for s in running)},
            workloads=INFO,
            rates={"a": 200.0},
            running={"f-p3-0": running},
        ),
    )


def test_resized_running_server_is_replaced_when_its_gpu_has_room() -> None:
    """30 % running + 60 % planned fit on the GPU: a new server (name, port) replaces it."""
    first = layout_from_plan(Plan("x", (instance("a"),)), inp())
    nxt = _resize(first, 60.0, first.slots[0].servers)
    [srv] = nxt.slots[0].servers
    assert (srv.name, srv.index, srv.batch, srv.mps_percent, srv.replaces) == ("a-1", 1, 8, 60.0, "a-0")


def test_resized_server_is_replaced_even_without_room() -> None:
    """80 % planned next to the running 30 %: still a new server that `replaces` it (before, the same
    name, restarted in place). reconcile hands over or uses surge where the GPU cannot hold both."""
    first = layout_from_plan(Plan("x", (instance("a"),)), inp())
    [srv] = _resize(first, 80.0, first.slots[0].servers).slots[0].servers
    assert (srv.name, srv.index, srv.mps_percent, srv.replaces) == ("a-1", 1, 80.0, "a-0")


def test_retiring_servers_no_longer_decide_between_replace_and_restart() -> None:
    """b-0 (30 %) still runs on the GPU, retiring: 50 % + 30 % + 30 % > 100 % used to mean a restart
    in place; a resize is now always a new server, with or without room."""
    first = layout_from_plan(Plan("x", (instance("a", "b"),)), inp())
    [srv] = _resize(first, 50.0, first.slots[0].servers).slots[0].servers
    assert (srv.name, srv.mps_percent, srv.replaces) == ("a-1", 50.0, "a-0")
    [srv] = _resize(first, 40.0, first.slots[0].servers).slots[0].servers
    assert (srv.name, srv.mps_percent) == ("a-1", 40.0)


def test_a_resized_server_that_still_does_its_job_stays_as_it_runs() -> None:
    """With a judge (resize.py): the running a-0 (30 %, batch 4) carries the placement's rate and
    the GPU fits with it, so it stays as it runs, under its name; one that falls short is replaced."""
    from autoscaler.core.rollout.rollout import shares_judge

    first = layout_from_plan(Plan("x", (instance("a"),)), inp())
    running = first.slots[0].servers
    plan = Plan("x", (InstanceOut("p3", 3.0, (GpuOut(0, "v100", (place("a", mps=60.0, batch=8),)),)),))
    base = LayoutInput(
        fleet="f",
        previous=first,
        extra_slots={},
        taken_slots=frozenset({"f-p3-0"}),
        reserved_servers={"f-p3-0": frozenset({("a-0", 0)})},
        workloads=INFO,
        rates={"a": 200.0},
    )
    keep = layout_from_plan(plan, replace(base, running={"f-p3-0": running}, judge=shares_judge))
    [srv] = keep.slots[0].servers
    assert (srv.name, srv.batch, srv.mps_percent) == ("a-0", running[0].batch, running[0].mps_percent)
    short = [replace(running[0], predicted_throughput_rps=1.0)]
    again = layout_from_plan(plan, replace(base, running={"f-p3-0": tuple(short)}, judge=shares_judge))
    assert [s.name for s in again.slots[0].servers] == ["a-1"]


def test_matching_weighs_shares_so_a_big_server_stays_where_it_runs() -> None:
    """Slot 0 runs a small `a` and a `b`, slot 1 a big `a`. The new plan puts the big `a` beside a
    `b`-less small one: by counts of (GPU, workload) alone, the instance with the big `a` and a `b`
    would take slot 0 and the two `a` servers would swap sizes (one grows, one shrinks: capacity
    drops while that happens). Weighed by share, the big `a` stays on slot 1."""
    big, small = place("a", 70.0, 16), place("a", 10.0, 2)
    first = Plan(
        "x",
        (
            InstanceOut("p3", 3.0, (GpuOut(0, "v100", (small, place("b", 30.0))),)),
            InstanceOut("p3", 3.0, (GpuOut(0, "v100", (big,)),)),
        ),
    )
    prev = layout_from_plan(first, inp())
    nxt = Plan(
        "x",
        (
            InstanceOut("p3", 3.0, (GpuOut(0, "v100", (place("b", 20.0), big)),)),
            InstanceOut("p3", 3.0, (GpuOut(0, "v100", (small,)),)),
        ),
    )
    again = layout_from_plan(nxt, inp(prev, frozenset({"f-p3-0", "f-p3-1"})))
    by_slot = {s.slot: {(v.workload, v.mps_percent) for v in s.servers} for s in again.slots}
    assert by_slot == {"f-p3-1": {("a", 70.0), ("b", 20.0)}, "f-p3-0": {("a", 10.0)}}
    names = {s.slot: {v.name for v in s.servers if v.workload == "a"} for s in again.slots}
    assert names == {"f-p3-0": {"a-0"}, "f-p3-1": {"a-1"}}  # both keep their names and sizes


def test_a_name_a_running_server_replaces_is_never_given_to_a_new_one() -> None:
    """a-1 took over from a-0 (its `replaces` still says so) and a-0 has left; a resize of a-1
    must not call its successor a-0, or each would seem to replace the other (both then count as
    handed over and the GPU's capacity for the workload looked like nothing)."""
    first = layout_from_plan(Plan("x", (instance("a"),)), inp())
    second = _resize(first, 60.0, first.slots[0].servers)
    [a1] = second.slots[0].servers  # a-1 replaces a-0; a-0 then leaves
    third = _resize(second, 70.0, (a1,))
    [succ] = third.slots[0].servers
    assert succ.name not in {"a-0", "a-1"} and succ.replaces == "a-1"


def test_a_placement_a_running_server_runs_as_planned_keeps_that_server() -> None:
    """The previous layout planned a-1 (60 %, batch 8) to replace the running a-0 (30 %, batch 4);
    a plan that is back at 30 %, batch 4 keeps a-0 as it runs. Before, the placement kept the name
    a-1, so an identical server was started beside a-0 and a-0 moved out (a full GPU needs surge
    capacity for that: the Azure replay's surge instances)."""
    first = layout_from_plan(Plan("x", (instance("a"),)), inp())
    running = first.slots[0].servers
    second = _resize(first, 60.0, running)
    assert [s.name for s in second.slots[0].servers] == ["a-1"]
    back = Plan("x", (InstanceOut("p3", 3.0, (GpuOut(0, "v100", (place("a"),)),)),))
    third = layout_from_plan(
        back,
        LayoutInput(
            fleet="f",
            previous=second,
            extra_slots={},
            taken_slots=frozenset({"f-p3-0"}),
            reserved_servers={"f-p3-0": frozenset((s.name, s.index) for s in running)},
            workloads=INFO,
            rates={"a": 100.0},
            running={"f-p3-0": running},
        ),
    )
    [srv] = third.slots[0].servers
    assert (srv.name, srv.index, srv.mps_percent, srv.batch, srv.replaces) == ("a-0", 0, 30.0, 4, "")


def test_a_placement_back_on_a_gpu_where_its_workload_retires_hands_over() -> None:
    """The previous layout moved a off f-p3-0 (only b there now), but a-0 still runs there, waiting
    for its replacement. A plan that puts a back on that GPU at another size names a new server that
    `replaces` a-0: it starts beside it and takes over its load (before: no predecessor, so it waited
    for a-0 to leave, a full GPU's move that needs surge capacity). A workload with no server
    running there, or one whose running server is kept, gets no predecessor."""
    first = layout_from_plan(Plan("x", (instance("a", "b"),)), inp())
    running = first.slots[0].servers  # a-0 (30 %), b-0
    moved = layout_from_plan(Plan("x", (instance("b"), instance("a"))), inp(first, frozenset({"f-p3-0"})))
    assert [s.name for s in moved.slots[0].servers] == ["b-0"]
    back = Plan("x", (InstanceOut("p3", 3.0, (GpuOut(0, "v100", (place("b"), place("a", mps=60.0, batch=8))),)),))
    reserved = {"f-p3-0": frozenset((s.name, s.index) for s in running)}
    base = replace(inp(moved, frozenset({"f-p3-0", "f-p3-1"}), reserved), running={"f-p3-0": running})
    again = layout_from_plan(back, base)
    by_name = {s.workload: s for s in again.slots[0].servers}
    assert by_name["a"].name != "a-0" and by_name["a"].replaces == "a-0"
    assert by_name["b"].name == "b-0" and by_name["b"].replaces == ""


def test_a_servers_agent_key_is_made_once_and_follows_a_replace() -> None:
    """agent_key is remembered on the (frozen) server: a replaced server answers for its own
    fields, and the remembered key is no field (not compared, not hashed, not in its JSON)."""
    srv = PlannedServer(name="a-0", workload="a", model="alexnet", gpu_index=0, index=0, batch=4, mps_percent=30.0)
    first = srv.agent_key()
    assert srv.agent_key() is first
    bigger = replace(srv, batch=8)
    assert bigger.agent_key() == (*first[:5], 8, *first[6:]) and srv.agent_key() is first
    fresh = PlannedServer(name="a-0", workload="a", model="alexnet", gpu_index=0, index=0, batch=4, mps_percent=30.0)
    assert fresh == srv and hash(fresh) == hash(srv) and "_agent_key" not in srv.to_json()


def test_what_a_judgement_reads_of_a_server_is_made_once_and_follows_a_replace() -> None:
    """judged_as is colocation.server_tuple at JUDGED_DIGITS, remembered like agent_key: a
    replaced server (a stand-in at another share) answers for its own share."""
    srv = PlannedServer(name="a-0", workload="a", model="alexnet", gpu_index=0, index=0, batch=4, mps_percent=100 / 3)
    first = srv.judged_as()
    assert first == ("a", "alexnet", 4, round(100 / 3, JUDGED_DIGITS), None) and srv.judged_as() is first
    assert server_tuple(srv, JUDGED_DIGITS) is first and server_tuple(srv)[3] == 100 / 3
    assert replace(srv, mps_percent=50.0).judged_as()[3] == 50.0 and srv.judged_as() is first
    sliced = replace(srv, mig_profile="1g.5gb", mig_start=2, processes=2)
    assert sliced.judged_as()[4] == ("1g.5gb", 2, 2) and "_judged" not in srv.to_json()
