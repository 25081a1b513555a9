"""Letting going instances go (core/fleet/going_away.py): after their replacements serve, or, with a
gateway, once it has drained them (a drain that begins when the replacement serves, or at once
when the instance is about to be taken); at once when they serve nothing."""

from __future__ import annotations

from dataclasses import replace

import pytest

from autoscaler.core.fleet.going_away import leaving, taken_soon
from autoscaler.core.fleet.lifecycle import Record, State
from autoscaler.core.layout.layout_types import PlannedServer

pytestmark = pytest.mark.unit


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


def test_with_a_gateway_it_serves_until_its_replacement_does_then_drains_then_goes():
    records = [rec("s0")]  # a rebalance recommendation: no deadline
    out = leaving(records, SERVERS, {"a": True, "b": False}, drained=frozenset(), now=100.0, drain_s=30.0)
    assert out.let_go == () and out.to_drain == ()  # b's replacement does not serve yet: it keeps serving
    out = leaving(records, SERVERS, {"a": True, "b": True}, drained=frozenset(), now=100.0, drain_s=30.0)
    assert out.let_go == () and out.to_drain == (("s0", 0),)  # covered: drained, not let go yet
    out = leaving(records, SERVERS, {"a": True, "b": True}, drained=frozenset({("s0", 0)}), now=100.0, drain_s=30.0)
    assert [(r.slot, why) for r, why in out.let_go] == [("s0", "going away, drained at the gateway")]
    assert out.to_drain == ()


def test_with_a_gateway_an_instance_about_to_be_taken_drains_at_once():
    """Less than drain_s before the cloud takes it: the drain begins whether or not the
    replacement serves, so it can finish in time; earlier, the instance keeps serving."""
    warned = replace(rec("s0"), leaves_at=220.0)  # a spot warning at 100: taken at 220
    for now, drains in [(100.0, False), (189.9, False), (190.0, True), (230.0, True)]:
        out = leaving([warned], SERVERS, {"a": False, "b": False}, drained=frozenset(), now=now, drain_s=30.0)
        assert out.to_drain == ((("s0", 0),) if drains else ()) and out.let_go == (), now
        assert taken_soon(warned, now, 30.0) is drains
    assert not taken_soon(rec("s0"), 1e12, 30.0)  # no deadline: never about to be taken
    out = leaving([warned], SERVERS, {"a": False}, drained=frozenset({("s0", 0)}), now=200.0, drain_s=30.0)
    assert [r.slot for r, _ in out.let_go] == ["s0"]


def test_without_a_gateway_the_deadline_changes_nothing():
    """Nothing can take its traffic early: it serves until covered (or the cloud takes it)."""
    warned = replace(rec("s0"), leaves_at=110.0)
    assert leaving([warned], SERVERS, {"a": False, "b": True}, now=200.0, drain_s=30.0) == leaving(
        [warned], SERVERS, {"a": False, "b": True}
    )
    assert leaving([warned], SERVERS, {"a": False, "b": True}, now=200.0).let_go == ()
