"""A run of launches (issue 50 item 2): the first alone, the rest in flight together where the
provider allows it (`launch_concurrency`, EC2: 8), each intent written before its call, the
outcomes in the actions' order; a refusal of the first ends the round as one at a time would."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import pytest

from autoscaler.core.fleet.lifecycle import State
from autoscaler.core.rollout.actions import Launch
from autoscaler.fleet.base import CapacityError, Instance
from autoscaler.fleet.fake import FakeProvider
from autoscaler.leader.base import LeaseLost
from autoscaler.loop.state.controller_state import ControllerState
from autoscaler.loop.state.store import Store
from autoscaler.loop.steps.actuator import Actuator
from autoscaler.transport.fake import FakeTransport

pytestmark = pytest.mark.unit


@dataclass
class Meeting(FakeProvider):
    """The fake provider, whose launches after the first wait (up to `wait_s`) until `meet` of
    them are in flight at once: sent one after the other, each waits in vain."""

    launch_concurrency: int = 8
    meet: int = 3
    wait_s: float = 5.0
    refuse: dict[str, Exception] = field(default_factory=dict)  # slot -> raised instead of launching
    met: list[bool] = field(default_factory=list)
    _n: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _barrier: threading.Barrier | None = None

    def launch(self, slot: str, instance_type: str, plan_generation: int, **kw: Any) -> Instance:
        with self._lock:
            self._n += 1
            n = self._n
            self._barrier = self._barrier or threading.Barrier(self.meet, timeout=self.wait_s)
        if 1 < n <= 1 + self.meet:
            try:
                self._barrier.wait()
                self.met.append(True)
            except threading.BrokenBarrierError:
                self.met.append(False)
        if slot in self.refuse:
            raise self.refuse[slot]
        with self._lock:
            return super().launch(slot, instance_type, plan_generation, **kw)


def _run(provider: FakeProvider, slots: int, store: Store | None = None) -> tuple[Store, Actuator]:
    store = store or Store(":memory:")
    act = Actuator(
        store=store,
        provider=provider,
        transport=FakeTransport(),
        instances={},
        assignment_generation={},
        default_port_base=8100,
        state=ControllerState(),
        tick=1,
        clock=lambda: 1000.0,
    )
    act.run(tuple(Launch(f"s{k}", "g4dn.xlarge", 0, "scale out") for k in range(slots)))
    return store, act


def _states(store: Store) -> dict[str, State]:
    return {r.slot: r.state for r in store.open_records()}


def test_launches_after_the_first_are_in_flight_together() -> None:
    provider = Meeting(meet=3)
    store, act = _run(provider, 4)
    assert provider.met == [True, True, True]
    assert [line.split(" -> ")[0] for line in act.outcome.done] == [f"launch s{k} g4dn.xlarge" for k in range(4)]
    assert _states(store) == {f"s{k}": State.PENDING for k in range(4)}
    assert len({r.instance_id for r in store.open_records()}) == 4


def test_a_provider_without_launch_concurrency_launches_one_at_a_time() -> None:
    provider = Meeting(launch_concurrency=1, meet=2, wait_s=0.1)
    _, act = _run(provider, 3)
    assert provider.met == [False, False]  # the second waited alone, then the third
    assert [line.split(" -> ")[0] for line in act.outcome.done] == [f"launch s{k} g4dn.xlarge" for k in range(3)]


def test_no_capacity_for_the_first_sends_no_other() -> None:
    provider = Meeting(refuse={"s0": CapacityError("g4dn.xlarge", "InsufficientInstanceCapacity")})
    store, act = _run(provider, 4)
    assert provider._n == 1 and act.outcome.capacity == ["g4dn.xlarge"]
    assert _states(store) == {"s0": State.FAILED}  # the others not even intended: the round ends, re-plans


def test_a_lost_lease_is_raised_at_its_place_after_every_call_returned() -> None:
    provider, store = Meeting(meet=3, refuse={"s2": LeaseLost("lease lost: term ran out")}), Store(":memory:")
    with pytest.raises(LeaseLost):
        _run(provider, 4, store)
    assert provider.met == [True, True, True]  # all sent before the outcomes were written
    states = {"s0": State.PENDING, "s1": State.PENDING, "s2": State.REQUESTED, "s3": State.REQUESTED}
    assert _states(store) == states  # s3 launched but unrecorded: resumed by its tags and token
