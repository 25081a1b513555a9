"""The EC2 provider's warm pool (fleet/base.py WarmPool), after EC2 Auto Scaling's warm pools of
stopped instances: a member is launched from its type's launch template (user data installs the
agent and the models, as for any instance), stopped once initialised, and started for a scale-out.
Stopped, it costs only its EBS volumes.

Ownership and idempotency are by tag and request token, as for launches:
- a member carries the fleet tag, `igniter:pool=member` and its name as `igniter:slot`; its
  RunInstances carries a ClientToken derived from the name, so a launch re-sent after a crash is
  the same instance (loop/steps/pool_step.py keeps the name until the call has answered);
- a claim writes the slot's tags and `igniter:pool=claimed` (CreateTags) before StartInstances, so a
  crash between the two leaves an instance that names its slot and attempt: the next launch of that
  slot and attempt finds it and starts it, instead of starting another member or launching anew;
- a retiring instance returned to the pool (ReuseOnScaleIn) is re-tagged as a member (a pool name as
  its slot, `igniter:pool=member`) before StopInstances, so a crash between the two leaves a running
  member, which the next refill stops (or terminates, over the target) like any warming one;
- StopInstances and StartInstances of an instance in the state asked for are no-ops, and only an
  instance carrying this fleet's tag is ever stopped, started or re-tagged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from autoscaler.config.offerings import ON_DEMAND
from autoscaler.fleet.base import (
    POOL_CLAIMED,
    POOL_MEMBER,
    TAG_FLEET,
    TAG_POOL,
    TAG_SLOT,
    Instance,
    InstanceState,
    NotFoundError,
    PermanentError,
    ProviderError,
    fleet_tags,
    launch_token,
)

POOL_STATES: dict[str, InstanceState] = {
    "pending": "pending",
    "running": "running",
    "stopping": "stopping",
    "stopped": "stopped",
}


class Ec2WarmPool:
    """Mixed into Ec2Provider, which supplies the stubs below (its client, request, parsing and
    error mapping: one of each for launches and the pool)."""

    fleet: str
    client: Any
    after_claim: Callable[[str], None] | None = None  # test-only: a crash point between claim and start
    after_return: Callable[[str], None] | None = None  # test-only: a crash point between re-tag and stop

    def launch(self, slot: str, instance_type: str, plan_generation: int, *, attempt: int = 0) -> Instance:
        raise NotImplementedError

    def _run_request(
        self, slot: str, instance_type: str, plan_generation: int, attempt: int, capacity_type: str
    ) -> dict[str, Any]:
        raise NotImplementedError

    def _to_instance(self, raw: dict[str, Any]) -> Instance:
        raise NotImplementedError

    def _find(self, slot: str, attempt: int) -> Instance | None:
        raise NotImplementedError

    def _describe_ids(self, ids: list[str]) -> Iterable[dict[str, Any]]:
        raise NotImplementedError

    def _classify(self, exc: Exception, instance_type: str = "") -> ProviderError:
        raise NotImplementedError

    def pool_members(self) -> list[Instance]:
        filters = [
            {"Name": f"tag:{TAG_FLEET}", "Values": [self.fleet]},
            {"Name": f"tag:{TAG_POOL}", "Values": [POOL_MEMBER]},
            {"Name": "instance-state-name", "Values": list(POOL_STATES)},
        ]
        return sorted(self._describe_raw_pool(filters), key=lambda i: i.id)

    def pool_launch(self, name: str, instance_type: str) -> Instance:
        found = self._pool_named(name)
        if found is not None:
            return found
        request = self._run_request(name, instance_type, 0, 0, ON_DEMAND)
        request["TagSpecifications"][0]["Tags"].append({"Key": TAG_POOL, "Value": POOL_MEMBER})
        request["ClientToken"] = launch_token(self.fleet, name, 0, "pool")
        try:
            reply = self.client.run_instances(**request)
        except (ClientError, BotoCoreError) as exc:
            raise self._classify(exc, instance_type) from exc
        return self._pool_instance(reply["Instances"][0])

    def pool_stop(self, instance_id: str) -> None:
        raw = self._owned(instance_id)
        if raw is None or raw.get("State", {}).get("Name") not in ("pending", "running"):
            return
        self._call("stop_instances", InstanceIds=[instance_id])

    def start_pooled(
        self, member_id: str, slot: str, instance_type: str, plan_generation: int, *, attempt: int = 0
    ) -> Instance:
        found = self._find(slot, attempt)  # the attempt's instance already: a repeated call starts nothing
        if found is not None:
            return found
        raw = self._owned(member_id)
        tags = _tags(raw) if raw is not None else {}
        if raw is None or tags.get(TAG_POOL) != POOL_MEMBER or raw.get("State", {}).get("Name") != "stopped":
            return self.launch(slot, instance_type, plan_generation, attempt=attempt)
        new = {**fleet_tags(self.fleet, slot, plan_generation, attempt), TAG_POOL: POOL_CLAIMED, "Name": slot}
        self._call("create_tags", Resources=[member_id], Tags=[{"Key": k, "Value": v} for k, v in new.items()])
        if self.after_claim is not None:
            self.after_claim(member_id)
        self._call("start_instances", InstanceIds=[member_id])
        merged = [{"Key": k, "Value": v} for k, v in {**tags, **new}.items()]
        return self._to_instance({**raw, "Tags": merged, "State": {"Name": "pending"}})

    def pool_return(self, instance_id: str, name: str) -> None:
        raw = self._owned(instance_id)
        if raw is None:
            return
        if _tags(raw).get(TAG_POOL) != POOL_MEMBER:  # re-tagged first: a crash before the stop leaves a member
            new = {**fleet_tags(self.fleet, name, 0, 0), TAG_POOL: POOL_MEMBER, "Name": name}
            self._call("create_tags", Resources=[instance_id], Tags=[{"Key": k, "Value": v} for k, v in new.items()])
            if self.after_return is not None:
                self.after_return(instance_id)
        if raw.get("State", {}).get("Name") in ("pending", "running"):
            self._call("stop_instances", InstanceIds=[instance_id])

    # -- helpers ----------------------------------------------------------------------------------
    def _started(self, raw: dict[str, Any]) -> Instance:
        """A claimed instance, started if a crash left it stopped between its claim and its start."""
        if raw.get("State", {}).get("Name") == "stopped":
            self._call("start_instances", InstanceIds=[raw["InstanceId"]])
            raw = {**raw, "State": {"Name": "pending"}}
        return self._to_instance(raw)

    def _pool_named(self, name: str) -> Instance | None:
        filters = [
            {"Name": f"tag:{TAG_FLEET}", "Values": [self.fleet]},
            {"Name": f"tag:{TAG_SLOT}", "Values": [name]},
            {"Name": f"tag:{TAG_POOL}", "Values": [POOL_MEMBER]},
            {"Name": "instance-state-name", "Values": list(POOL_STATES)},
        ]
        return next(iter(self._describe_raw_pool(filters)), None)

    def _owned(self, instance_id: str) -> dict[str, Any] | None:
        """The instance, if it is there and this fleet's; another fleet's is refused."""
        found = list(self._describe_ids([instance_id]))
        if not found or found[0].get("State", {}).get("Name") in ("shutting-down", "terminated"):
            return None
        if _tags(found[0]).get(TAG_FLEET) != self.fleet:
            raise PermanentError(f"refusing to touch {instance_id}: it does not carry {TAG_FLEET}={self.fleet}")
        return found[0]

    def _describe_raw_pool(self, filters: list[dict[str, Any]]) -> list[Instance]:
        return [self._pool_instance(raw) for raw in self._raw(filters)]

    def _pool_instance(self, raw: dict[str, Any]) -> Instance:
        inst = self._to_instance(raw)
        return replace(inst, state=POOL_STATES.get(raw.get("State", {}).get("Name", ""), "stopping"))

    def _raw(self, filters: list[dict[str, Any]]) -> list[dict[str, Any]]:
        try:
            pages = self.client.get_paginator("describe_instances").paginate(Filters=filters)
            return [i for page in pages for r in page.get("Reservations", []) for i in r.get("Instances", [])]
        except (ClientError, BotoCoreError) as exc:
            raise self._classify(exc) from exc

    def _call(self, op: str, **kwargs: Any) -> None:
        try:
            getattr(self.client, op)(**kwargs)
        except (ClientError, BotoCoreError) as exc:
            err = self._classify(exc)
            if not isinstance(err, NotFoundError):
                raise err from exc


def _tags(raw: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in raw.get("Tags", []) or []}
