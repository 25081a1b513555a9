"""Instance lifecycle: a transition table with a reason on every edge (after Ray's instance_manager).

Pure. A `Record` is the autoscaler's own account of one launch attempt of a slot; the store keeps
records and every transition in a history table. `sync` turns what the provider lists into
transitions (booted, adopted after a crash, vanished), so the only way a record changes state is
through an edge of `TRANSITIONS`, each named by its reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from autoscaler.config.offerings import ON_DEMAND, offering_key
from autoscaler.fleet.base import Instance, Notice


class State(StrEnum):
    NEW = "new"  # pseudo-state: no record yet
    REQUESTED = "requested"  # launch intent written; the provider call may or may not have happened
    PENDING = "pending"  # the provider knows the instance; not running yet
    RUNNING = "running"  # running; its agent has not answered yet
    READY = "ready"  # its agent answers (or agents are not contacted): can take servers
    DRAINING = "draining"  # servers told to stop before termination
    GOING_AWAY = "going_away"  # the cloud will take it (spot interruption, retirement): replaced, then let go
    TERMINATING = "terminating"  # terminate called; waiting for the provider to drop it
    FAILED = "failed"  # launch refused; nothing to keep
    TERMINATED = "terminated"  # gone for good (kept for history)


class Reason(StrEnum):
    REQUEST = "request"  # the plan needs the slot: intent recorded before launching
    LAUNCHED = "launched"  # the provider returned an instance id
    ADOPTED = "adopted"  # found by its slot tag: launched before a crash, never recorded
    DISCOVERED = "discovered"  # found by the fleet tag with no record at all (state lost)
    LAUNCH_FAILED = "launch_failed"  # capacity or configuration error from the provider
    BOOTED = "booted"  # the provider reports it running
    AGENT_READY = "agent_ready"  # its agent answered a status call
    READY_TIMEOUT = "ready_timeout"  # not ready within the provider's ready timeout: replaced
    AGENT_LOST = "agent_lost"  # a ready instance's agent has not answered for as long: replaced
    DRAIN = "drain"  # surplus: its servers are stopped first
    SCALE_IN = "scale_in"  # surplus and drained: terminate
    DUPLICATE = "duplicate"  # an older attempt of a slot that has a newer one
    RELEASE = "release"  # a failed launch attempt is closed
    VANISHED = "vanished"  # the provider no longer lists it (terminated outside us)
    GONE = "gone"  # terminate confirmed by the provider's listing
    INTERRUPTION = "interruption"  # EC2 Spot Instance Interruption Warning: reclaimed in about 2 minutes
    REBALANCE = "rebalance"  # EC2 Instance Rebalance Recommendation: elevated risk of interruption
    STATE_CHANGE = "state_change"  # EC2 Instance State-change Notification: stopping, shutting down, ...
    SCHEDULED_CHANGE = "scheduled_change"  # AWS Health scheduled change (retirement, maintenance)
    LET_GO = "let_go"  # going away and its replacement serves (or it serves nothing): terminate it
    SUPERSEDED = "superseded"  # adopted beside a newer attempt of its slot (core/fleet/adopt.py): let go once drained


S, R = State, Reason
TRANSITIONS: dict[tuple[State, Reason], State] = {
    (S.NEW, R.REQUEST): S.REQUESTED,
    (S.NEW, R.DISCOVERED): S.PENDING,
    (S.REQUESTED, R.REQUEST): S.REQUESTED,
    (S.REQUESTED, R.LAUNCHED): S.PENDING,
    (S.REQUESTED, R.ADOPTED): S.PENDING,
    (S.REQUESTED, R.LAUNCH_FAILED): S.FAILED,
    (S.REQUESTED, R.SCALE_IN): S.TERMINATED,
    (S.PENDING, R.BOOTED): S.RUNNING,
    (S.RUNNING, R.AGENT_READY): S.READY,
    (S.PENDING, R.READY_TIMEOUT): S.TERMINATING,
    (S.RUNNING, R.READY_TIMEOUT): S.TERMINATING,
    (S.READY, R.AGENT_LOST): S.TERMINATING,
    (S.READY, R.DRAIN): S.DRAINING,
    (S.PENDING, R.SCALE_IN): S.TERMINATING,
    (S.RUNNING, R.SCALE_IN): S.TERMINATING,
    (S.READY, R.SCALE_IN): S.TERMINATING,
    (S.DRAINING, R.SCALE_IN): S.TERMINATING,
    (S.FAILED, R.RELEASE): S.TERMINATED,
    (S.PENDING, R.VANISHED): S.TERMINATED,
    (S.RUNNING, R.VANISHED): S.TERMINATED,
    (S.READY, R.VANISHED): S.TERMINATED,
    (S.DRAINING, R.VANISHED): S.TERMINATED,
    (S.TERMINATING, R.GONE): S.TERMINATED,
    (S.GOING_AWAY, R.LET_GO): S.TERMINATING,
    (S.READY, R.SUPERSEDED): S.GOING_AWAY,
    (S.GOING_AWAY, R.VANISHED): S.TERMINATED,
}
GOING_AWAY_REASONS = (R.INTERRUPTION, R.REBALANCE, R.STATE_CHANGE, R.SCHEDULED_CHANGE)
for _st in (S.PENDING, S.RUNNING, S.READY):
    for _r in GOING_AWAY_REASONS:
        TRANSITIONS[(_st, _r)] = S.GOING_AWAY
for _st in (S.REQUESTED, S.PENDING, S.RUNNING, S.READY, S.DRAINING):
    TRANSITIONS[(_st, R.DUPLICATE)] = S.TERMINATED if _st is S.REQUESTED else S.TERMINATING

BOOTING = frozenset({S.REQUESTED, S.PENDING, S.RUNNING})  # launched, not ready: its agent runs nothing yet
USABLE = BOOTING | {S.READY}  # may carry the slot's servers
LIVE = USABLE | {S.DRAINING, S.GOING_AWAY}  # an instance we still own (and pay for)
OPEN = LIVE | {S.TERMINATING, S.FAILED}  # not yet closed


class InvalidTransition(ValueError):
    """An edge not in TRANSITIONS: a bug in the caller, never a user error."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Record:
    """One launch attempt of a slot, as the autoscaler accounts for it."""

    slot: str
    attempt: int
    instance_type: str
    state: State
    created_at: float
    updated_at: float
    instance_id: str | None = None
    plan_generation: int = 0  # the plan's generation it was launched under
    capacity_type: str = ON_DEMAND  # on-demand or spot: the offering it was launched from
    leaves_at: float | None = None  # GOING_AWAY: when the cloud takes it (None: no deadline, e.g. rebalance)

    @property
    def key(self) -> tuple[str, int]:
        return (self.slot, self.attempt)

    @property
    def offering(self) -> str:
        """The (type, capacity type) it was bought as, as planner.types.offering_key names it."""
        return offering_key(self.instance_type, self.capacity_type)


