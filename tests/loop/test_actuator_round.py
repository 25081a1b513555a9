"""The actuator at fleet size (issue 50): a round reads the open records once and keeps them up to
date with its own writes, so each action is a lookup, not a read of every record."""

from __future__ import annotations

import time

import pytest

from autoscaler.core.fleet.lifecycle import Reason, State, new_record, transition
from autoscaler.core.rollout.actions import Drain, Terminate
from autoscaler.fleet.fake import FakeProvider
from autoscaler.loop.state.controller_state import ControllerState
from autoscaler.loop.state.store import Store
from autoscaler.loop.steps.actuator import Actuator
from autoscaler.transport.fake import FakeTransport

pytestmark = pytest.mark.unit


def _fleet(n: int) -> tuple[Store, FakeProvider, dict]:
    store, provider, instances, changes = Store(":memory:"), FakeProvider("f"), {}, []
    for k in range(n):
        inst = provider.launch(f"s{k}", "g4dn.xlarge", 1)
        instances[inst.id] = inst
        c = transition(new_record(f"s{k}", 0, "g4dn.xlarge", 1000.0, 1), Reason.REQUEST, 1000.0, "")
        c2 = transition(c.record, Reason.LAUNCHED, 1000.0, "", instance_id=inst.id)
        c3 = transition(c2.record, Reason.BOOTED, 1000.0, "")
        changes += [c, c2, c3, transition(c3.record, Reason.AGENT_READY, 1000.0, "")]
    store.apply(changes)
    return store, provider, instances


def _actuator(store: Store, provider: FakeProvider, instances: dict) -> Actuator:
    return Actuator(
        store=store,
        provider=provider,
        transport=FakeTransport(),
        instances=instances,
        assignment_generation={},
        default_port_base=8100,
        state=ControllerState(),
        tick=1,
        clock=lambda: 2000.0,
        max_concurrency=4,
    )


def test_a_later_action_sees_what_an_earlier_one_wrote() -> None:
    store, provider, instances = _fleet(3)
    iid = store.open_records()[1].instance_id
    out = _actuator(store, provider, instances).run(
        (Drain("s1", 0, "scale in"), Terminate("s1", 0, iid, Reason.SCALE_IN, "surplus"))
    )
    assert out.failed == [] and len(out.done) == 2
    steps = [(h["from"], h["to"]) for h in store.history("s1")][-2:]
    assert steps == [("ready", "draining"), ("draining", "terminating")]  # not ready -> terminating
    assert iid not in {i.id for i in provider.list_instances()}


def test_400_actions_at_2000_records_cost_a_lookup_each() -> None:
    store, provider, instances = _fleet(2000)
    ids = {r.slot: r.instance_id for r in store.open_records()}
    actions = tuple(Drain(f"s{k}", 0, "scale in") for k in range(200)) + tuple(
        Terminate(f"s{k}", 0, ids[f"s{k}"], Reason.SCALE_IN, "surplus") for k in range(200, 400)
    )
    started = time.process_time()
    out = _actuator(store, provider, instances).run(actions)
    took = time.process_time() - started
    assert out.failed == [] and len(out.done) == 400
    assert took < 1.0, f"{took:.2f} s of CPU (reading every record after each write: 2.8 s)"


def test_a_silent_agent_is_sent_no_drain_and_its_instance_still_drains() -> None:
    """An agent that did not answer this tick's status is sent nothing (it would cost the tick a
    second deadline); its record is DRAINING all the same, so reconcile terminates it once the
    drain wait is over, and nothing is written as applied or started for it."""
    store, provider, instances = _fleet(2)
    act = _actuator(store, provider, instances)
    act.answered = frozenset({"s0"})
    out = act.run((Drain("s0", 0, "scale in"), Drain("s1", 0, "scale in")))
    assert act.transport.calls == [("apply", store.open_records()[0].instance_id)]  # type: ignore[attr-defined]
    assert out.failed == [] and out.done == ["drain s0"]
    assert out.notes == ["drain s1 waits: its agent did not answer this tick's status"]
    assert {r.slot: r.state for r in store.open_records()} == {"s0": State.DRAINING, "s1": State.DRAINING}
    assert [(a["slot"], a["status"]) for a in store.actions()] == [("s0", "done")]
    assert ("s1", 0) not in store.applied()
