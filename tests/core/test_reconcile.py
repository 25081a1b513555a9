"""reconcile.diff: ordered actions, make-before-break, replacement, budget, clean-up."""

from __future__ import annotations

from autoscaler.core.layout import Layout, PlannedServer, SlotSpec
from autoscaler.core.lifecycle import Reason, Record, State
from autoscaler.core.reconcile import Configure, Drain, FleetView, Launch, Limits, Terminate, diff

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
    layout = [slot("s1", srv("a-1")), slot("s2", srv("b-0", "b"))]
    applied = {"s0": (srv("a-0"),), "s1": ()}
    d = run(layout, [rec("s0"), rec("s1")], applied, ready={"a-1", "a-0"})
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


def test_replacement_never_oversubscribes_a_gpu_with_retiring_servers() -> None:
    """a moves onto s0's GPU (70 %) where b-0 (60 %) still runs, waiting for b-1 on s1: b-0 is
    removed in the same assignment (break-before-make, noted), never 130 % on the GPU."""
    layout = [slot("s0", share("a-1", "a", 1, 70.0)), slot("s1", share("b-1", "b", 0, 60.0))]
    applied = {"s0": (share("b-0", "b", 0, 60.0),), "s1": (share("a-0", "a", 0, 70.0),)}
    d = run(layout, [rec("s0"), rec("s1")], applied, ready={"a-0", "b-0"})
    confs = {a.slot: a for a in d.actions if isinstance(a, Configure)}
    assert all(gpu_load(c.servers) <= 100.0 for c in confs.values())
    assert [s.name for s in confs["s0"].servers] == ["a-1"]
    assert any("break-before-make on s0 GPU 0: b-0" in n for n in d.notes)


def test_only_server_is_not_broken_while_its_replacement_boots() -> None:
    """The ServeGen replay's drop to zero: b's only server b-0 (35 %) moves to a new slot s1 while
    a-0 grows in place to 100 % on s0. Waiting cannot deadlock (s1 is booting, its GPU is empty), so
    s0 keeps what it runs (a-0 at 65 % and b-0) until b-1 is ready, then a-0 grows and b-0 goes."""
    layout = [slot("s0", share("a-0", "a", 0, 100.0)), slot("s1", share("b-1", "b", 0, 35.0))]
    applied = {"s0": (share("a-0", "a", 0, 65.0), share("b-0", "b", 1, 35.0))}
    d = run(layout, [rec("s0")], applied, ready={"a-0", "b-0"})
    assert kinds(d) == [("Launch", "s1")]  # s0 unchanged: b-0 still its workload's only server
    assert any("make-before-break on s0 GPU 0" in n for n in d.notes)
    d = run(layout, [rec("s0"), rec("s1", State.PENDING)], applied, ready={"a-0", "b-0"})
    assert kinds(d) == []
    d = run(layout, [rec("s0"), rec("s1")], applied, ready={"a-0", "b-0"})
    assert kinds(d) == [("Configure", "s1")]
    d = run(
        layout, [rec("s0"), rec("s1")], {**applied, "s1": (share("b-1", "b", 0, 35.0),)}, ready={"a-0", "b-0", "b-1"}
    )
    [conf] = d.actions
    assert isinstance(conf, Configure) and [(s.name, s.mps_percent) for s in conf.servers] == [("a-0", 100.0)]


def test_break_before_make_when_launch_of_replacement_is_blocked_by_budget() -> None:
    """Deferring is only for replacements that are coming: a launch the cost cap blocks never is."""
    layout = [slot("s0", share("a-0", "a", 0, 100.0)), slot("s1", share("b-1", "b", 0, 35.0))]
    applied = {"s0": (share("a-0", "a", 0, 65.0), share("b-0", "b", 1, 35.0))}
    d = run(layout, [rec("s0")], applied, ready={"a-0", "b-0"}, limits=Limits(max_cost_per_hour=3.0))
    [conf] = d.actions
    assert isinstance(conf, Configure) and [s.name for s in conf.servers] == ["a-0"]
    assert any("break-before-make on s0 GPU 0: b-0" in n for n in d.notes)


def test_waits_along_a_chain_of_moves_that_ends_on_a_free_gpu() -> None:
    """c-0 (the only c server) moves from s0 to s1 as c-1, where retiring b-0 waits for b-1 on
    s2's free GPU: s1 waits for b-1, so s0 waits for c-1 instead of dropping c-0 (the ServeGen
    replay's remaining drops to zero); a swap between two GPUs still breaks before make."""
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
    assert kinds(d) == [("Configure", "s2")]
    assert not any("break-before-make" in n for n in d.notes)


def test_a_deferred_in_place_resize_does_not_cover_its_workload() -> None:
    """a-0 grows in place to 100 % on s0 but waits (b-0 there waits for b-1 booting on s2), so
    a-1 on the surplus s1 keeps serving: a-0 covers a only once its agent runs the new size."""
    layout = [slot("s0", share("a-0", "a", 0, 100.0)), slot("s2", share("b-1", "b", 0, 35.0))]
    applied = {"s0": (share("a-0", "a", 0, 65.0), share("b-0", "b", 1, 35.0)), "s1": (share("a-1", "a", 0, 50.0),)}
    d = run(layout, [rec("s0"), rec("s1"), rec("s2", State.PENDING)], applied, ready={"a-0", "a-1", "b-0"})
    assert kinds(d) == []
