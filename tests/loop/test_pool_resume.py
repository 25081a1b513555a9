"""A pool return that a crash (or a failed call) interrupted is resumed, not turned into a
terminate: loop/steps/pool_step.py books each return's member name under its instance before act, and
when reconcile re-sends the terminate of a TERMINATING record's instance that is still listed (an
orphan: core/rollout/reconcile.py), the re-send goes out as that return again, under that name."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from autoscaler.core.fleet.lifecycle import Reason, Record, State, new_record, transition
from autoscaler.core.rollout.actions import FleetView, Terminate
from autoscaler.core.rollout.reconcile import _orphans
from autoscaler.fleet.base import Instance
from autoscaler.loop.state.store import Store
from autoscaler.loop.steps.pool_step import STORE_KEY, PoolStep
from autoscaler.transport.base import TransportError
from autoscaler.transport.fake import FakeTransport, NoneTransport
from tests.kit.control import Clock, make_policy

pytestmark = pytest.mark.unit


class Pool:
    """The WarmPool capability, enough for PoolStep to see one (its calls are not made here)."""

    def pool_members(self) -> list[Instance]:
        return []

    def pool_launch(self, name: str, instance_type: str) -> Instance:
        raise AssertionError("not called")

    def pool_stop(self, instance_id: str) -> None:
        raise AssertionError("not called")

    def start_pooled(
        self, member_id: str, slot: str, instance_type: str, plan_generation: int, *, attempt: int = 0
    ) -> Instance:
        raise AssertionError("not called")

    def pool_return(self, instance_id: str, name: str) -> None:
        raise AssertionError("not called")


def _ready(store: Store, slot: str, iid: str, now: float) -> Record:
    rec = new_record(slot, 0, "p3.2xlarge", now)
    for reason, extra in (
        (Reason.REQUEST, {}),
        (Reason.LAUNCHED, {"instance_id": iid}),
        (Reason.BOOTED, {}),
        (Reason.AGENT_READY, {}),
    ):
        change = transition(rec, reason, now, **extra)
        store.apply([change])
        rec = change.record
    return rec


def _step(tmp_path: Path, store: Store, clock: Clock) -> PoolStep:
    policy = make_policy(tmp_path, scaling={"warm_pool": {"size": 1}})
    return PoolStep(policy, Pool(), store, NoneTransport(), False, clock)


def test_an_interrupted_return_is_resent_as_that_return_and_stale_names_are_dropped(tmp_path: Path) -> None:
    clock, store = Clock(), Store(":memory:")
    ending = _ready(store, "s0", "i-ending", clock())
    store.apply([transition(ending, Reason.SCALE_IN, clock(), "drained")])  # then the crash
    _ready(store, "s1", "i-serving", clock())  # booked, but the crash came before its transition
    store.put(STORE_KEY, {"seq": 2, "pending": {}, "returning": {"i-ending": "pool-x-1", "i-serving": "pool-x-2"}})
    resent = (
        Terminate("s0", None, "i-ending", Reason.SCALE_IN, "terminating, still listed: re-sent"),
        Terminate("s9", None, "i-orphan", Reason.SCALE_IN, "fleet instance with no open record"),
    )
    out: Any = _step(tmp_path, store, clock).reuse(resent)
    assert [a.to_pool for a in out] == ["pool-x-1", None]  # the same name; a true orphan is terminated
    assert store.get(STORE_KEY)["returning"] == {"i-ending": "pool-x-1"}  # i-serving decides afresh


def test_a_terminating_records_listed_instance_is_terminated_again_and_says_why() -> None:
    now = 0.0
    rec = transition(new_record("s0", 0, "p3", now), Reason.REQUEST, now).record
    rec = transition(rec, Reason.LAUNCHED, now, instance_id="i-1").record
    rec = transition(rec, Reason.SCALE_IN, now).record
    assert rec.state is State.TERMINATING
    view = FleetView(records=[rec], applied={}, orphans=[("s0", "i-1"), ("s5", "i-5")])
    got = _orphans(view)
    assert [(a.instance_id, a.attempt, a.detail) for a in got] == [  # type: ignore[union-attr]
        ("i-1", None, "terminating, still listed: re-sent"),
        ("i-5", None, "fleet instance with no open record"),
    ]


def test_warming_members_agents_are_asked_together_and_a_silent_one_is_not_stopped(tmp_path: Path) -> None:
    """The pool's running members are asked whether their agent answers (initialised) as the
    fleet's agents are: all at once in the bounded pool (each status call here waits until every
    member is being asked; one at a time, the barrier breaks), and one that does not answer is
    left warming while the others are stopped."""
    members = [
        Instance(id=f"i-m{n}", instance_type="p3.2xlarge", slot=f"pool-x-{n}", state="running", launched_at=0.0)
        for n in range(3)
    ]
    together = threading.Barrier(len(members), timeout=5)

    class Members(Pool):
        def pool_members(self) -> list[Instance]:
            return members

    class Agents(FakeTransport):
        def status(self, instance: Instance) -> dict[str, Any]:
            together.wait()
            if instance.id == "i-m1":
                raise TransportError("no answer within the deadline (fake)")
            return super().status(instance)

    policy = make_policy(tmp_path, scaling={"warm_pool": {"size": 3}})
    step = PoolStep(policy, Members(), Store(":memory:"), Agents(), True, Clock())
    planned = step.planned()
    assert planned is not None and planned[0].stop == ("i-m0", "i-m2")
