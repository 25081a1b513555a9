"""Instances going away (spot interruption warnings and the other notices) through the real tick,
against the fake provider, transport and interruption source."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoscaler.core.fleet.lifecycle import State
from autoscaler.fleet.base import Notice
from autoscaler.fleet.fake import FakeInterruptions
from tests.kit.control import Clock, make_controller, make_policy

pytestmark = pytest.mark.unit


def setup(tmp_path: Path, contact: bool = True):  # type: ignore[no-untyped-def]
    policy = make_policy(tmp_path)
    clock = Clock()
    ctl, prov, tr, _rates = make_controller(policy, clock, contact=contact)
    source = FakeInterruptions()
    ctl.deps.interruptions = source
    for _ in range(3):
        assert ctl.tick().ok
        clock.advance(30)
    assert {r.state for r in ctl.store.open_records()} == {State.READY}
    return ctl, prov, tr, source, clock


def record_of(ctl, instance_id: str):  # type: ignore[no-untyped-def]
    return next(r for r in ctl.store.all_records() if r.instance_id == instance_id)


def launches(prov) -> list[tuple[str, ...]]:  # type: ignore[no-untyped-def]
    return [c for c in prov.calls if c[0] == "launch"]


@pytest.mark.parametrize("contact", [True, False])
@pytest.mark.parametrize("kind", ["interruption", "rebalance", "state_change", "scheduled_change"])
def test_a_notice_replaces_the_instance_at_once_then_lets_it_go(tmp_path: Path, contact: bool, kind: str) -> None:
    ctl, prov, _tr, source, clock = setup(tmp_path, contact)
    victim = ctl.store.open_records()[0]
    before = len(launches(prov))
    notice = Notice(
        kind=kind, instance_ids=(victim.instance_id,), at=clock(), deadline=clock() + 120, detail="test", token="m-1"
    )  # type: ignore[arg-type]
    source.push(notice)
    report = ctl.tick()
    assert report.ok
    assert record_of(ctl, victim.instance_id).state is State.GOING_AWAY
    assert launches(prov)[before:] == [("launch", victim.slot, victim.instance_type, "1")]  # the same tick
    assert source.deleted == [notice] and source.pending == []
    assert any("going away" in n for n in report.notes)
    assert ("terminate", victim.instance_id) not in prov.calls  # it serves until the replacement does
    for _ in range(3):
        clock.advance(30)
        assert ctl.tick().ok
    old = record_of(ctl, victim.instance_id)
    assert old.state is State.TERMINATED and ("terminate", victim.instance_id) in prov.calls
    reasons = [h["reason"] for h in ctl.store.history(victim.slot) if h["attempt"] == victim.attempt]
    assert reasons[-3:] == [kind, "let_go", "gone"]
    new = next(r for r in ctl.store.open_records() if r.slot == victim.slot)
    assert new.attempt == 1 and new.state is State.READY
    assert len(launches(prov)) == before + 1


def test_the_replacement_is_ready_before_the_going_instance_is_let_go(tmp_path: Path) -> None:
    """Make-before-break in contact mode: the going instance's servers carry the slot's names, but
    only the replacement's agent answering ready lets it go."""
    ctl, _prov, tr, source, clock = setup(tmp_path, contact=True)
    victim = ctl.store.open_records()[0]
    source.push(
        Notice(
            kind="interruption", instance_ids=(victim.instance_id,), at=clock(), deadline=None, detail="", token="m-1"
        )
    )
    tr.not_ready.update(s["name"] for _, body in tr.applies for s in body["servers"])
    for _ in range(4):
        assert ctl.tick().ok
        clock.advance(30)
        assert record_of(ctl, victim.instance_id).state is State.GOING_AWAY
    tr.not_ready.clear()
    for _ in range(2):
        assert ctl.tick().ok
        clock.advance(30)
    assert record_of(ctl, victim.instance_id).state in (State.TERMINATING, State.TERMINATED)


def test_an_instance_the_cloud_takes_first_vanishes(tmp_path: Path) -> None:
    ctl, prov, _tr, source, clock = setup(tmp_path, contact=True)
    victim = ctl.store.open_records()[0]
    source.push(
        Notice(
            kind="interruption", instance_ids=(victim.instance_id,), at=clock(), deadline=None, detail="", token="m-1"
        )
    )
    assert ctl.tick().ok
    prov.kill(victim.instance_id or "")
    clock.advance(30)
    assert ctl.tick().ok
    reasons = [h["reason"] for h in ctl.store.history(victim.slot) if h["attempt"] == victim.attempt]
    assert reasons[-2:] == ["interruption", "vanished"]
    assert ("terminate", victim.instance_id) not in prov.calls


@pytest.mark.parametrize(
    "notice",
    [
        Notice(kind="interruption", instance_ids=("i-not-ours",), at=0.0, deadline=None, detail="", token="m-9"),
        Notice(
            kind="malformed",
            instance_ids=(),
            at=0.0,
            deadline=None,
            detail="Expecting value: line 1 column 1",
            token="m-9",
        ),
        Notice(kind="ignored", instance_ids=(), at=0.0, deadline=None, detail="state running", token="m-9"),
    ],
    ids=["not ours", "malformed", "ignored"],
)
def test_other_messages_are_deleted_and_change_nothing(tmp_path: Path, notice: Notice) -> None:
    ctl, prov, tr, source, _clock = setup(tmp_path)
    calls, applies, history = len(prov.calls), len(tr.applies), len(ctl.store.history())
    source.push(notice)
    report = ctl.tick()
    assert report.ok and source.deleted == [notice]
    assert [c for c in prov.calls[calls:] if c[0] != "list"] == [] and len(tr.applies) == applies
    assert len(ctl.store.history()) == history
    assert report.outcome.errors.get("interruptions", 0) == (notice.kind == "malformed")


def test_a_repeated_notice_is_handled_once(tmp_path: Path) -> None:
    ctl, prov, _tr, source, clock = setup(tmp_path)
    victim = ctl.store.open_records()[0]
    first = Notice(
        kind="rebalance", instance_ids=(victim.instance_id,), at=clock(), deadline=None, detail="", token="m-1"
    )
    again = Notice(
        kind="interruption", instance_ids=(victim.instance_id,), at=clock(), deadline=None, detail="", token="m-2"
    )
    source.push(first)
    assert ctl.tick().ok
    n = len(launches(prov))
    source.push(again)
    assert ctl.tick().ok
    assert len(launches(prov)) == n and source.deleted == [first, again]
    reasons = [h["reason"] for h in ctl.store.history(victim.slot) if h["attempt"] == victim.attempt]
    assert reasons.count("rebalance") == 1 and "interruption" not in reasons


def test_a_failing_queue_changes_nothing(tmp_path: Path) -> None:
    ctl, prov, _tr, source, _clock = setup(tmp_path)
    source.fail = True
    source.push(
        Notice(
            kind="interruption",
            instance_ids=(ctl.store.open_records()[0].instance_id,),
            at=0.0,
            deadline=None,
            detail="",
            token="m-1",
        )
    )
    calls = len(prov.calls)
    assert ctl.tick().ok and [c for c in prov.calls[calls:] if c[0] != "list"] == []
    source.fail = False
    assert ctl.tick().ok and source.deleted
