"""The Provider contract every fleet backend implements (EC2, local processes, simulation).

Contract (after Ray autoscaler v2's node_provider and Karpenter's CloudProvider):
- Ownership is by tag: a provider lists and terminates only instances tagged with its fleet.
- `launch` is idempotent per (slot, attempt): if an instance of the fleet already carries the slot
  and attempt tags and is pending or running, it is returned instead of launching another; a
  backend with request tokens (EC2's ClientToken) also passes `launch_token(...)` so even a launch
  the listing does not show yet is not repeated. A new attempt of a slot replaces a failed one.
- `terminate` is idempotent: an unknown or already-terminated id is not an error.
- Listing is eventually consistent: a just-launched instance may be missing for a while, so callers
  record launches (store) before relying on a list.
- Errors are data: each ProviderError carries a `kind`, and PROVIDER_ERRORS says what the
  controller does about it (see the table below); code looks the decision up, never an isinstance chain.

The error table. Columns: what happens to the launch attempt's record, when the call is tried again,
and what the operator sees (besides a log line and `igniter_errors_total{kind=...}`):

| kind       | record                 | retry                                   | operator sees                          |
|------------|------------------------|-----------------------------------------|----------------------------------------|
| capacity   | closed (launch_failed) | at once, re-planned without the type,   | tick report `failed`; /v1/fleet        |
|            |                        | which is unavailable for unavailable_s  | `unavailable` (type -> until)          |
| throttled  | kept (intent resumed,  | after a bounded exponential backoff:    | tick report `notes`; /v1/fleet         |
|            | same attempt and token)| launches and terminations wait          | `backoff`                              |
| not_found  | closed (launch_failed) | next tick, as a new attempt (a launch   | tick report `failed`                   |
|            |                        | names a template/AMI/subnet that is     |                                        |
|            |                        | missing; terminate treats it as done)   |                                        |
| auth       | kept                   | after the backoff (credentials or IAM   | tick report `failed`, `notes`;         |
|            |                        | being fixed or propagating)             | /v1/fleet `backoff`; kind=auth         |
| permanent  | closed (launch_failed) | next tick, as a new attempt (a fixed    | tick report `failed`                   |
|            |                        | launch template or policy takes effect) |                                        |

A failed terminate leaves its record as it was and is retried next tick (the instance is an orphan
or still in its closing state), unless the backoff holds it back. See docs/operations.md.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal, Protocol, runtime_checkable

from autoscaler.config.offerings import ON_DEMAND

TAG_FLEET = "igniter:fleet"
TAG_SLOT = "igniter:slot"
TAG_PLAN_GENERATION = "igniter:generation"  # the plan generation an instance was launched under
TAG_ATTEMPT = "igniter:attempt"
TAG_CAPACITY = "igniter:capacity-type"  # on-demand | spot, set at launch
# On a warm-pool member (WarmPool below): `member` from its launch until a scale-out claims it,
# then `claimed` (it carries the slot's tags from then on and is a fleet instance like any other).
TAG_POOL = "igniter:pool"
POOL_MEMBER, POOL_CLAIMED = "member", "claimed"

InstanceState = Literal["pending", "running", "stopping", "stopped", "terminated"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Instance:
    """One fleet instance as the provider sees it. `address` is where its agent is reached.

    Each provider fills in the typed fields from its own records (EC2 from its tags, the local
    provider from instance.json), so generic code never parses a provider's tag strings:
    `attempt` is the launch attempt of the slot; `port_base` and `state_dir` are set by providers
    that run several agents on one host (where its servers' ports start, where its agent keeps its
    state), None meaning the policy's `agents.server_base_port` and `agents.state_dir`."""

    id: str
    instance_type: str
    slot: str
    state: InstanceState
    launched_at: float
    address: str | None = None
    plan_generation: int = 0  # the plan's generation it was launched under (not an assignment's)
    attempt: int = 0
    port_base: int | None = None
    state_dir: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    capacity_type: str = ON_DEMAND  # how it was bought: on-demand or spot


class OnRecord(StrEnum):
    """What an error does to the record it concerns (the table's first column)."""

    CLOSE = "close"  # the launch attempt failed (Reason.LAUNCH_FAILED); a new attempt may follow
    KEEP = "keep"  # the record stays as it is; the intent is resumed by a later tick
    QUARANTINE = "quarantine"  # the node is no longer contacted; reconcile replaces it


