"""A hung agent costs a tick one deadline, not two (issue 50 item 2): its status call is the one
that waits; the actuator then sends it nothing this tick, and its new assignment goes on the first
tick it answers.

The hung agent is a fake transport whose calls to it take the whole deadline on the controller's
own clock (the clock advances by the deadline, then the call fails as the SSH transport's timeout
makes it fail): the tick's duration, as the controller measures it, counts the deadlines spent."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from autoscaler.core.fleet.lifecycle import State
from autoscaler.fleet.base import Instance
from autoscaler.planner.types import Plan
from autoscaler.transport.base import TransportError
from autoscaler.transport.bounded import agent_deadline_s
from autoscaler.transport.fake import FakeTransport
from tests.kit.control import Clock, make_controller, make_policy, stub_planner

pytestmark = pytest.mark.unit

WORKLOADS = [
    {"name": "alex", "model": "alexnet", "slo_ms": 15, "rate_rps": 150},
    {"name": "res", "model": "resnet50", "slo_ms": 40, "rate_rps": 50},
]
AGENTS = {"connect_timeout_s": 2.0, "command_timeout_s": 5.0}


class Hanging(FakeTransport):
    """FakeTransport, except that a call to an instance in `hung` spends `deadline_s` on `clock`
    and then fails as a timed-out call does."""

    def __init__(self, clock: Clock, deadline_s: float) -> None:
        super().__init__()
        self.clock, self.deadline_s, self.hung = clock, deadline_s, set[str]()

    def _hang(self, instance: Instance, call: str) -> None:
        if instance.id in self.hung:
            self.calls.append((call, instance.id))
            self.clock.advance(self.deadline_s)
            raise TransportError(f"{instance.id}: no answer within {self.deadline_s:g} s (fake)")

    def status(self, instance: Instance) -> dict[str, Any]:
        self._hang(instance, "status")
        return super().status(instance)

    def apply(self, instance: Instance, assignment: dict[str, Any]) -> None:
        self._hang(instance, "apply")
        super().apply(instance, assignment)


class Resizing:
    """The stub planner; once `resize` is set, every placement asks for more than its server
    carries at 40 % MPS (a resize, make-before-break: a new server beside the old one), so every
    ready instance gets a new assignment."""

    def __init__(self) -> None:
        self.resize = False

    def __call__(self, *args: Any) -> Plan:
        plan = stub_planner(*args)
        if not self.resize:
            return plan
        grow = {"mps_percent": 40.0, "rate_rps": 5000.0}
        return replace(
            plan,
            instances=tuple(
                replace(
                    i,
                    gpus=tuple(replace(g, placements=tuple(replace(p, **grow) for p in g.placements)) for g in i.gpus),
                )
                for i in plan.instances
            ),
        )


def _ready(tmp_path: Path, clock: Clock):  # type: ignore[no-untyped-def]
    policy = make_policy(tmp_path, workloads=WORKLOADS, agents=AGENTS)
    tr = Hanging(clock, agent_deadline_s(policy.agents))
    planner = Resizing()
    ctl, _, _, _ = make_controller(policy, clock, transport=tr, planner=planner)
    for _ in range(3):
        assert ctl.tick().ok
        clock.advance(30)
    ready = [r for r in ctl.store.open_records() if r.state is State.READY]
    assert len(ready) == 3 and len(tr.applies) == 3
    return ctl, tr, ready, planner


def test_a_hung_agent_costs_a_replan_tick_one_deadline_and_gets_its_assignment_once_it_answers(
    tmp_path: Path,
) -> None:
    clock = Clock()
    ctl, tr, ready, planner = _ready(tmp_path, clock)
    hung = ready[0]
    iid = hung.instance_id or ""
    before = ctl.store.applied()[hung.key]
    tr.hung.add(iid)
    tr.calls.clear()
    planner.resize = True  # a re-plan: every ready instance gets a new assignment
    report = ctl.tick()

    assert report.ok
    assert report.duration_s == tr.deadline_s  # one deadline (the status read), not two
    assert [c for c in tr.calls if c[1] == iid] == [("status", iid)]  # no apply after its silence
    others = {r.instance_id for r in ready[1:]}
    assert {c[1] for c in tr.calls if c[0] == "apply"} == others  # the others got theirs this tick
    assert ctl.store.applied()[hung.key] == before  # the skipped assignment is not taken as applied
    assert report.outcome.failed == []
    assert f"configure {hung.slot} waits: its agent did not answer this tick's status" in report.notes
    assert hung.key not in ctl.current_state().agent_seen or ctl.current_state().agent_seen[hung.key] < report.now

    tr.hung.clear()
    clock.advance(30)
    tr.calls.clear()
    report = ctl.tick()
    assert report.ok and report.duration_s == 0.0
    sent = [body for i, body in tr.applies if i == iid]
    assert ("apply", iid) in tr.calls and 40.0 in [s["mps_percent"] for s in sent[-1]["servers"]]
    assert ctl.store.applied()[hung.key][0] > before[0]  # applied under a newer generation once it answered


def test_a_drain_skipped_while_its_agent_was_silent_goes_once_it_answers(tmp_path: Path) -> None:
    """A scale-in tick whose surplus agent hangs: its record is DRAINING, its drain waits. Reconcile
    asks for no second drain (the record is no longer READY), so the actuator sends it on the
    first tick the agent answers; the instance is then terminated as drained, not agent_drain_s
    later with its servers never told to stop."""
    clock = Clock()
    policy = make_policy(tmp_path, workloads=WORKLOADS, agents=AGENTS, scaling={"scale_down_delay_s": 0})
    tr = Hanging(clock, agent_deadline_s(policy.agents))
    ctl, _, _, manual = make_controller(policy, clock, transport=tr)
    for _ in range(3):
        assert ctl.tick().ok
        clock.advance(30)
    before = {r.slot: r.instance_id or "" for r in ctl.store.open_records() if r.state is State.READY}
    manual.values["alex"] = 50.0  # one alex instance fewer
    surplus = "test-p3.2xlarge-2"  # the stub planner's layout keeps the other alex instance
    tr.hung.add(before[surplus])  # (all hung, the drain would wait for servers known to be ready)
    report = ctl.tick()
    draining = [r for r in ctl.store.open_records() if r.state is State.DRAINING]
    assert [r.slot for r in draining] == [surplus] and f"drain {surplus} waits" in report.notes[0]
    iid = before[surplus]
    assert not [body for i, body in tr.applies if i == iid and not body["servers"]]  # nothing sent yet

    tr.hung.clear()
    clock.advance(30)
    report = ctl.tick()
    assert f"drain {surplus}" in report.outcome.done
    assert [body["servers"] for i, body in tr.applies if i == iid][-1] == []  # told to stop its servers
    clock.advance(30)
    report = ctl.tick()
    assert f"terminate {surplus} {iid} (scale_in)" in report.outcome.done
