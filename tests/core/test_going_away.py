"""Letting going instances go (core/going_away.py): after their replacements serve, or once the
gateway has drained them; at once when they serve nothing."""

from __future__ import annotations

from autoscaler.core.going_away import leaving
from autoscaler.core.layout import PlannedServer
from autoscaler.core.lifecycle import Record, State


def rec(slot: str, state: State = State.GOING_AWAY, attempt: int = 0) -> Record:
    return Record(
        slot=slot,
        attempt=attempt,
        instance_type="p3",
        state=state,
        created_at=0.0,
        updated_at=0.0,
        instance_id=f"i-{slot}",
    )


def srv(name: str, workload: str) -> PlannedServer:
    return PlannedServer(
        name=name, workload=workload, model="resnet50", gpu_index=0, index=0, batch=4, mps_percent=50.0
    )


SERVERS = {("s0", 0): (srv("a-0", "a"), srv("b-0", "b")), ("s1", 0): ()}


def test_a_going_instance_waits_until_every_workload_it_serves_is_covered():
    records = [rec("s0"), rec("s1"), rec("s2", State.READY)]
    out = leaving(records, SERVERS, {"a": True, "b": False})
    assert [(r.slot, why) for r, why in out.let_go] == [("s1", "going away and serves nothing")]
    out = leaving(records, SERVERS, {"a": True, "b": True})
    assert sorted(r.slot for r, _ in out.let_go) == ["s0", "s1"] and out.to_drain == ()


def test_with_a_gateway_it_is_drained_at_once_and_let_go_when_drained():
    records = [rec("s0")]
    out = leaving(records, SERVERS, {"a": False, "b": False}, drained=frozenset())
    assert out.let_go == () and out.to_drain == (("s0", 0),)
    out = leaving(records, SERVERS, {"a": False, "b": False}, drained=frozenset({"a-0"}))
    assert out.let_go == () and out.to_drain == (("s0", 0),)
    out = leaving(records, SERVERS, {"a": False, "b": False}, drained=frozenset({"a-0", "b-0"}))
    assert [r.slot for r, _ in out.let_go] == ["s0"] and out.to_drain == ()