@dataclass(frozen=True, slots=True)
class Change:
    """A transition to persist: the record after it, the state before, and why."""

    record: Record
    before: State
    reason: Reason
    detail: str = ""


def transition(record: Record, reason: Reason, now: float, detail: str = "", **fields: Any) -> Change:
    """Move `record` along the edge named by `reason`; raise InvalidTransition if there is none."""
    target = TRANSITIONS.get((record.state, reason))
    if target is None:
        raise InvalidTransition(f"{record.slot}#{record.attempt}: no edge {record.state} --{reason}-->")
    return Change(replace(record, state=target, updated_at=now, **fields), record.state, reason, detail)


def new_record(
    slot: str, attempt: int, instance_type: str, now: float, plan_generation: int = 0, capacity_type: str = ON_DEMAND
) -> Record:
    """A record in the NEW pseudo-state, to be moved by REQUEST or DISCOVERED."""
    return Record(
        slot=slot,
        attempt=attempt,
        instance_type=instance_type,
        state=S.NEW,
        created_at=now,
        updated_at=now,
        instance_id=None,
        plan_generation=plan_generation,
        capacity_type=capacity_type,
    )


@dataclass(frozen=True, slots=True)
class SyncInput:
    records: Sequence[Record]  # open records
    instances: Sequence[Instance]  # what the provider lists now
    closed_keys: frozenset[tuple[str, int]]  # (slot, attempt) of terminated records, of `unclaimed` at least
    agents_ok: frozenset[str]  # slots whose agent answered this tick
    contact: bool  # False: agents are not contacted, running means ready
    pending_grace_s: float = 120.0  # eventual consistency: how long a pending id may be unlisted


def unclaimed(instances: Iterable[Instance], records: Iterable[Record]) -> set[tuple[str, int]]:
    """(slot, attempt) of the listed fleet instances that no open record names: the only keys
    whose closed record sync and adoptable ask about (SyncInput.closed_keys)."""
    open_keys = {r.key for r in records}
    return {(i.slot, i.attempt) for i in instances if i.slot and (i.slot, i.attempt) not in open_keys}


def sync(inp: SyncInput, now: float) -> tuple[list[Change], list[Instance]]:
    """Transitions implied by the provider's listing, and orphans: fleet instances listed as pending
    or running that no live record claims (closed attempts, or a terminate that never reached the
    provider because of a crash); the caller terminates orphans again, which is idempotent."""
    listed = {i.id: i for i in inp.instances if i.state in ("pending", "running")}
    by_key = {(i.slot, i.attempt): i for i in listed.values()}
    changes: list[Change] = []
    for rec in inp.records:
        changes.extend(_sync_record(rec, listed, by_key, inp, now))
    known = {r.instance_id for r in inp.records} | {c.record.instance_id for c in changes}
    changes.extend(_discover(listed.values(), known, {r.key for r in inp.records}, inp.closed_keys, now))
    latest = {c.record.key: c.record for c in changes}
    final = [latest.get(r.key, r) for r in inp.records] + [c.record for c in changes if c.before is S.NEW]
    claimed = {r.instance_id for r in final if r.state in LIVE}
    orphans = [i for i in listed.values() if i.id not in claimed]
    return changes, orphans


