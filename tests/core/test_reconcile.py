"""reconcile.diff: ordered actions, make-before-break, replacement, budget, clean-up."""

from __future__ import annotations

import pytest

from autoscaler.core.fleet.lifecycle import Reason, Record, State
from autoscaler.core.layout.layout_types import Layout, PlannedServer, SlotSpec
from autoscaler.core.rollout.reconcile import Configure, Drain, FleetView, Launch, Limits, Terminate, diff
from autoscaler.core.rollout.surge import is_surge_slot
from tests.kit.paperfleet import PaperFleet, fleet

pytestmark = pytest.mark.unit


NOW = 10_000.0


def srv(name: str, workload: str = "a", index: int = 0) -> PlannedServer:
    return PlannedServer(
        name=name,
        workload=workload,
        model="alexnet",
        gpu_index=0,
        index=index,
        batch=4,
        mps_percent=30.0,
        rate_rps=100.0,
        predicted_latency_ms=5.0,
        predicted_throughput_rps=120.0,
        model_dir="/m",
        max_queue_delay_ms=7.5,
    )


def slot(name: str, *servers: PlannedServer, itype: str = "p3") -> SlotSpec:
    return SlotSpec(name, itype, 3.0, ("v100",), servers)


def rec(name: str, state: State = State.READY, attempt: int = 0, age: float = 60.0, itype: str = "p3") -> Record:
    return Record(
        slot=name,
        attempt=attempt,
        instance_type=itype,
        state=state,
        created_at=NOW - age,
        updated_at=NOW - age,
        instance_id=None if state is State.REQUESTED else f"i-{name}-{attempt}",
    )


def run(layout_slots, records, applied=None, ready=(), limits=Limits(), **kw):  # type: ignore[no-untyped-def]
    view = FleetView(
        records=records,
        applied=applied or {},
        ready_servers=frozenset(ready),
        max_attempt={r.slot: r.attempt for r in records},
        prices={"p3": 3.0, "g5": 1.0},
        **kw,
    )
    return diff(Layout("x", tuple(layout_slots)), view, NOW, limits)


def kinds(d) -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    return [(type(a).__name__, a.slot) for a in d.actions]


def test_launches_missing_slots_with_next_attempt() -> None:
    d = run([slot("s0", srv("a-0")), slot("s1", srv("a-1"))], [rec("s0", State.PENDING)])
    assert d.actions == (Launch("s1", "p3", 0, "planned"),)


def test_resumes_an_interrupted_launch_with_the_same_attempt() -> None:
    d = run([slot("s0", srv("a-0"))], [rec("s0", State.REQUESTED, attempt=2)])
    assert d.actions == (Launch("s0", "p3", 2, "resume interrupted launch"),)


def test_configures_ready_slots_only_when_different() -> None:
    layout = [slot("s0", srv("a-0")), slot("s1", srv("a-1"))]
    d = run(layout, [rec("s0"), rec("s1", State.RUNNING)])
    assert kinds(d) == [("Configure", "s0")]
    d = run(layout, [rec("s0"), rec("s1")], applied={"s0": (srv("a-0"),), "s1": (srv("a-1"),)})
    assert d.actions == ()
    d = run(
        layout,
        [rec("s0"), rec("s1")],
        applied={"s0": (srv("a-0"),), "s1": (srv("a-1"),)},
        stale_agents=frozenset({"s1"}),
    )
    assert kinds(d) == [("Configure", "s1")]


def test_make_before_break_for_a_moved_server() -> None:
    """a-0 moves from s0 to s1 (as a-1): s0 keeps a-0 until a-1 reports ready."""
    layout = [slot("s0", srv("b-0", "b")), slot("s1", srv("a-1"))]
    applied = {"s0": (srv("b-0", "b"), srv("a-0", index=1)), "s1": ()}
    d = run(layout, [rec("s0"), rec("s1")], applied, ready={"b-0"})
    assert kinds(d) == [("Configure", "s1")]  # s0 unchanged: a-0 still needed
    d = run(layout, [rec("s0"), rec("s1")], {**applied, "s1": (srv("a-1"),)}, ready={"b-0", "a-1"})
    assert kinds(d) == [("Configure", "s0")]
    assert [s.name for s in d.actions[0].servers] == ["b-0"]  # type: ignore[union-attr]


