"""The act step: carry out reconcile's actions, intent first.

Every action writes its intent to the store (an action row in `started`, the lifecycle transition
that it is about to cause) and commits before the provider or an agent is called, then writes the
outcome. A crash in between leaves an intent that the next tick resumes idempotently. The first
CapacityError stops the round: the controller marks the type unavailable and re-plans at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from autoscaler.core.layout import PlannedServer, assignment_json
from autoscaler.core.lifecycle import Reason, Record, State, new_record, transition
from autoscaler.core.reconcile import Action, Configure, Drain, Launch, Terminate
from autoscaler.fleet.base import CapacityError, Instance, Provider, ProviderError
from autoscaler.loop import faults
from autoscaler.loop.store import Store
from autoscaler.transport.base import Transport, TransportError

log = logging.getLogger(__name__)


@dataclass
class Outcome:
    done: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    capacity: list[str] = field(default_factory=list)  # instance types that reported no capacity
    errors: dict[str, int] = field(default_factory=dict)  # kind -> count, for metrics

    def error(self, kind: str, message: str) -> None:
        self.failed.append(message)
        self.errors[kind] = self.errors.get(kind, 0) + 1
        log.warning("%s", message)


@dataclass(kw_only=True)
class Actuator:
    store: Store
    provider: Provider
    transport: Transport
    instances: Mapping[str, Instance]  # listed instances by id
    agent_generation: Mapping[str, int]  # slot -> generation its agent reports
    default_port_base: int
    plan_generation: int
    tick: int | None
    clock: Callable[[], float]
    outcome: Outcome = field(default_factory=Outcome)

    def run(self, actions: tuple[Action, ...]) -> Outcome:
        handlers = {Launch: self.launch, Configure: self.configure, Drain: self.drain, Terminate: self.terminate}
        faults.point("slow_act")
        for action in actions:
            handlers[type(action)](action)  # type: ignore[operator]
            if self.outcome.capacity:
                break
        return self.outcome

    # -- launch -----------------------------------------------------------------------------------
    def launch(self, a: Launch) -> None:
        rec = self._intend_launch(a)
        aid = self.store.begin_action(self.tick, "launch", a.slot, _detail(a), self.clock())
        try:
            inst = self.provider.launch(
                a.slot, a.instance_type, self.plan_generation, attempt=a.attempt, salt=self.store.epoch
            )
        except ProviderError as exc:
            self._launch_failed(a, rec, aid, exc)
            return
        faults.point("after_launch")
        self.store.apply([transition(rec, Reason.LAUNCHED, self.clock(), a.reason, instance_id=inst.id)])
        self.store.finish_action(aid, "done", self.clock())
        self.outcome.done.append(f"launch {a.slot} {a.instance_type} -> {inst.id}")

    def _intend_launch(self, a: Launch) -> Record:
        """The REQUESTED record, committed before the provider is called."""
        now = self.clock()
        existing = next((r for r in self.store.open_records() if r.key == (a.slot, a.attempt)), None)
        base = existing or new_record(a.slot, a.attempt, a.instance_type, now, self.plan_generation)
        change = transition(base, Reason.REQUEST, now, a.reason)
        self.store.apply([change])
        return change.record

    def _launch_failed(self, a: Launch, rec: Record, aid: int, exc: ProviderError) -> None:
        now = self.clock()
        if isinstance(exc, CapacityError) or not exc.retryable:
            self.store.apply([transition(rec, Reason.LAUNCH_FAILED, now, str(exc))])
        self.store.finish_action(aid, "failed", now, str(exc))
        if isinstance(exc, CapacityError):
            self.outcome.capacity.append(a.instance_type)
            self.outcome.error("capacity", f"launch {a.slot}: {exc}")
        else:
            self.outcome.error("provider", f"launch {a.slot}: {exc}")

    # -- agents -----------------------------------------------------------------------------------
    def configure(self, a: Configure) -> None:
        found = self._instance_of(a.slot)
        if found is None:
            return
        rec, inst = found
        gen = self._generation_for(rec, a.servers)
        body = assignment_json(a.servers, gen, self._port_base(inst))
        aid = self.store.begin_action(
            self.tick, "configure", a.slot, {"reason": a.reason, "assignment": body}, self.clock()
        )
        if self._apply(inst, body, aid, f"configure {a.slot}"):
            self.store.set_applied(rec.key, a.servers, gen, self.clock())
            self.outcome.done.append(f"configure {a.slot} generation {gen}: {a.reason}")

    def drain(self, a: Drain) -> None:
        found = self._instance_of(a.slot)
        if found is None:
            return
        rec, inst = found
        self.store.apply([transition(rec, Reason.DRAIN, self.clock(), a.reason)])
        gen = self.store.next_generation(self.agent_generation.get(a.slot, 0) + 1)
        aid = self.store.begin_action(self.tick, "drain", a.slot, {"reason": a.reason}, self.clock())
        if self._apply(inst, assignment_json((), gen, self._port_base(inst)), aid, f"drain {a.slot}"):
            self.store.set_applied(rec.key, (), gen, self.clock())
            self.outcome.done.append(f"drain {a.slot}")

    def _apply(self, inst: Instance, body: dict[str, object], aid: int, what: str) -> bool:
        try:
            self.transport.apply(inst, body)
        except TransportError as exc:
            self.store.finish_action(aid, "failed", self.clock(), str(exc))
            self.outcome.error("transport", f"{what}: {exc}")
            return False
        faults.point("after_apply")
        self.store.finish_action(aid, "done", self.clock())
        return True

    def _generation_for(self, rec: Record, servers: tuple[PlannedServer, ...]) -> int:
        """Re-send an unchanged assignment under its generation (the agent treats it as a no-op);
        anything new gets a fresh generation above what the agent holds."""
        prev = self.store.applied().get(rec.key)
        if prev is not None and sorted(s.agent_key() for s in prev[1]) == sorted(s.agent_key() for s in servers):
            return prev[0]
        return self.store.next_generation(self.agent_generation.get(rec.slot, 0) + 1)

    def _instance_of(self, slot: str) -> tuple[Record, Instance] | None:
        recs = [r for r in self.store.open_records() if r.slot == slot and r.state in (State.READY, State.DRAINING)]
        rec = max(recs, key=lambda r: r.attempt, default=None)
        inst = self.instances.get(rec.instance_id or "") if rec else None
        return (rec, inst) if rec is not None and inst is not None else None

    def _port_base(self, inst: Instance) -> int:
        return self.default_port_base if inst.port_base is None else inst.port_base

    # -- terminate --------------------------------------------------------------------------------
    def terminate(self, a: Terminate) -> None:
        if a.attempt is not None:
            rec = next((r for r in self.store.open_records() if r.key == (a.slot, a.attempt)), None)
            if rec is None:
                return
            self.store.apply([transition(rec, a.reason, self.clock(), a.detail)])
        if a.instance_id is None:
            return
        aid = self.store.begin_action(
            self.tick,
            "terminate",
            a.slot,
            {"instance_id": a.instance_id, "reason": a.reason.value, "detail": a.detail},
            self.clock(),
        )
        try:
            self.provider.terminate(a.instance_id)
        except ProviderError as exc:
            self.store.finish_action(aid, "failed", self.clock(), str(exc))
            self.outcome.error("provider", f"terminate {a.slot} {a.instance_id}: {exc}")
            return
        faults.point("after_terminate")
        self.store.finish_action(aid, "done", self.clock())
        self.outcome.done.append(f"terminate {a.slot} {a.instance_id} ({a.reason.value})")


def _detail(a: Launch) -> dict[str, object]:
    return {"instance_type": a.instance_type, "attempt": a.attempt, "reason": a.reason}