def _sync_record(
    rec: Record, listed: Mapping[str, Instance], by_key: Mapping[tuple[str, int], Instance], inp: SyncInput, now: float
) -> list[Change]:
    """Walk one record forward as far as the observation allows."""
    out: list[Change] = []
    if rec.state is S.REQUESTED and rec.key in by_key:
        found = by_key[rec.key]
        out.append(transition(rec, R.ADOPTED, now, f"found {found.id} by slot tag", instance_id=found.id))
        rec = out[-1].record
    inst = listed.get(rec.instance_id or "")
    if rec.instance_id is None or rec.state in (S.FAILED, S.TERMINATED):
        return out
    if inst is None:
        out.extend(_missing(rec, inp, now))
        return out
    if rec.state is S.PENDING and inst.state == "running":
        out.append(transition(rec, R.BOOTED, now))
        rec = out[-1].record
    if rec.state is S.RUNNING and (not inp.contact or rec.slot in inp.agents_ok):
        out.append(transition(rec, R.AGENT_READY, now, "" if inp.contact else "agents not contacted"))
    return out


def _missing(rec: Record, inp: SyncInput, now: float) -> list[Change]:
    if rec.state is S.TERMINATING:
        return [transition(rec, R.GONE, now)]
    if rec.state is S.PENDING and now - rec.updated_at < inp.pending_grace_s:
        return []  # a fresh launch may not be listed yet
    return [transition(rec, R.VANISHED, now, f"{rec.instance_id} no longer listed")]


def _discover(
    instances: Iterable[Instance],
    known: set[str | None],
    open_keys: set[tuple[str, int]],
    closed: frozenset[tuple[str, int]],
    now: float,
) -> list[Change]:
    """Records for fleet instances we have no account of (the state file was lost)."""
    out: list[Change] = []
    for inst in sorted(instances, key=lambda i: (i.slot, i.id)):
        key = (inst.slot, inst.attempt)
        if inst.id in known or key in open_keys or key in closed or not inst.slot:
            continue
        rec = new_record(inst.slot, key[1], inst.instance_type, now, inst.plan_generation, inst.capacity_type)
        out.append(transition(rec, R.DISCOVERED, now, f"{inst.id} carries the fleet tag", instance_id=inst.id))
        open_keys.add(key)
        if inst.state == "running":
            out.append(transition(out[-1].record, R.BOOTED, now))
    return out


NOTICE_REASONS: dict[str, Reason] = {
    "interruption": R.INTERRUPTION,
    "rebalance": R.REBALANCE,
    "state_change": R.STATE_CHANGE,
    "scheduled_change": R.SCHEDULED_CHANGE,
}


# How soon the cloud takes an instance after a notice that carries no deadline of its own: a spot
# warning gives two minutes; a stopping or shutting-down instance is going now. A rebalance
# recommendation sets no deadline (the instance may live on for hours).
TAKEN_AFTER_S: dict[str, float] = {"interruption": 120.0, "state_change": 0.0}


def leaves_at(notice: Notice, now: float) -> float | None:
    """When the instance a notice names is taken: its deadline, else the kind's usual delay."""
    if notice.deadline is not None:
        return notice.deadline
    after = TAKEN_AFTER_S.get(notice.kind)
    return None if after is None else now + after


def going_away(records: Sequence[Record], notices: Sequence[Notice], now: float) -> list[Change]:
    """GOING_AWAY transitions for the records the notices name (by instance id), each with when
    the cloud takes it (`leaves_at`). A notice for an instance we do not own, or one already
    going, draining or terminating, changes nothing."""
    by_id = {r.instance_id: r for r in records if r.instance_id and r.state in (S.PENDING, S.RUNNING, S.READY)}
    out: list[Change] = []
    for n in notices:
        reason = NOTICE_REASONS.get(n.kind)
        if reason is None:
            continue
        for iid in n.instance_ids:
            rec = by_id.pop(iid, None)
            if rec is not None:
                when = f"; goes at {n.deadline:.0f}" if n.deadline is not None else ""
                out.append(transition(rec, reason, now, f"{n.detail}{when}", leaves_at=leaves_at(n, now)))
    return out


def describe_table() -> list[tuple[str, str, str]]:
    """(from, reason, to) rows, for documentation and the /v1/fleet endpoint."""
    return [(a.value, r.value, b.value) for (a, r), b in TRANSITIONS.items()]