def test_surplus_slot_drained_and_terminated_once_covered() -> None:
    layout = [slot("s1", srv("a-1"))]
    applied = {"s0": (srv("a-0"),), "s1": (srv("a-1"),)}
    d = run(layout, [rec("s0"), rec("s1")], applied, ready={"a-0"})
    assert d.actions == ()  # a-1 not ready: s0 keeps serving
    d = run(layout, [rec("s0"), rec("s1")], applied, ready={"a-0", "a-1"})
    assert kinds(d) == [("Drain", "s0"), ("Terminate", "s0")]
    assert d.actions[1].reason is Reason.SCALE_IN  # type: ignore[union-attr]


def test_surplus_without_servers_terminates_directly() -> None:
    d = run([], [rec("s0", State.PENDING), rec("s1", State.REQUESTED)])
    assert kinds(d) == [("Terminate", "s0"), ("Terminate", "s1")]


def test_surplus_slot_keeps_only_needed_servers() -> None:
    layout = [slot("s1", srv("a-1"), srv("b-1", "b", 1))]
    applied = {"s0": (srv("a-0"), srv("b-0", "b", 1)), "s1": (srv("a-1"), srv("b-1", "b", 1))}
    d = run(layout, [rec("s0"), rec("s1")], applied, ready={"a-1", "a-0", "b-0"})
    assert kinds(d) == [("Configure", "s0")]
    assert [s.name for s in d.actions[0].servers] == ["b-0"]  # type: ignore[union-attr]


def test_not_ready_in_time_is_replaced() -> None:
    d = run([slot("s0", srv("a-0"))], [rec("s0", State.RUNNING, age=901)], limits=Limits(ready_timeout_s=900))
    assert d.actions[0] == Launch("s0", "p3", 1, "replace: ready_timeout")
    assert isinstance(d.actions[1], Terminate) and d.actions[1].reason is Reason.READY_TIMEOUT
    assert run([slot("s0", srv("a-0"))], [rec("s0", State.RUNNING, age=899)], limits=Limits(900)).actions == ()


def test_budget_blocks_launches() -> None:
    layout = [slot("s0", srv("a-0")), slot("s1", srv("a-1")), slot("s2", srv("a-2"))]
    d = run(layout, [rec("s0", State.PENDING)], limits=Limits(max_cost_per_hour=7.0))
    assert kinds(d) == [("Launch", "s1")]
    assert "max_cost_per_hour" in d.notes[0]


def test_cleanup_of_duplicates_failed_drained_and_orphans() -> None:
    records = [
        rec("s0", attempt=0),
        rec("s0", State.PENDING, attempt=1),
        rec("s1", State.FAILED),
        rec("s2", State.DRAINING),
    ]
    d = run([slot("s0", srv("a-0"))], records, orphans=[("s9", "i-zz")])
    ends = [(a.slot, a.attempt, a.reason) for a in d.actions if isinstance(a, Terminate)]
    assert sorted(ends, key=str) == sorted(
        [
            ("s0", 0, Reason.DUPLICATE),
            ("s2", 0, Reason.SCALE_IN),
            ("s1", 0, Reason.RELEASE),
            ("s9", None, Reason.SCALE_IN),
        ],
        key=str,
    )
    assert not any(isinstance(a, Launch) for a in d.actions)


def test_action_order() -> None:
    """(a-1 is running and ready on s1, so the surplus s0's a-0 may go while c-1 starts; max_surge 0,
    or s0 would stay to carry a stand-in for b-0 until s2 is ready: test_reconcile_surge.py.)"""
    layout = [slot("s1", srv("a-1"), srv("c-1", "c", 1)), slot("s2", srv("b-0", "b"))]
    applied = {"s0": (srv("a-0"),), "s1": (srv("a-1"),)}
    d = run(layout, [rec("s0"), rec("s1")], applied, ready={"a-1", "a-0"}, limits=Limits(max_surge=0))
    order = [type(a) for a in d.actions]
    assert order == [Launch, Configure, Drain, Terminate] or order == [Launch, Configure, Terminate]
    assert order.index(Launch) < order.index(Configure) < order.index(Terminate)


