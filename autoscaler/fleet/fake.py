"""An in-memory Provider for tests and the simulator: records every call, can be told to fail.

Instances start `pending` and turn `running` after `boot_s` of the injected clock (0: on the next
listing). Terminated instances disappear from listings, as EC2's eventually do.

Thread-safe: a lock guards the instances, the id counter and the injected failures, because the
actuator sends a run of launches from a thread pool where a provider declares `launch_concurrency`
(loop/steps/launches.py; the fleet benchmark's provider does, as EC2's does).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from autoscaler.config.offerings import ON_DEMAND, SPOT
from autoscaler.fleet.base import TAG_ATTEMPT, TAG_SLOT, CapacityError, Instance, Notice, ProviderError, fleet_tags


@dataclass
class FakeProvider:
    fleet: str = "igniter"
    clock: Callable[[], float] = lambda: 0.0
    boot_s: float = 0.0
    calls: list[tuple[str, ...]] = field(default_factory=list)
    no_capacity: set[str] = field(default_factory=set)  # instance types (any capacity type) that raise CapacityError
    no_spot: set[str] = field(default_factory=set)  # instance types whose spot launches raise CapacityError
    fail_next: list[ProviderError] = field(default_factory=list)  # raised by the next mutating calls
    _instances: dict[str, Instance] = field(default_factory=dict)
    _count: int = 0
    _state_lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def list_instances(self) -> list[Instance]:
        self.calls.append(("list",))
        now = self.clock()
        with self._state_lock:
            for iid, inst in list(self._instances.items()):
                if inst.state == "pending" and now - inst.launched_at >= self.boot_s:
                    self._instances[iid] = replace(inst, state="running")
            return sorted(self._instances.values(), key=lambda i: i.id)

    def launch(
        self,
        slot: str,
        instance_type: str,
        plan_generation: int,
        *,
        attempt: int = 0,
        salt: str = "",
        capacity_type: str = ON_DEMAND,
    ) -> Instance:
        self.calls.append(
            ("launch", slot, instance_type, str(attempt)) + ((capacity_type,) if capacity_type != ON_DEMAND else ())
        )
        with self._state_lock:
            found = self._find(slot, attempt)
            if found is not None:
                return found
            if self.fail_next:
                raise self.fail_next.pop(0)
            if instance_type in self.no_capacity or (capacity_type == SPOT and instance_type in self.no_spot):
                raise CapacityError(instance_type, "InsufficientInstanceCapacity (fake)", capacity_type)
            self._count += 1
            inst = Instance(
                id=f"i-{self._count:06d}",
                instance_type=instance_type,
                slot=slot,
                state="pending",
                launched_at=self.clock(),
                address="127.0.0.1",
                plan_generation=plan_generation,
                attempt=attempt,
                tags=fleet_tags(self.fleet, slot, plan_generation, attempt, capacity_type),
                capacity_type=capacity_type,
            )
            self._instances[inst.id] = inst
            return inst

    def _find(self, slot: str, attempt: int) -> Instance | None:
        return next(
            (
                i
                for i in self._instances.values()
                if i.tags.get(TAG_SLOT) == slot and i.tags.get(TAG_ATTEMPT) == str(attempt)
            ),
            None,
        )

    def terminate(self, instance_id: str) -> None:
        self.calls.append(("terminate", instance_id))
        with self._state_lock:
            if self.fail_next:
                raise self.fail_next.pop(0)
            self._instances.pop(instance_id, None)

    def close(self) -> None:
        return None

    def mutating_calls(self) -> list[tuple[str, ...]]:
        return [c for c in self.calls if c[0] != "list"]

    def kill(self, instance_id: str) -> None:
        """Simulate an instance lost outside the autoscaler (spot reclaim, operator)."""
        with self._state_lock:
            self._instances.pop(instance_id, None)


@dataclass
class FakeInterruptions:
    """An InterruptionSource for tests: `push` notices; `receive` hands out what is pending (all of
    it again until `done`, as a queue redelivers undeleted messages); `deleted` records `done`."""

    pending: list[Notice] = field(default_factory=list)
    deleted: list[Notice] = field(default_factory=list)
    fail: bool = False  # receive reads nothing (as a failing queue does) and counts an error
    errors: int = 0
    polls: int = 0

    def push(self, *notices: Notice) -> None:
        self.pending.extend(notices)

    def receive(self) -> list[Notice]:
        if self.fail:
            self.errors += 1
            return []
        return list(self.pending)

    def done(self, notices: Sequence[Notice]) -> None:
        for n in notices:
            if n in self.pending:
                self.pending.remove(n)
                self.deleted.append(n)

    def poll(self) -> bool:
        self.polls += 1
        return not self.fail and any(n.instance_ids for n in self.pending)