class Retry(StrEnum):
    """When the failed call is tried again (the table's second column)."""

    REPLAN = "replan"  # at once, by a re-plan without the instance type (unavailable for a while)
    BACKOFF = "backoff"  # launches and terminations wait, bounded exponential (loop/state/controller_state.py Backoff)
    NEXT_TICK = "next_tick"
    CHANGED = "changed"  # not the same request: only once what would be sent changes
    NEVER = "never"  # never blindly: only once the operator acts or the instance is replaced


@dataclass(frozen=True, slots=True)
class Decision:
    """One row of an error table: what to record, when to retry, what the operator sees."""

    record: OnRecord
    retry: Retry
    metric: str  # the `kind` label of igniter_errors_total
    shows: str  # where the operator sees it besides the log and the metric


class ProviderFault(StrEnum):
    CAPACITY = "capacity"
    THROTTLED = "throttled"
    NOT_FOUND = "not_found"
    AUTH = "auth"
    PERMANENT = "permanent"


PROVIDER_ERRORS: dict[ProviderFault, Decision] = {
    ProviderFault.CAPACITY: Decision(
        OnRecord.CLOSE, Retry.REPLAN, "capacity", "tick report failed; /v1/fleet unavailable"
    ),
    ProviderFault.THROTTLED: Decision(OnRecord.KEEP, Retry.BACKOFF, "provider", "tick report notes; /v1/fleet backoff"),
    ProviderFault.NOT_FOUND: Decision(OnRecord.CLOSE, Retry.NEXT_TICK, "provider", "tick report failed"),
    ProviderFault.AUTH: Decision(OnRecord.KEEP, Retry.BACKOFF, "auth", "tick report failed, notes; /v1/fleet backoff"),
    ProviderFault.PERMANENT: Decision(OnRecord.CLOSE, Retry.NEXT_TICK, "provider", "tick report failed"),
}


class ProviderError(Exception):
    """Base of provider errors; `kind` names its row of PROVIDER_ERRORS (see `decision`)."""

    kind = ProviderFault.PERMANENT

    @property
    def decision(self) -> Decision:
        return PROVIDER_ERRORS[self.kind]


class CapacityError(ProviderError):
    """The offering (type, capacity type) has no capacity: InsufficientInstanceCapacity,
    InstanceLimitExceeded, Unsupported; for spot also MaxSpotInstanceCountExceeded and
    SpotMaxPriceTooLow. Only that offering is unavailable: a type's spot shortage leaves its
    on-demand offering alone, and the other way round."""

    kind = ProviderFault.CAPACITY

    def __init__(self, instance_type: str, message: str, capacity_type: str = ON_DEMAND) -> None:
        where = instance_type if capacity_type == ON_DEMAND else f"{instance_type} ({capacity_type})"
        super().__init__(f"{where}: {message}")
        self.instance_type = instance_type
        self.capacity_type = capacity_type


class ThrottledError(ProviderError):
    kind = ProviderFault.THROTTLED


class NotFoundError(ProviderError):
    kind = ProviderFault.NOT_FOUND


class PermanentError(ProviderError):
    kind = ProviderFault.PERMANENT


class AuthError(PermanentError):
    """The cloud refused our credentials (AuthFailure, UnauthorizedOperation, expired tokens)."""

    kind = ProviderFault.AUTH


class Provider(Protocol):
    """Launch, list and terminate the instances of one fleet. See the module docstring."""

    def list_instances(self) -> list[Instance]:
        """Every non-terminated instance carrying this fleet's tag."""
        ...

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
        """Start an instance for `slot` (idempotent: returns the existing one if present), bought
        on-demand or as spot (`capacity_type`; a backend without spot treats both alike).

        `salt` is the state file's random epoch, for a backend whose tokens must differ between
        state files; EC2 leaves it out, so two leaders' launches of one slot and attempt are one."""
        ...

    def terminate(self, instance_id: str) -> None:
        """Stop and release an instance of this fleet (idempotent)."""
        ...

    def close(self) -> None:
        """Release what the provider itself holds (never the instances: they outlive the
        autoscaler). Called once when the service stops."""
        ...


@runtime_checkable
class BatchTerminate(Protocol):
    """Optional provider capability: terminate many instances in few calls (EC2's
    TerminateInstances takes up to 1,000 ids). The same guarantees as `terminate` for each id;
    the answer holds the error of each id that was not terminated (an id missing from it is
    gone or going). A provider without it is called once per id (`terminate_many` below)."""

    def terminate_many(self, instance_ids: Sequence[str]) -> dict[str, ProviderError]: ...