def test_ready_instance_whose_agent_is_silent_is_replaced() -> None:
    layout = [slot("s0", srv("a-0"))]
    applied = {"s0": (srv("a-0"),)}
    d = run(layout, [rec("s0")], applied, ready={"a-0"}, agent_seen={("s0", 0): NOW - 901}, limits=Limits(900))
    assert d.actions[0] == Launch("s0", "p3", 1, "replace: agent_lost")
    assert isinstance(d.actions[-1], Terminate) and d.actions[-1].reason is Reason.AGENT_LOST
    assert run(layout, [rec("s0")], applied, ready={"a-0"}, agent_seen={("s0", 0): NOW - 60}).actions == ()


def share(name: str, workload: str, index: int, mps: float) -> PlannedServer:
    return PlannedServer(
        name=name,
        workload=workload,
        model="alexnet",
        gpu_index=0,
        index=index,
        batch=4,
        mps_percent=mps,
        rate_rps=100.0,
        predicted_latency_ms=5.0,
        predicted_throughput_rps=120.0,
        model_dir="/m",
        max_queue_delay_ms=7.5,
    )


def gpu_load(servers) -> float:  # type: ignore[no-untyped-def]
    return sum(s.mps_percent for s in servers if s.gpu_index == 0)


def test_resized_server_is_replaced_make_before_break() -> None:
    """a-0 (30 %) is resized as a-1 (60 %): both run until a-1 is ready, then a-0 goes."""
    layout = [slot("s0", share("a-1", "a", 1, 60.0))]
    applied = {"s0": (share("a-0", "a", 0, 30.0),)}
    d = run(layout, [rec("s0")], applied, ready={"a-0"})
    [conf] = d.actions
    assert isinstance(conf, Configure) and sorted(s.name for s in conf.servers) == ["a-0", "a-1"]
    assert gpu_load(conf.servers) == 90.0 and d.notes == ()
    d = run(layout, [rec("s0")], {"s0": conf.servers}, ready={"a-0", "a-1"})
    assert [s.name for s in d.actions[0].servers] == ["a-1"]  # type: ignore[union-attr]


def never_below(pf: PaperFleet) -> None:
    """The invariant over a whole move: each workload's capacity after every step is at least the
    smaller of what it had before and what the layout plans for it (the demand, with no rates)."""
    target = pf.layout.capacity()
    for k, cap in enumerate(pf.history):
        for w, before in pf.history[0].items():
            assert cap.get(w, 0.0) >= min(before, target.get(w, 0.0)) - 1e-6, (k, w, cap, pf.history[0])


def done(pf: PaperFleet) -> bool:
    """The fleet is the layout: every planned server runs, nothing else does, no surge is left."""
    want = {s.slot: sorted(v.agent_key() for v in s.servers) for s in pf.layout.slots}
    have = {k: sorted(v.agent_key() for v in vs) for k, vs in pf.applied.items()}
    return have == want and pf.diffs[-1].converged


def test_a_swap_between_two_gpus_moves_on_surge_never_break_before_make() -> None:
    """a moves onto s0's GPU (70 %) where b-0 (60 %) runs, b onto s1 where a-0 runs: each waits for
    the other (the old reconcile removed b-0 first). One move starts early on a surge instance; the
    other GPU waits for it; the swap completes and the surge instance is retired. No GPU ever holds
    more than 100 % of busy servers and neither workload loses capacity at any step."""
    layout = [slot("s0", share("a-1", "a", 1, 70.0)), slot("s1", share("b-1", "b", 0, 60.0))]
    applied = {"s0": (share("b-0", "b", 0, 60.0),), "s1": (share("a-0", "a", 0, 70.0),)}
    d = run(layout, [rec("s0"), rec("s1")], applied, ready={"a-0", "b-0"})
    assert [type(a) for a in d.actions] == [Launch] and is_surge_slot(d.actions[0].slot)
    assert not any("break-before-make" in n for n in d.notes) and not d.breaches
    pf = fleet(layout, applied)
    pf.run()
    assert done(pf) and not any(d.breaches for d in pf.diffs)
    never_below(pf)
    assert any(is_surge_slot(a.slot) for d in pf.diffs for a in d.actions if isinstance(a, Launch))
    assert not any(is_surge_slot(s) for s in pf.records)  # retired once the move completed


