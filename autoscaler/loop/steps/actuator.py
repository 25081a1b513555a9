"""The act step: carry out reconcile's actions, intent first.

Every action writes its intent to the store (an action row in `started`, the lifecycle transition
that it is about to cause) and commits before the provider or an agent is called, then writes the
outcome. A crash in between leaves an intent that the next tick resumes idempotently.

Failures follow the error tables of the contracts (fleet/base.py, transport/base.py): the
decision is looked up, then applied to the record and to the controller's state. The first error
whose decision is a re-plan (no capacity) stops the round: the controller marks the type
unavailable and re-plans at once. (A run of launches goes out together where the provider allows
it, after its first went alone: a refusal among the others ends the round once all their outcomes
are written.) While the provider backs off (throttled, unauthorised),
launches and terminations wait; a node whose host key or SSH login failed is quarantined and
never contacted again; an assignment an agent rejected is not re-sent until it changes.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from autoscaler.core.fleet.lifecycle import OPEN, Change, Reason, Record, State, transition
from autoscaler.core.layout.assignment import assignment_json
from autoscaler.core.layout.layout_types import PlannedServer
from autoscaler.core.rollout.reconcile import Action, Configure, Drain, Launch, Terminate
from autoscaler.fleet.base import (
    Instance,
    OnRecord,
    Provider,
    ProviderError,
    Retry,
    pool_of,
    pool_return_many,
    terminate_many,
)
from autoscaler.loop.state.controller_state import ControllerState, Quarantine
from autoscaler.loop.state.store import Store
from autoscaler.loop.steps import faults
from autoscaler.loop.steps.launches import Launches
from autoscaler.loop.steps.outcome import Outcome as Outcome  # re-exported: the tick imports it from here
from autoscaler.transport.base import Transport, TransportError
from autoscaler.transport.bounded import call_all

log = logging.getLogger(__name__)


@dataclass(kw_only=True)
class Actuator(Launches):
    store: Store
    provider: Provider
    transport: Transport
    instances: Mapping[str, Instance]  # listed instances by id
    assignment_generation: Mapping[str, int]  # slot -> the assignment generation its agent reports
    default_port_base: int
    state: ControllerState  # read for the plan generation, backoff, quarantine; updated by failures
    tick: int | None
    clock: Callable[[], float]
    outcome: Outcome = field(default_factory=Outcome)
    host_override: str | None = None  # agents.host_override: where this machine reaches the instances
    max_concurrency: int = 1  # agents.max_concurrency: applies in flight at once
    deadline_s: float = 40.0  # one apply's deadline (transport/bounded.py agent_deadline_s)
    answered: frozenset[str] | None = None  # slots whose agent answered this tick's status (None: not asked)
    _applies: list[_Apply] = field(default_factory=list)  # gathered, not sent yet
    _terminations: list[_Termination] = field(default_factory=list)
    _launches: list[Launch] = field(default_factory=list)  # a run of launches, not sent yet
    _starts: list[Launch] = field(default_factory=list)  # a run of warm starts, not sent yet
    _records: dict[str, dict[int, Record]] | None = None  # the round's open records (_open)

    def host(self, inst: Instance) -> str:
        """The address an instance's servers bind and the gateway reaches them at: the instance's
        own (private) address, loopback for local instances."""
        return self.host_override or inst.address or "127.0.0.1"

    def run(self, actions: tuple[Action, ...]) -> Outcome:
        """Each action in order. Agent applies are made together (a bounded pool), terminations
        together (one provider call for many ids) and launches together (a bounded pool, where
        the provider allows it): a run of them is gathered and sent when an action of another
        kind comes, or at the end; intents are written in order, each before its call."""
        handlers = {Launch: self.launch, Configure: self.configure, Drain: self.drain, Terminate: self.terminate}
        faults.point("slow_act")
        for action in actions:
            self._flush_unless(action)
            if self.outcome.capacity:
                break
            handlers[type(action)](action)  # type: ignore[operator]
            if self.outcome.capacity:
                break
        if not self.outcome.capacity:
            self._flush_launches()
            self._flush_starts()
        self._undelivered_drains()
        self._flush_applies()
        self._flush_terminations()
        return self.outcome

    def _flush_unless(self, action: Action) -> None:
        """Send what was gathered before an action of another kind (or one for an agent already
        in the batch: its second call must see the first's outcome)."""
        if not isinstance(action, Configure | Drain) or any(c.key[0] == action.slot for c in self._applies):
            self._flush_applies()
        if not isinstance(action, Terminate):
            self._flush_terminations()
        if not isinstance(action, Launch) or action.pooled:
            self._flush_launches()
        if not isinstance(action, Launch) or not self._batched_start(action):
            self._flush_starts()

    def _open(self) -> dict[str, dict[int, Record]]:
        """Open records by slot and attempt, read from the store once per round and kept up to
        date with the round's own writes (no one else writes records meanwhile): a lookup per
        action instead of reading every record again after each write."""
        if self._records is None:
            self._records = {}
            for r in self.store.open_records():
                self._records.setdefault(r.slot, {})[r.attempt] = r
        return self._records

    def _write(self, change: Change) -> None:
        """One lifecycle transition, committed, and in the round's view of the records."""
        self.store.apply([change])
        rec, slot = change.record, self._open().setdefault(change.record.slot, {})
        if rec.state in OPEN:
            slot[rec.attempt] = rec
        else:
            slot.pop(rec.attempt, None)

    def _backing_off(self, what: str) -> bool:
        """Provider mutations wait while the backoff holds (noted once per round)."""
        now = self.clock()
        if not self.state.backoff.active(now):
            return False
        b = self.state.backoff
        note = (
            f"provider backing off for {b.until - now:.0f} s after {b.failures} failure(s) ({b.reason}): {what} waits"
        )
        if not any(n.startswith("provider backing off") for n in self.outcome.notes):
            self.outcome.notes.append(note)
        return True

    def _provider_failed(self, what: str, exc: ProviderError) -> None:
        """Count the error under its table row's metric; back off where the row says so."""
        decision = exc.decision
        self.outcome.error(decision.metric, f"{what}: {exc}")
        if decision.retry is Retry.BACKOFF:
            self.state = replace(self.state, backoff=self.state.backoff.failed(self.clock(), f"{exc.kind}: {exc}"))

    def _provider_ok(self) -> None:
        if self.state.backoff.failures:
            self.state = replace(self.state, backoff=replace(self.state.backoff, failures=0, until=0.0))

    # -- agents -----------------------------------------------------------------------------------
    def configure(self, a: Configure) -> None:
        found = self._instance_of(a.slot)
        if found is None:
            return
        rec, inst = found
        if self._silent(a.slot, f"configure {a.slot}"):
            return
        mark = fingerprint(a.servers)
        if self.state.rejected.get(rec.key) == mark:
            self.outcome.notes.append(
                f"configure {a.slot}: its agent rejected this assignment; not re-sent until it changes"
            )
            return
        gen = self._assignment_generation_for(rec, a.servers)
        host, base = self.host(inst), self._port_base(inst)
        body = assignment_json(a.servers, gen, base, host)
        aid = self.store.begin_action(
            self.tick, "configure", a.slot, {"reason": a.reason, "assignment": body}, self.clock()
        )
        servers = tuple(replace(s, address=f"{host}:{base + s.index}") for s in a.servers)
        done = f"configure {a.slot} generation {gen}: {a.reason}"
        self._applies.append(_Apply(inst, body, aid, f"configure {a.slot}", rec.key, mark, servers, gen, done))

    def drain(self, a: Drain) -> None:
        found = self._instance_of(a.slot)
        if found is None:
            return
        rec, inst = found
        self._write(transition(rec, Reason.DRAIN, self.clock(), a.reason))
        if self._silent(a.slot, f"drain {a.slot}"):
            return
        self._send_drain(rec, inst, a.reason)

    def _send_drain(self, rec: Record, inst: Instance, reason: str) -> None:
        """An empty assignment (the agent stops its servers gracefully), intent first."""
        gen = self.store.next_assignment_generation(self.assignment_generation.get(rec.slot, 0) + 1)
        aid = self.store.begin_action(self.tick, "drain", rec.slot, {"reason": reason}, self.clock())
        body = assignment_json((), gen, self._port_base(inst), self.host(inst))
        what = f"drain {rec.slot}"
        self._applies.append(_Apply(inst, body, aid, what, rec.key, None, (), gen, what))

    def _undelivered_drains(self) -> None:
        """A drain that never reached its agent (skipped while it was silent, or its apply failed)
        is sent once the agent answers. Reconcile asks for a drain only of a READY record, and the
        record is DRAINING from the first ask: without this the agent would keep its servers until
        agent_drain_s ran out and the instance were terminated under them. Undelivered: the stored
        assignment still has servers (a delivered drain stores none); a record terminated this
        round is no longer DRAINING."""
        if not self.answered:
            return
        waiting = [r.slot for r in self.store.open_records() if r.state is State.DRAINING and r.slot in self.answered]
        applied = self.store.applied() if waiting else {}
        for slot in waiting:
            found = self._instance_of(slot)  # as drain() found it, and still DRAINING after this round
            if found is None or found[0].state is not State.DRAINING or not applied.get(found[0].key, (0, ()))[1]:
                continue
            rec, inst = found
            if any(c.key == rec.key for c in self._applies):
                continue
            self._send_drain(rec, inst, "re-sent: its agent did not get the drain")

    def _silent(self, slot: str, what: str) -> bool:
        """An agent that did not answer this tick's status is sent nothing this tick: it has just
        cost the tick one deadline, and a second call would most likely cost another. Nothing is
        written as applied, so reconcile asks for the assignment again and it goes once the agent
        answers; a drain's record is DRAINING all the same (reconcile does not ask again): its drain
        goes once the agent answers (_undelivered_drains), and a drained instance whose agent stays
        silent is terminated agent_drain_s after its drain began (reconcile's closeouts)."""
        if self.answered is None or slot in self.answered:
            return False
        self.outcome.notes.append(f"{what} waits: its agent did not answer this tick's status")
        return True

    def _flush_applies(self) -> None:
        """Send the gathered assignments, at most max_concurrency at once, each under its
        deadline; the outcomes are written in the order the actions came."""
        batch, self._applies = self._applies, []
        replies = call_all(self._send, batch, self.max_concurrency, self.deadline_s)
        for call, reply in zip(batch, replies, strict=True):
            if isinstance(reply, TransportError):
                self.store.finish_action(call.aid, "failed", self.clock(), str(reply))
                self._transport_failed(call.inst, call.key, call.mark, call.what, reply)
                continue
            faults.point("after_apply")
            self._applied(call)

    def _send(self, call: _Apply) -> None:
        self.transport.apply(call.inst, call.body)

    def _applied(self, call: _Apply) -> None:
        self.store.finish_action(call.aid, "done", self.clock())
        key = call.key
        if key in self.state.rejected:
            self.state = replace(self.state, rejected={k: v for k, v in self.state.rejected.items() if k != key})
        self.store.set_applied(key, call.servers, call.generation, self.clock())
        self.outcome.done.append(call.done)

    def _transport_failed(
        self, inst: Instance, key: tuple[str, int], mark: str | None, what: str, exc: TransportError
    ) -> None:
        """The transport's error table: quarantine the node, or remember the rejected assignment."""
        decision = exc.decision
        self.outcome.error(decision.metric, f"{what}: {exc}")
        if decision.record is OnRecord.QUARANTINE:
            self.state = quarantine(self.state, inst, str(exc), self.clock())
            self.outcome.notes.append(f"quarantined {key[0]} ({inst.id}): {exc}")
        elif decision.retry is Retry.CHANGED and mark is not None:
            self.state = replace(self.state, rejected={**self.state.rejected, key: mark})

    def _assignment_generation_for(self, rec: Record, servers: tuple[PlannedServer, ...]) -> int:
        """Re-send an unchanged assignment under its generation (the agent treats it as a no-op);
        anything new gets a fresh assignment generation above what the agent holds."""
        prev = self.store.applied().get(rec.key)
        if prev is not None and sorted(s.agent_key() for s in prev[1]) == sorted(s.agent_key() for s in servers):
            return prev[0]
        return self.store.next_assignment_generation(self.assignment_generation.get(rec.slot, 0) + 1)

    def _instance_of(self, slot: str) -> tuple[Record, Instance] | None:
        """The slot's newest ready or draining instance, unless it is quarantined (never contacted)."""
        recs = [r for r in self._open().get(slot, {}).values() if r.state in (State.READY, State.DRAINING)]
        rec = max(recs, key=lambda r: r.attempt, default=None)
        inst = self.instances.get(rec.instance_id or "") if rec else None
        if inst is None or inst.id in self.state.quarantined:
            return None
        return (rec, inst) if rec is not None else None

    def _port_base(self, inst: Instance) -> int:
        return self.default_port_base if inst.port_base is None else inst.port_base

    # -- terminate --------------------------------------------------------------------------------
    def terminate(self, a: Terminate) -> None:
        if a.instance_id is not None and self._backing_off(f"terminate {a.slot}"):
            return
        if a.attempt is not None:
            rec = self._open().get(a.slot, {}).get(a.attempt)
            if rec is None:
                return
            self._write(transition(rec, a.reason, self.clock(), a.detail))
        if a.instance_id is None:
            return
        aid = self.store.begin_action(
            self.tick,
            "terminate",
            a.slot,
            {"instance_id": a.instance_id, "reason": a.reason.value, "detail": a.detail}
            | ({"to_pool": a.to_pool} if a.to_pool else {}),
            self.clock(),
        )
        to_pool = a.to_pool if pool_of(self.provider) is not None else None  # ReuseOnScaleIn: re-tagged, then stopped
        self._terminations.append(_Termination(aid, a.slot, a.instance_id, a.reason.value, to_pool))

    def _flush_terminations(self) -> None:
        """The gathered terminations in one provider call (EC2: TerminateInstances with up to
        1,000 ids a request), the returns to the warm pool in another (CreateTags, StopInstances);
        each id's outcome is written in the order the actions came."""
        batch, self._terminations = self._terminations, []
        returns = [t for t in batch if t.to_pool]
        if returns:
            self._flush_returns(returns)
        batch = [t for t in batch if not t.to_pool]
        if not batch:
            return
        faults.point("before_terminate")
        failed = terminate_many(self.provider, [t.instance_id for t in batch])
        faults.point("after_terminate")
        for t in self._settle(batch, failed):
            self.outcome.done.append(f"terminate {t.slot} {t.instance_id} ({t.reason})")

    def _flush_returns(self, returns: list[_Termination]) -> None:
        """Retiring instances into the warm pool instead of terminated, in as few calls as the
        pool allows (fleet/base.py pool_return_many)."""
        pool = pool_of(self.provider)
        assert pool is not None, "a return is gathered only where the provider has a warm pool"
        faults.point("before_return")
        failed = pool_return_many(pool, {t.instance_id: t.to_pool or "" for t in returns})
        faults.point("after_terminate")
        for t in self._settle(returns, failed):
            self.outcome.pool_returns += 1
            self.outcome.done.append(f"return {t.slot} {t.instance_id} to the warm pool as {t.to_pool}")

    def _settle(self, batch: list[_Termination], failed: Mapping[str, ProviderError]) -> list[_Termination]:
        """One batch call's outcome written per id, in the actions' order: an id the call failed
        fails its action alone; the others are done, and returned for the caller's report."""
        done = []
        for t in batch:
            exc = failed.get(t.instance_id)
            if exc is not None:
                self.store.finish_action(t.aid, "failed", self.clock(), str(exc))
                self._provider_failed(f"terminate {t.slot} {t.instance_id}", exc)
                continue
            self._provider_ok()
            self.store.finish_action(t.aid, "done", self.clock())
            done.append(t)
        return done


@dataclass(frozen=True)
class _Apply:
    """An assignment on its way to an agent: its intent is written, the call not made yet."""

    inst: Instance
    body: dict[str, object]
    aid: int  # the action row, finished with the outcome
    what: str  # "configure SLOT" / "drain SLOT", for the tick report
    key: tuple[str, int]  # the record's (slot, attempt)
    mark: str | None  # the assignment's fingerprint (None: a drain, never remembered as rejected)
    servers: tuple[PlannedServer, ...]  # what the store records as applied once it is
    generation: int
    done: str  # the tick report's line once applied


@dataclass(frozen=True)
class _Termination:
    aid: int
    slot: str
    instance_id: str
    reason: str
    to_pool: str | None = None  # the warm pool member name it is returned as (ReuseOnScaleIn)


def quarantine(state: ControllerState, inst: Instance, reason: str, now: float) -> ControllerState:
    """The state with `inst` quarantined (the first reason and time are kept)."""
    if inst.id in state.quarantined:
        return state
    log.error("quarantined %s (%s): %s; it is not contacted again and will be replaced", inst.slot, inst.id, reason)
    entry = Quarantine(slot=inst.slot, reason=reason, since=now)
    return replace(state, quarantined={**state.quarantined, inst.id: entry})


def fingerprint(servers: tuple[PlannedServer, ...]) -> str:
    """What an agent would be told, hashed: a rejected assignment is not re-sent until this changes."""
    keys = sorted(repr(s.agent_key()) for s in servers)
    return hashlib.sha256("\n".join(keys).encode()).hexdigest()[:16]
