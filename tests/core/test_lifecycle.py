"""The lifecycle transition table and sync: observation -> transitions, each with a reason."""

from __future__ import annotations

import pytest

from autoscaler.core.fleet.lifecycle import (
    LIVE,
    TRANSITIONS,
    InvalidTransition,
    Reason,
    Record,
    State,
    SyncInput,
    going_away,
    new_record,
    sync,
    transition,
    unclaimed,
)
from autoscaler.fleet.base import Instance, Notice, fleet_tags

pytestmark = pytest.mark.unit


NOW = 1000.0


def rec(state: State, slot: str = "f-p3-0", attempt: int = 0, iid: str | None = "i-1", t: float = NOW - 10) -> Record:
    return Record(
        slot=slot, attempt=attempt, instance_type="p3", state=state, created_at=t, updated_at=t, instance_id=iid
    )


def inst(iid: str = "i-1", slot: str = "f-p3-0", attempt: int = 0, state: str = "running") -> Instance:
    return Instance(
        id=iid,
        instance_type="p3",
        slot=slot,
        state=state,
        launched_at=NOW - 10,
        address="127.0.0.1",
        plan_generation=1,
        attempt=attempt,
        tags=fleet_tags("f", slot, 1, attempt),
    )  # type: ignore[arg-type]


def run(
    records: list[Record],
    instances: list[Instance],
    ok: frozenset[str] = frozenset(),
    contact: bool = True,
    closed: frozenset[tuple[str, int]] = frozenset(),
):
    return sync(SyncInput(records, instances, closed, ok, contact), NOW)


def test_every_live_state_can_reach_terminated() -> None:
    graph: dict[State, set[State]] = {}
    for (a, _), b in TRANSITIONS.items():
        graph.setdefault(a, set()).add(b)
    for start in LIVE | {State.FAILED, State.TERMINATING}:
        seen, todo = {start}, [start]
        while todo:
            for nxt in graph.get(todo.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        assert State.TERMINATED in seen, start


def test_invalid_edge_raises() -> None:
    with pytest.raises(InvalidTransition):
        transition(rec(State.TERMINATED), Reason.BOOTED, NOW)
    with pytest.raises(InvalidTransition):
        transition(rec(State.PENDING), Reason.AGENT_READY, NOW)


def test_transition_carries_reason_and_fields() -> None:
    ch = transition(new_record("s", 0, "p3", NOW), Reason.REQUEST, NOW, "planned")
    assert (ch.before, ch.record.state, ch.reason, ch.detail) == (State.NEW, State.REQUESTED, Reason.REQUEST, "planned")
    ch2 = transition(ch.record, Reason.LAUNCHED, NOW + 1, instance_id="i-9")
    assert ch2.record.instance_id == "i-9" and ch2.record.updated_at == NOW + 1


def test_requested_record_adopts_instance_found_by_slot_tag() -> None:
    changes, orphans = run([rec(State.REQUESTED, iid=None)], [inst()])
    assert [c.reason for c in changes] == [Reason.ADOPTED, Reason.BOOTED]
    assert changes[-1].record.instance_id == "i-1" and not orphans


def test_requested_record_ignores_other_attempts() -> None:
    """Attempt 1 is not adopted by attempt 0's instance; that one gets its own (discovered) record."""
    changes, orphans = run([rec(State.REQUESTED, attempt=1, iid=None)], [inst(attempt=0)])
    assert {(c.record.attempt, c.reason) for c in changes} == {(0, Reason.DISCOVERED), (0, Reason.BOOTED)}
    assert not orphans


def test_boot_and_agent_ready() -> None:
    changes, _ = run([rec(State.PENDING)], [inst()], ok=frozenset({"f-p3-0"}))
    assert [c.reason for c in changes] == [Reason.BOOTED, Reason.AGENT_READY]
    changes, _ = run([rec(State.PENDING)], [inst()])
    assert [c.reason for c in changes] == [Reason.BOOTED]


def test_without_contact_running_means_ready() -> None:
    changes, _ = run([rec(State.RUNNING)], [inst()], contact=False)
    assert [c.record.state for c in changes] == [State.READY]


def test_missing_instances() -> None:
    assert [c.reason for c in run([rec(State.READY)], [])[0]] == [Reason.VANISHED]
    assert [c.reason for c in run([rec(State.TERMINATING)], [])[0]] == [Reason.GONE]
    assert run([rec(State.PENDING, t=NOW - 5)], [])[0] == []  # fresh launch, listing may lag
    assert [c.reason for c in run([rec(State.PENDING, t=NOW - 500)], [])[0]] == [Reason.VANISHED]


def test_stopping_instance_counts_as_missing() -> None:
    assert [c.reason for c in run([rec(State.READY)], [inst(state="stopping")])[0]] == [Reason.VANISHED]


def test_discovers_fleet_instances_without_records() -> None:
    changes, orphans = run([], [inst("i-1", "f-p3-0"), inst("i-2", "f-p3-1", state="pending")])
    states = {(c.record.slot, c.record.state) for c in changes}
    assert states == {("f-p3-0", State.PENDING), ("f-p3-0", State.RUNNING), ("f-p3-1", State.PENDING)}
    assert all(c.record.instance_id for c in changes) and not orphans


def test_closed_attempt_is_an_orphan_not_rediscovered() -> None:
    changes, orphans = run([], [inst()], closed=frozenset({("f-p3-0", 0)}))
    assert changes == [] and [o.id for o in orphans] == ["i-1"]


def test_only_the_listed_keys_no_open_record_names_are_asked_about() -> None:
    """sync and adoptable need a closed record only for an instance no open record names; the
    store looks up those few keys instead of reading every closed record (Store.closed_among)."""
    listed = [inst("i-1", "f-p3-0"), inst("i-2", "f-p3-1"), inst("i-3", "f-p3-1", attempt=1), inst("i-4", slot="")]
    assert unclaimed(listed, [rec(State.READY, "f-p3-0"), rec(State.PENDING, "f-p3-1", iid="i-2")]) == {("f-p3-1", 1)}
    closed = {("f-p3-1", 1)} & unclaimed(listed, [])
    changes, orphans = run([rec(State.READY, "f-p3-0")], listed[:1] + listed[2:3], closed=frozenset(closed))
    assert changes == [] and [o.id for o in orphans] == ["i-3"]


def test_terminating_record_still_running_is_an_orphan() -> None:
    """A terminate recorded but never sent (crash) is sent again."""
    changes, orphans = run([rec(State.TERMINATING)], [inst()])
    assert changes == [] and [o.id for o in orphans] == ["i-1"]


@pytest.mark.parametrize(
    ("kind", "deadline", "leaves"),
    [
        ("interruption", NOW + 100, NOW + 100),  # the warning's own deadline
        ("interruption", None, NOW + 120),  # EC2 takes a spot instance two minutes after the warning
        ("state_change", None, NOW),  # stopping or shutting down: going now
        ("scheduled_change", NOW + 86400, NOW + 86400),
        ("rebalance", None, None),  # no deadline: it may live on
    ],
)
def test_a_going_instance_records_when_the_cloud_takes_it(kind: str, deadline: float | None, leaves: float | None):
    notice = Notice(kind=kind, instance_ids=("i-1",), at=NOW, deadline=deadline)  # type: ignore[arg-type]
    (change,) = going_away([rec(State.READY)], [notice], NOW)
    assert change.record.state is State.GOING_AWAY and change.record.leaves_at == leaves
