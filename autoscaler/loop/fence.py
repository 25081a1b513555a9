"""The one place mutating calls go out: a Provider and a Transport that check the Fence first.

wiring.py wraps the real ones when the controller runs under a lease (`igniter run`), so every
launch, terminate and agent apply is made only while this process's term holds; reads (list,
status, host keys) pass through, and a standby could make them without harm. The check is the
last thing before the call, and each call that passes it is recorded for crash and lease tests
(faults.record, off unless IGNITER_CALL_LOG is set).
"""

from __future__ import annotations

from typing import Any

from autoscaler.config.offerings import ON_DEMAND
from autoscaler.fleet.base import Instance, Provider, WarmPool
from autoscaler.leader.base import Fence
from autoscaler.loop import faults
from autoscaler.transport.base import Transport


class FencedProvider:
    """A Provider whose launch and terminate need the lease; anything else is the inner one's."""

    def __init__(self, inner: Provider, fence: Fence) -> None:
        self.inner, self.fence = inner, fence

    def list_instances(self) -> list[Instance]:
        return self.inner.list_instances()

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
        token = self.fence.check(f"launch {slot}")
        faults.record("launch", slot, token)
        return self.inner.launch(
            slot, instance_type, plan_generation, attempt=attempt, salt=salt, capacity_type=capacity_type
        )

    def terminate(self, instance_id: str) -> None:
        token = self.fence.check(f"terminate {instance_id}")
        faults.record("terminate", instance_id, token)
        self.inner.terminate(instance_id)

    def close(self) -> None:
        self.inner.close()

    # The warm pool (fleet/base.py WarmPool; only called where the inner provider has one).
    def pool_members(self) -> list[Instance]:
        return self._pool().pool_members()

    def pool_launch(self, name: str, instance_type: str) -> Instance:
        token = self.fence.check(f"pool launch {name}")
        faults.record("pool_launch", name, token)
        return self._pool().pool_launch(name, instance_type)

    def pool_stop(self, instance_id: str) -> None:
        token = self.fence.check(f"pool stop {instance_id}")
        faults.record("pool_stop", instance_id, token)
        self._pool().pool_stop(instance_id)

    def start_pooled(
        self, member_id: str, slot: str, instance_type: str, plan_generation: int, *, attempt: int = 0
    ) -> Instance:
        token = self.fence.check(f"start {member_id} for {slot}")
        faults.record("start_pooled", slot, token)
        return self._pool().start_pooled(member_id, slot, instance_type, plan_generation, attempt=attempt)

    def _pool(self) -> WarmPool:
        assert isinstance(self.inner, WarmPool), "the warm pool is only used where the provider has one"
        return self.inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)  # close, client, host_keys, ...: not mutating


class FencedTransport:
    """A Transport whose apply needs the lease; status and close pass through."""

    def __init__(self, inner: Transport, fence: Fence) -> None:
        self.inner, self.fence = inner, fence

    def apply(self, instance: Instance, assignment: dict[str, Any]) -> None:
        token = self.fence.check(f"apply to {instance.id}")
        faults.record("apply", instance.id, token)
        self.inner.apply(instance, assignment)

    def status(self, instance: Instance) -> dict[str, Any]:
        return self.inner.status(instance)

    def close(self) -> None:
        self.inner.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
