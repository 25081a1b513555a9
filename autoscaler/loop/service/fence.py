"""The one place mutating calls go out: a Provider and a Transport that check the Fence first,
and the same Fence bound into every AWS client, checked again just before a request is sent.

wiring.py wraps the real ones when the controller runs under a lease (`igniter run`), so every
launch, terminate and agent apply is made only while this process's term holds; reads (list,
status, host keys) pass through, and a standby could make them without harm. Each call that
passes the wrapper's check is recorded for crash and lease tests (faults.record, off unless
IGNITER_CALL_LOG is set).

Why a second check. The wrapper's check comes before the provider's own work (a lookup by tags,
building the request, signing it): a process paused in between (SIGSTOP, a VM stall, a long GC)
would send its request after its term ran out. `bind_aws` closes that window for AWS: a botocore
`before-send` handler on each client the leader's parts hold (EC2, SQS, CloudWatch; never the
lease's own DynamoDB client, whose conditional writes are the lease) checks the Fence for every
request that is not a read (Describe*, Get*, List*), for each attempt, retries included, after
signing: nothing but the socket write comes after it. A request whose term ran out is not sent;
LeaseLost is raised to the tick, which records it and acts on nothing more (controller.py). What
is left, from the check to the socket write, is microseconds of code; a process stopped exactly
there is covered by the term's margin (lease_s / 4 before anyone else may lead) and, for
RunInstances, by the launch token every leader derives alike (docs/operations.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from autoscaler.config.offerings import ON_DEMAND
from autoscaler.fleet.base import (
    Claim,
    Instance,
    Provider,
    ProviderError,
    WarmPool,
    pool_return_many,
    pool_stop_many,
    start_pooled_many,
    terminate_many,
)
from autoscaler.leader.base import Fence, LeaseLost, NotLeader
from autoscaler.loop.steps import faults
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

    def terminate_many(self, instance_ids: Sequence[str]) -> dict[str, ProviderError]:
        """One check for the batch here; an AWS client checks again before each request it sends."""
        token = self.fence.check(f"terminate {len(instance_ids)} instance(s)")
        for instance_id in instance_ids:
            faults.record("terminate", instance_id, token)
        return terminate_many(self.inner, instance_ids)

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

    def pool_stop_many(self, instance_ids: Sequence[str]) -> dict[str, ProviderError]:
        token = self.fence.check(f"pool stop {len(instance_ids)} member(s)")
        for instance_id in instance_ids:
            faults.record("pool_stop", instance_id, token)
        return pool_stop_many(self._pool(), instance_ids)

    def pool_return_many(self, returns: Mapping[str, str]) -> dict[str, ProviderError]:
        token = self.fence.check(f"pool return {len(returns)} instance(s)")
        for instance_id in returns:
            faults.record("pool_return", instance_id, token)
        return pool_return_many(self._pool(), returns)

    def start_pooled_many(self, claims: Sequence[Claim]) -> list[Instance | ProviderError]:
        token = self.fence.check(f"start {len(claims)} member(s)")
        for c in claims:
            faults.record("start_pooled", c.slot, token)
        return start_pooled_many(self._pool(), claims)

    def start_pooled(
        self, member_id: str, slot: str, instance_type: str, plan_generation: int, *, attempt: int = 0
    ) -> Instance:
        token = self.fence.check(f"start {member_id} for {slot}")
        faults.record("start_pooled", slot, token)
        return self._pool().start_pooled(member_id, slot, instance_type, plan_generation, attempt=attempt)

    def pool_return(self, instance_id: str, name: str) -> None:
        token = self.fence.check(f"pool return {instance_id}")
        faults.record("pool_return", instance_id, token)
        self._pool().pool_return(instance_id, name)

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


READS = ("Describe", "Get", "List")  # AWS operations that change nothing: a standby may make them
LEASE_HOOK = "igniter-lease"  # the handler's id on each client's event emitter (one per client)


def bind_aws(fence: Fence, parts: Iterable[object]) -> int:
    """Bind the botocore client of each part that has one (`part.client`) to `fence`; returns how
    many were bound. A part without a client (the local provider, a static rate source) is skipped."""
    bound = 0
    for part in parts:
        events = getattr(getattr(getattr(part, "client", None), "meta", None), "events", None)
        if events is None:
            continue
        events.register("before-send", _LeaseCheck(fence), unique_id=LEASE_HOOK)
        bound += 1
    return bound


class _LeaseCheck:
    """The before-send handler: None lets the request go; a refusal raises LeaseLost, which
    botocore hands to the caller unsent (it is no connection error, so it is not retried)."""

    def __init__(self, fence: Fence) -> None:
        self.fence = fence

    def __call__(self, event_name: str, **_: Any) -> None:
        _, service, operation = event_name.split(".", 2)
        if operation.startswith(READS):
            return None
        faults.point("slow_send")
        try:
            self.fence.check(f"{service} {operation}")
        except NotLeader as exc:
            raise LeaseLost(f"lease lost: {exc}") from None
        return None
