"""The observe step's agent lanes (loop/tick/observe.py, transport/bounded.py call_laned): an agent
that did not answer the tick before is read beside the main pool, so when it hangs it holds none of
the `agents.max_concurrency` slots the answering agents share (issue 50 item 2)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from autoscaler.config.policy import AgentsConfig
from autoscaler.core.fleet.lifecycle import Reason, Record, new_record, transition
from autoscaler.fleet.base import Instance
from autoscaler.loop.state.controller_state import ControllerState
from autoscaler.loop.state.store import Store
from autoscaler.loop.tick.observe import agent_statuses, remember_agents, silent_last_time
from autoscaler.loop.tick.records import Deps
from autoscaler.transport.base import TransportError
from autoscaler.transport.fake import FakeTransport

pytestmark = pytest.mark.unit

SLOTS = [f"s{n:02d}" for n in range(12)]
HUNG = {"s00", "s05", "s11"}  # silent the tick before; hang on the next


class Hanging(FakeTransport):
    """`hung` instances fail (tick 1), or once `hang` is set hold their call until every other
    agent has answered (or 30 s, which the test would see) and then fail."""

    def __init__(self, hung: set[str], others: int) -> None:
        super().__init__()
        self.hung, self.others, self.hang = hung, others, False
        self.lock, self.answered, self.all_answered = threading.Lock(), 0, threading.Event()
        self.waited: list[bool] = []

    def status(self, instance: Instance) -> dict[str, Any]:
        if instance.slot in self.hung:
            if self.hang:
                self.waited.append(self.all_answered.wait(30))
            raise TransportError(f"{instance.slot}: no answer within the deadline")
        out = super().status(instance)
        with self.lock:
            self.answered += 1
            if self.answered == self.others:
                self.all_answered.set()
        return out


def _ready(slot: str) -> list:  # type: ignore[type-arg]
    rec = transition(new_record(slot, 0, "p3.2xlarge", 0.0, 1), Reason.REQUEST, 0.0, "")
    launched = transition(rec.record, Reason.LAUNCHED, 0.0, "", instance_id=f"i-{slot}")
    booted = transition(launched.record, Reason.BOOTED, 0.0, "")
    return [rec, launched, booted, transition(booted.record, Reason.AGENT_READY, 0.0, "")]


def _fleet() -> tuple[Store, dict[str, Instance]]:
    store = Store(":memory:")
    for slot in SLOTS:
        store.apply(_ready(slot))
    return store, {
        f"i-{s}": Instance(id=f"i-{s}", instance_type="p3.2xlarge", slot=s, state="running", launched_at=0.0)
        for s in SLOTS
    }


def test_agents_silent_last_tick_hang_beside_the_pool_not_in_it() -> None:
    """Tick 1: three agents do not answer. Tick 2: they hang, the pool has two slots; asked in one
    pool they would hold both (the first, s00, is asked first) until their deadline. Here every
    other agent answers while they hang, and the outcome is the same as one pool's."""
    store, instances = _fleet()
    transport = Hanging(HUNG, len(SLOTS) - len(HUNG))
    deps = Deps(None, transport, None, store, None, lambda: 0.0)  # type: ignore[arg-type]
    cfg = AgentsConfig(max_concurrency=2, connect_timeout_s=10.0, command_timeout_s=20.0)
    records = store.open_records()
    first, state = agent_statuses(deps, ControllerState(), records, instances, cfg)
    assert sorted(first) == sorted(set(SLOTS) - HUNG)
    state = remember_agents(state, records, frozenset(first), 100.0)
    assert {r.slot for r in records if silent_last_time(state, r, 100.0)} == HUNG

    transport.hang, transport.answered = True, 0
    transport.all_answered.clear()
    second, after = agent_statuses(deps, state, records, instances, cfg)
    assert transport.waited == [True] * len(HUNG)  # each hung until the others had all answered
    assert sorted(second) == sorted(set(SLOTS) - HUNG) and after.quarantined == {}


def _record(slot: str) -> Record:
    return _ready(slot)[-1].record


def test_silent_last_time_is_an_answer_older_than_the_newest_or_none_at_all() -> None:
    """A new node (never answered) is a suspect; a fresh start (nothing remembered) has none."""
    state = ControllerState(agent_seen={("a", 0): 60.0, ("b", 0): 30.0})
    assert not silent_last_time(state, _record("a"), 60.0)
    assert silent_last_time(state, _record("b"), 60.0)
    assert silent_last_time(state, _record("new"), 60.0)
    assert not silent_last_time(ControllerState(), _record("new"), None)