def terminate_many(provider: Provider, instance_ids: Sequence[str]) -> dict[str, ProviderError]:
    """Terminate each id, in as few calls as the provider allows; the error of each that failed.
    One at a time, a failure that says back off (throttled, unauthorised) is not followed by
    more calls this round: the ids after it carry the same error and are tried again next tick."""
    if isinstance(provider, BatchTerminate):
        return provider.terminate_many(instance_ids)
    failed: dict[str, ProviderError] = {}
    for n, instance_id in enumerate(instance_ids):
        try:
            provider.terminate(instance_id)
        except ProviderError as exc:
            failed[instance_id] = exc
            if exc.decision.retry is Retry.BACKOFF:
                failed.update({later: exc for later in instance_ids[n + 1 :]})
                break
    return failed


@runtime_checkable
class HostKeySource(Protocol):
    """Optional provider capability: an instance's SSH host public keys, learnt through the cloud
    API rather than from the network, so the transport can pin them before its first connection
    (a key offered by the host itself would be trust on first use). EC2 implements it by reading
    the keys cloud-init prints to the console; the local provider needs none.

    `host_keys` returns OpenSSH public key lines ("ssh-ed25519 AAAA..."), or None while the
    instance has not published them yet (ask again on a later tick). An empty list is a final
    answer: the instance published its keys, and none of them was usable."""

    def host_keys(self, instance: Instance) -> list[str] | None: ...


@runtime_checkable
class WarmPool(Protocol):
    """Optional provider capability: a warm pool of stopped, initialised instances (EC2 Auto
    Scaling's warm pool). Members carry the fleet tag and TAG_POOL=member; `list_instances` never
    shows them (they are no slot's), `pool_members` does: pending or running while they warm up,
    stopping, then stopped. Each call is idempotent and tag-owned like `launch`:

    - `pool_launch(name, type)` launches the member `name` (a request token derived from it: the
      same name twice, e.g. re-sent after a crash, is one instance);
    - `pool_stop(id)` stops a member once initialised (a stopped or stopping one: nothing to do);
    - `start_pooled(member_id, slot, ...)` claims the member for (slot, attempt) -- its tags first,
      then StartInstances -- and returns it as a fleet instance. An instance already claimed for
      (slot, attempt) is returned (started if a crash left it stopped), so a repeated call never
      starts a second one; a member that is gone or no longer stopped falls back to `launch`;
    - `pool_return(id, name)` takes a retiring fleet instance into the pool instead of terminating
      it (EC2 Auto Scaling's ReuseOnScaleIn): re-tagged as member `name` (CreateTags), then
      stopped. Again on a member already: only the stop, which is a no-op once stopping.
    Termination of a member is `terminate`, as for any fleet instance."""

    def pool_members(self) -> list[Instance]: ...

    def pool_launch(self, name: str, instance_type: str) -> Instance: ...

    def pool_stop(self, instance_id: str) -> None: ...

    def start_pooled(
        self, member_id: str, slot: str, instance_type: str, plan_generation: int, *, attempt: int = 0
    ) -> Instance: ...

    def pool_return(self, instance_id: str, name: str) -> None: ...


@dataclass(frozen=True, slots=True)
class Claim:
    """One `start_pooled` call's arguments, for `start_pooled_many`."""

    member_id: str
    slot: str
    instance_type: str
    plan_generation: int
    attempt: int = 0


@runtime_checkable
class BatchPool(Protocol):
    """Optional warm pool capability: many stops, returns and starts in few calls (EC2's
    StopInstances, StartInstances and CreateTags take up to 1,000 ids). Each with `pool_stop`'s,
    `pool_return`'s and `start_pooled`'s guarantees; the answer holds each one's error (starts:
    each claim's instance or error, in order). Without it: once each (below)."""

    def pool_stop_many(self, instance_ids: Sequence[str]) -> dict[str, ProviderError]: ...

    def pool_return_many(self, returns: Mapping[str, str]) -> dict[str, ProviderError]: ...

    def start_pooled_many(self, claims: Sequence[Claim]) -> list[Instance | ProviderError]: ...


