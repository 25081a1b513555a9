"""The disruption budget through the real tick: voluntary disruptions (scale-in, consolidation)
bounded in flight, involuntary ones (interruptions, failures) never held back."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoscaler.core.fleet.disruption import IN_FLIGHT, allowed_slots
from autoscaler.core.fleet.lifecycle import Record, State
from autoscaler.fleet.base import Notice
from autoscaler.fleet.fake import FakeInterruptions
from tests.kit.control import Clock, make_controller, make_policy

pytestmark = pytest.mark.unit


SCALING = {"interval_s": 30, "scale_down_delay_s": 0, "headroom": 0.0, "forecast": "last"}


def live(ctl) -> list[Record]:  # type: ignore[no-untyped-def]
    return [r for r in ctl.store.open_records() if r.state in (State.PENDING, State.RUNNING, State.READY)]


def fleet_of(tmp_path: Path, budget: object, n: int = 20):  # type: ignore[no-untyped-def]
    """A ready fleet of `n` instances (the stub planner: one per 100 req/s)."""
    policy = make_policy(tmp_path, scaling={**SCALING, "disruption_budget": {"max_unavailable": budget}})
    clock = Clock()
    ctl, prov, tr, rates = make_controller(policy, clock, rates={"alex": 100.0 * (n - 1), "res": 100.0})
    for _ in range(3):
        assert ctl.tick().ok
        clock.advance(30)
    assert len(live(ctl)) == n and {r.state for r in live(ctl)} == {State.READY}
    return ctl, prov, tr, rates, clock


def scale_in(ctl, prov, clock, ticks: int = 30) -> tuple[list[int], list[int], list[str]]:  # type: ignore[no-untyped-def]
    """Ticks until nothing more changes; per tick: disruptions in flight after it, terminations
    it sent; and every note."""
    in_flight, sent, notes = [], [], []
    for _ in range(ticks):
        before = len([c for c in prov.calls if c[0] == "terminate"])
        report = ctl.tick()
        assert report.ok
        clock.advance(30)
        in_flight.append(sum(r.state in IN_FLIGHT for r in ctl.store.open_records()))
        sent.append(len([c for c in prov.calls if c[0] == "terminate"]) - before)
        notes += report.notes
    return in_flight, sent, notes


def test_a_scale_in_from_20_to_5_keeps_at_most_2_in_flight_and_converges(tmp_path: Path) -> None:
    ctl, prov, _tr, rates, clock = fleet_of(tmp_path, 2)
    rates.set(alex=400.0, res=100.0)  # 5 instances
    in_flight, sent, notes = scale_in(ctl, prov, clock)
    assert max(in_flight) <= 2 and max(sent) <= 2
    assert sent.count(2) >= 6 and sum(sent) == 15  # it went as fast as the budget allowed, no further
    assert any("held by the disruption budget" in n for n in notes)
    assert len(live(ctl)) == 5 and in_flight[-1] == 0 and sent[-5:] == [0] * 5
    assert {r.state for r in live(ctl)} == {State.READY}


def test_a_percentage_is_of_the_fleet_rounded_up(tmp_path: Path) -> None:
    ctl, prov, _tr, rates, clock = fleet_of(tmp_path, "10%")
    rates.set(alex=400.0, res=100.0)
    in_flight, sent, _ = scale_in(ctl, prov, clock)
    # ceil(10 % of the fleet): 2 while 11 to 20 instances remain, then 1 (ceil(0.9) .. ceil(0.6)).
    # Each disruption takes two ticks: the drain (the agent stops its servers gracefully), then the
    # termination once the agent reports none still stopping; both count as in flight.
    assert in_flight[:21] == [2] * 10 + [1] * 10 + [0]
    assert [sum(sent[i : i + 2]) for i in range(0, 20, 2)] == [2] * 5 + [1] * 5
    assert sum(sent) == 15 and len(live(ctl)) == 5


def test_a_zero_budget_holds_every_scale_in_but_no_interruption(tmp_path: Path) -> None:
    ctl, prov, _tr, rates, clock = fleet_of(tmp_path, 0, n=6)
    source = FakeInterruptions()
    ctl.deps.interruptions = source
    rates.set(alex=200.0, res=100.0)  # 3 instances would do
    _, sent, notes = scale_in(ctl, prov, clock, ticks=4)
    assert sum(sent) == 0 and any("held by the disruption budget" in n for n in notes)
    victim = live(ctl)[0]
    source.push(
        Notice(
            kind="interruption", instance_ids=(victim.instance_id,), at=clock(), deadline=None, detail="", token="m-1"
        )
    )
    n = len([c for c in prov.calls if c[0] == "launch"])
    assert ctl.tick().ok
    going = next(r for r in ctl.store.open_records() if r.key == victim.key)
    assert going.state is State.GOING_AWAY
    assert len([c for c in prov.calls if c[0] == "launch"]) > n or victim.slot not in {
        s.slot
        for s in ctl.store.current_layout().slots  # type: ignore[union-attr]
    }
    for _ in range(3):
        clock.advance(30)
        assert ctl.tick().ok
    assert ("terminate", victim.instance_id) in prov.calls  # let go: never held by the budget


def _rec(slot: str, state: State) -> Record:
    return Record(
        slot=slot, attempt=0, instance_type="p3", state=state, created_at=0.0, updated_at=0.0, instance_id=f"i-{slot}"
    )


def test_allowed_slots_budget_only_serving_instances_emptiest_first() -> None:
    surplus = [_rec("a", State.READY), _rec("b", State.READY), _rec("c", State.PENDING), _rec("d", State.READY)]
    others = [_rec("x", State.DRAINING), _rec("y", State.GOING_AWAY), _rec("z", State.READY)]
    applied = {"a": (object(),) * 3, "b": (), "d": (object(),)}
    ok, notes = allowed_slots(surplus, surplus + others, applied, 3)  # type: ignore[arg-type]
    assert ok == {"c", "b"}  # c is not serving yet; b is the emptiest; x and y are in flight
    assert notes == ["scale-in of d, a held by the disruption budget: 2 in flight, max_unavailable 3"]
    ok, notes = allowed_slots(surplus, surplus + others, applied, None)  # type: ignore[arg-type]
    assert ok == {"a", "b", "c", "d"} and notes == []
    ok, _ = allowed_slots(surplus, surplus + others, applied, 1)  # type: ignore[arg-type]
    assert ok == {"c"}  # two in flight already: no serving instance may go
