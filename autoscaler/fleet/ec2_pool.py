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

At fleet size the stops, returns and starts of a tick go in batches (fleet/base.py BatchPool): one
DescribeInstances per DESCRIBE_IDS ids for ownership, CreateTags per distinct tag set (a claim's
and a return's name their own slot: one each) and StopInstances or StartInstances with up to
1,000 ids a request (fleet/ec2_batch.py), each one's failure as data. All tags of a batch are
written before any stop or start, so a crash between leaves what it left one at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from autoscaler.config.offerings import ON_DEMAND
from autoscaler.fleet.base import (
    POOL_CLAIMED,
    POOL_MEMBER,
    TAG_ATTEMPT,
    TAG_FLEET,
    TAG_POOL,
    TAG_SLOT,
    Claim,
    Instance,
    InstanceState,
    NotFoundError,
    PermanentError,
    ProviderError,
    fleet_tags,
    launch_token,
    tag_int,
)
from autoscaler.fleet.ec2_batch import each_id, tag_many

DESCRIBE_IDS = 200  # values per DescribeInstances filter (EC2's limit)
RUNNING = ("pending", "running")

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
        """The members as the tick's listing found them (list_instances), while no request has
        changed anything since; else a DescribeInstances of their own (after a launch, a claim or
        a return: its outcome must show)."""
        held = self._held()
        if held is not None:
            found = (r for r in held.values() if _tags(r).get(TAG_POOL) == POOL_MEMBER and _state(r) in POOL_STATES)
            return sorted((self._pool_instance(r) for r in found), key=lambda i: i.id)
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
        err = self.pool_stop_many([instance_id]).get(instance_id)
        if err is not None:
            raise err

    def pool_stop_many(self, instance_ids: Sequence[str]) -> dict[str, ProviderError]:
        """pool_stop for each id: ownership in batches, then StopInstances with many ids a request."""
        found, failed = self._owned_many(instance_ids)
        running = [iid for iid, raw in found.items() if _state(raw) in RUNNING]
        failed.update(_but_gone(each_id(self._ids_call("stop_instances"), running, self._classify)))
        return failed

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

    def start_pooled_many(self, claims: Sequence[Claim]) -> list[Instance | ProviderError]:
        """start_pooled for each claim, in batches: the attempts' instances found 200 slots a
        DescribeInstances, the members' ownership 200 ids a request, each claim's tags (its own
        slot: a CreateTags each), then one StartInstances per 1,000 members. A claim whose member
        is gone or no longer stopped falls back to `launch`, one at a time."""
        out: dict[int, Instance | ProviderError] = {}
        found = self._found_many(claims)
        starting: dict[int, tuple[dict[str, Any], dict[str, str]]] = {}  # claim -> (member, tags written)
        todo = []
        for n, c in enumerate(claims):
            raw = found.get((c.slot, c.attempt))
            if raw is None:
                todo.append(n)
            elif _state(raw) == "stopped":  # claimed before a crash, not started
                starting[n] = (raw, {})
            else:
                out[n] = self._to_instance(raw)
        members, failed = self._owned_many([claims[n].member_id for n in todo])
        fallback, claimed = [], {}
        for n in todo:
            c, raw = claims[n], members.pop(claims[n].member_id, None)
            if c.member_id in failed:
                out[n] = failed[c.member_id]
            elif raw is None or _tags(raw).get(TAG_POOL) != POOL_MEMBER or _state(raw) != "stopped":
                fallback.append(n)  # gone, taken, or not stopped (or asked twice): a launch
            else:
                new = {**fleet_tags(self.fleet, c.slot, c.plan_generation, c.attempt), TAG_POOL: POOL_CLAIMED}
                claimed[n] = (raw, {**new, "Name": c.slot})
        untagged = tag_many(self._tags_call, {claims[n].member_id: t for n, (_, t) in claimed.items()}, self._classify)
        for n, (raw, tags) in claimed.items():
            if claims[n].member_id in untagged:
                out[n] = untagged[claims[n].member_id]
                continue
            if self.after_claim is not None:
                self.after_claim(claims[n].member_id)
            starting[n] = (raw, tags)
        ids = [raw["InstanceId"] for raw, _ in starting.values()]
        unstarted = _but_gone(each_id(self._ids_call("start_instances"), ids, self._classify))
        for n, (raw, tags) in starting.items():
            merged = [{"Key": k, "Value": v} for k, v in {**_tags(raw), **tags}.items()]
            err = unstarted.get(raw["InstanceId"])
            out[n] = err or self._to_instance({**raw, "Tags": merged, "State": {"Name": "pending"}})
        for n in fallback:
            c = claims[n]
            try:
                out[n] = self.launch(c.slot, c.instance_type, c.plan_generation, attempt=c.attempt)
            except ProviderError as exc:
                out[n] = exc
        return [out[n] for n in range(len(claims))]

    def pool_return(self, instance_id: str, name: str) -> None:
        err = self.pool_return_many({instance_id: name}).get(instance_id)
        if err is not None:
            raise err

    def pool_return_many(self, returns: Mapping[str, str]) -> dict[str, ProviderError]:
        """pool_return for each id (-> its member name): all re-tagged first (CreateTags per
        distinct tag set), so a crash before the stops leaves members; then StopInstances in
        batches for the ids whose tags were written. A gone instance needs nothing."""
        found, failed = self._owned_many(list(returns))
        retag = {
            iid: {**fleet_tags(self.fleet, returns[iid], 0, 0), TAG_POOL: POOL_MEMBER, "Name": returns[iid]}
            for iid, raw in found.items()
            if _tags(raw).get(TAG_POOL) != POOL_MEMBER
        }
        untagged = tag_many(self._tags_call, retag, self._classify)
        failed.update(_but_gone(untagged))
        for iid in retag:
            if iid not in untagged and self.after_return is not None:
                self.after_return(iid)
        running = [iid for iid, raw in found.items() if iid not in untagged and _state(raw) in RUNNING]
        failed.update(_but_gone(each_id(self._ids_call("stop_instances"), running, self._classify)))
        return failed

    # -- the tick's listing ---------------------------------------------------------------------------
    _changes = 0  # requests made that may have changed instances (_changed)
    _listing: tuple[int, dict[str, dict[str, Any]]] | None = None  # (_changes then, the listing by id)

    def _watch_changes(self) -> None:
        events = getattr(getattr(self.client, "meta", None), "events", None)
        if events is not None:
            events.register("before-call.ec2", self._changed)

    def _changed(self, model: Any, **_: Any) -> None:
        """Before each request: one that is no read (Describe*, Get*) may change what the last
        listing says (a launch, a stop, a claim, a return), so it is not served again."""
        if not model.name.startswith(("Describe", "Get")):
            self._changes += 1

    def _hold(self, before: int, raw: list[dict[str, Any]]) -> None:
        """Keep list_instances' answer: every instance of the fleet's tag not gone, members too."""
        self._listing = (before, {r["InstanceId"]: r for r in raw})

    def _held(self) -> dict[str, dict[str, Any]] | None:
        """The last listing, while no request has been made since that could change it."""
        listing = self._listing
        return listing[1] if listing is not None and listing[0] == self._changes else None

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

    def _owned_many(self, instance_ids: Sequence[str]) -> tuple[dict[str, dict[str, Any]], dict[str, ProviderError]]:
        """The ids that are there (not shutting down or terminated) and this fleet's, as the tick's
        listing holds them (_held) or else described DESCRIBE_IDS a request; another fleet's is
        refused, a describe that failed is each id's."""
        ids = list(dict.fromkeys(instance_ids))
        held = self._held() or {}  # listed by the fleet's tag, nothing changed since: ours, as they are
        seen: dict[str, dict[str, Any]] = {iid: held[iid] for iid in ids if iid in held}
        failed: dict[str, ProviderError] = {}
        unlisted = [iid for iid in ids if iid not in seen]
        for n in range(0, len(unlisted), DESCRIBE_IDS):
            chunk = unlisted[n : n + DESCRIBE_IDS]
            try:
                seen.update({r["InstanceId"]: r for r in self._raw([{"Name": "instance-id", "Values": chunk}])})
            except ProviderError as exc:
                failed.update(dict.fromkeys(chunk, exc))
        found: dict[str, dict[str, Any]] = {}
        for iid in ids:
            raw = seen.get(iid)
            if raw is None or _state(raw) in ("shutting-down", "terminated"):
                continue
            if _tags(raw).get(TAG_FLEET) != self.fleet:
                failed[iid] = PermanentError(f"refusing to touch {iid}: it does not carry {TAG_FLEET}={self.fleet}")
            else:
                found[iid] = raw
        return found, failed

    def _found_many(self, claims: Sequence[Claim]) -> dict[tuple[str, int], dict[str, Any]]:
        """Each claim's (slot, attempt) instance as `_find` picks it (pending or running, or
        claimed and stopped), described DESCRIBE_IDS slots a request."""
        wanted = {(c.slot, c.attempt) for c in claims}
        slots = sorted({c.slot for c in claims})
        found: dict[tuple[str, int], dict[str, Any]] = {}
        for n in range(0, len(slots), DESCRIBE_IDS):
            filters = [
                {"Name": f"tag:{TAG_FLEET}", "Values": [self.fleet]},
                {"Name": f"tag:{TAG_SLOT}", "Values": slots[n : n + DESCRIBE_IDS]},
                {"Name": "instance-state-name", "Values": ["pending", "running", "stopped"]},
            ]
            for raw in self._raw(filters):
                tags = _tags(raw)
                key = (tags.get(TAG_SLOT, ""), tag_int(tags, TAG_ATTEMPT))
                if key not in wanted or (key in found and _state(found[key]) != "stopped"):
                    continue
                if _state(raw) != "stopped" or tags.get(TAG_POOL) == POOL_CLAIMED:
                    found[key] = raw
        return found

    def _ids_call(self, op: str) -> Callable[[list[str]], object]:
        return lambda ids: getattr(self.client, op)(InstanceIds=ids)

    def _tags_call(self, ids: list[str], tags: list[dict[str, str]]) -> object:
        return self.client.create_tags(Resources=ids, Tags=tags)

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


def _state(raw: dict[str, Any]) -> str:
    return str(raw.get("State", {}).get("Name", ""))


def _but_gone(failed: dict[str, ProviderError]) -> dict[str, ProviderError]:
    """The failures that matter to a stop, a re-tag or a termination: an instance that is gone
    (NotFound) needs none of them."""
    return {iid: e for iid, e in failed.items() if not isinstance(e, NotFoundError)}