def pool_stop_many(pool: WarmPool, instance_ids: Sequence[str]) -> dict[str, ProviderError]:
    """Stop each member, in as few calls as the pool allows; the error of each that failed."""
    if isinstance(pool, BatchPool):
        return pool.pool_stop_many(instance_ids)
    return _each(instance_ids, pool.pool_stop)


def pool_return_many(pool: WarmPool, returns: Mapping[str, str]) -> dict[str, ProviderError]:
    """Return each instance (id -> member name) to the pool, in as few calls as the pool allows."""
    if isinstance(pool, BatchPool):
        return pool.pool_return_many(returns)
    return _each(list(returns), lambda iid: pool.pool_return(iid, returns[iid]))


def start_pooled_many(pool: WarmPool, claims: Sequence[Claim]) -> list[Instance | ProviderError]:
    """Each claim's `start_pooled`, in as few calls as the pool allows; its instance or error."""
    if isinstance(pool, BatchPool):
        return pool.start_pooled_many(claims)
    out: list[Instance | ProviderError] = []
    for c in claims:
        try:
            out.append(pool.start_pooled(c.member_id, c.slot, c.instance_type, c.plan_generation, attempt=c.attempt))
        except ProviderError as exc:
            out.append(exc)
    return out


def _each(instance_ids: Sequence[str], call: Callable[[str], None]) -> dict[str, ProviderError]:
    """One call per id; after a failure that says back off, the ids left carry its error."""
    failed: dict[str, ProviderError] = {}
    for n, instance_id in enumerate(instance_ids):
        try:
            call(instance_id)
        except ProviderError as exc:
            failed[instance_id] = exc
            if exc.decision.retry is Retry.BACKOFF:
                failed.update(dict.fromkeys(instance_ids[n + 1 :], exc))
                break
    return failed


def pool_of(provider: object) -> WarmPool | None:
    """The provider's warm pool capability (looked for behind a wrapper such as the fence's), or None."""
    inner = getattr(provider, "inner", provider)
    return provider if isinstance(inner, WarmPool) else None  # type: ignore[return-value]


NoticeKind = Literal["interruption", "rebalance", "state_change", "scheduled_change", "ignored", "malformed"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Notice:
    """One message from the interruption queue, parsed: what the cloud says will happen to which
    instances. `ignored` (an event that needs nothing, e.g. a state change to running) and
    `malformed` (not an event we can read) carry no instances; every notice is deleted once the
    tick has handled it (`token` identifies the message to the source)."""

    kind: NoticeKind
    instance_ids: tuple[str, ...] = ()
    at: float = 0.0  # when the event happened (epoch seconds; 0 if the message did not say)
    deadline: float | None = None  # when the instance goes (interruption: event + 2 min; scheduled start)
    detail: str = ""
    token: str = ""


class InterruptionSource(Protocol):
    """Where interruption and maintenance notices arrive (EC2: an SQS queue that EventBridge feeds).

    `receive` returns what has arrived since the last call (never raises: a source that fails
    logs it and returns nothing this tick); `done` deletes the messages of handled notices, so a
    crash between the two only means the next tick sees them again (handling is idempotent).
    `poll`, called between ticks, says whether a notice naming instances has arrived; what it
    saw is kept for the next `receive` (the service then ticks at once)."""

    def receive(self) -> list[Notice]: ...

    def poll(self) -> bool: ...

    def done(self, notices: Sequence[Notice]) -> None: ...


def launch_token(fleet: str, slot: str, attempt: int, salt: str = "") -> str:
    """A request token derived from fleet, slot, attempt (and the state's epoch): a retried or
    repeated launch of the same attempt carries the same token, a replacement a new one.
    64 ASCII characters at most (EC2's ClientToken limit)."""
    digest = hashlib.sha256(f"{fleet}/{slot}/{attempt}/{salt}".encode()).hexdigest()[:24]
    return f"igniter-{digest}"


def tag_int(tags: dict[str, str], key: str) -> int:
    """An integer tag (plan generation, attempt); a missing or mangled one reads as 0."""
    try:
        return int(tags.get(key, "0"))
    except ValueError:
        return 0


def fleet_tags(
    fleet: str, slot: str, plan_generation: int, attempt: int, capacity_type: str = ON_DEMAND
) -> dict[str, str]:
    return {
        TAG_FLEET: fleet,
        TAG_SLOT: slot,
        TAG_PLAN_GENERATION: str(plan_generation),
        TAG_ATTEMPT: str(attempt),
        TAG_CAPACITY: capacity_type,
    }