def test_only_server_is_not_broken_while_its_replacement_boots() -> None:
    """The ServeGen replay's drop to zero: b's only server b-0 (35 %) moves to a new slot s1 while
    a-0 grows to 100 % on s0. s0 keeps b-0 until b-1 serves, and a-0 (planned under the same name,
    so it cannot start beside its old version) is never restarted in place while it carries a: it
    moves by way of a surge copy. Neither workload is ever short."""
    layout = [slot("s0", share("a-0", "a", 0, 100.0)), slot("s1", share("b-1", "b", 0, 35.0))]
    applied = {"s0": (share("a-0", "a", 0, 65.0), share("b-0", "b", 1, 35.0))}
    d = run(layout, [rec("s0")], applied, ready={"a-0", "b-0"})
    assert kinds(d)[0] == ("Launch", "s1") and [is_surge_slot(a.slot) for a in d.actions] == [False, True]
    assert not any(isinstance(a, Configure) for a in d.actions)  # s0 unchanged: b-0 is b's only server
    pf = fleet(layout, applied)
    pf.run(40)
    assert done(pf) and not any(d.breaches for d in pf.diffs)
    never_below(pf)


def test_no_break_before_make_when_the_replacement_cannot_launch() -> None:
    """b-1's slot cannot launch under max_cost_per_hour: b-0 is b's only capacity and stays (the old
    reconcile removed it for a-0's resize: an outage with no end). a-0 keeps its size; both say why."""
    layout = [slot("s0", share("a-0", "a", 0, 100.0)), slot("s1", share("b-1", "b", 0, 35.0))]
    applied = {"s0": (share("a-0", "a", 0, 65.0), share("b-0", "b", 1, 35.0))}
    d = run(layout, [rec("s0")], applied, ready={"a-0", "b-0"}, limits=Limits(max_cost_per_hour=3.0))
    assert d.actions == () and not d.breaches
    assert any("blocked by max_cost_per_hour" in n for n in d.notes)
    assert any("b-0 stays" in n and "cannot launch" in n for n in d.notes)


def test_waits_along_a_chain_of_moves_that_ends_on_a_free_gpu() -> None:
    """c-0 (the only c server) moves from s0 to s1 as c-1, where retiring b-0 waits for b-1 on
    s2's free GPU: s1 waits for b-1 and s0 waits for c-1, so no surge is needed for c or b; only
    a's resize on its own full GPU (same name) needs one. Nobody is ever short."""
    layout = [
        slot("s0", share("a-0", "a", 0, 100.0)),
        slot("s1", share("c-1", "c", 1, 90.0)),
        slot("s2", share("b-1", "b", 0, 35.0)),
    ]
    applied = {
        "s0": (share("a-0", "a", 0, 10.0), share("c-0", "c", 1, 90.0)),
        "s1": (share("b-0", "b", 0, 35.0),),
        "s2": (),
    }
    d = run(layout, [rec("s0"), rec("s1"), rec("s2")], applied, ready={"a-0", "b-0", "c-0"})
    assert ("Configure", "s2") in kinds(d)
    assert not any("break-before-make" in n for n in d.notes) and not d.breaches
    pf = fleet(layout, applied)
    pf.run(40)
    assert done(pf)
    never_below(pf)


def test_a_workload_keeps_its_floor_while_its_resize_waits() -> None:
    """a-0 grows to 100 % on s0 but waits (b-0 there waits for b-1 booting on s2). a also has a-1 on
    the surplus s1, which alone carries what a's layout plans: a-0's old size may go, a-1 stays."""
    layout = [slot("s0", share("a-0", "a", 0, 100.0)), slot("s2", share("b-1", "b", 0, 35.0))]
    applied = {"s0": (share("a-0", "a", 0, 65.0), share("b-0", "b", 1, 35.0)), "s1": (share("a-1", "a", 0, 50.0),)}
    d = run(layout, [rec("s0"), rec("s1"), rec("s2", State.PENDING)], applied, ready={"a-0", "a-1", "b-0"})
    step = d.step
    assert step is not None and step.after["a"] >= step.floor["a"] > 0
    assert "b-0" in {s.name for s in step.assign[("s0", 0)]} and "a-1" in {s.name for s in step.assign[("s1", 0)]}
    assert not step.short()
