"""The warm pool's step of a tick: give reconcile's launches the stopped members they start
(before act), and keep the pool at its target (after act, on normal ticks only: a fast tick only
adds capacity, and refilling is no one's emergency). Decisions are core/fleet/warm_pool.py's; the
calls are the provider's WarmPool capability (fleet/base.py), behind the leader fence.

Crash safety, intent first like launches: a member's name is taken from a counter and written to
the store (meta key `warm_pool`, as pending) before pool_launch is called, and re-sent under the
same name -- the same EC2 request token -- until the call has answered, so a kill -9 between the
two never launches a second member; a claim is the provider's (tags before StartInstances, see
WarmPool), and a stop is idempotent.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from autoscaler.config.policy import Policy
from autoscaler.core.fleet.lifecycle import Reason, State
from autoscaler.core.fleet.warm_pool import (
    PoolChanges,
    Retiring,
    Wanted,
    assign,
    pooled_types,
    refill,
    refill_waits,
    returns,
    targets,
)
from autoscaler.core.rollout.actions import Launch, Terminate
from autoscaler.fleet.base import Instance, ProviderError, WarmPool, pool_of, pool_stop_many, terminate_many
from autoscaler.loop.state.store import Store
from autoscaler.loop.steps import faults
from autoscaler.loop.steps.actuator import Outcome
from autoscaler.transport.base import Transport, TransportError
from autoscaler.transport.bounded import agent_deadline_s, call_all

log = logging.getLogger(__name__)
STORE_KEY = "warm_pool"
RETURNABLE = (State.READY, State.DRAINING)  # initialised and serving until now: what a pool member is


@dataclass(frozen=True, slots=True)
class PoolReport:
    """The pool after a tick (the tick report's `warm_pool`)."""

    target: dict[str, int] = field(default_factory=dict)
    members: dict[str, int] = field(default_factory=dict)  # state -> count
    started: int = 0  # launches that started a member this tick
    returned: int = 0  # retiring instances stopped into the pool this tick (instead of terminated)

    def to_json(self) -> dict[str, Any]:
        return {"target": self.target, "members": self.members, "started": self.started, "returned": self.returned}


@dataclass
class PoolStep:
    policy: Policy
    provider: Any
    store: Store
    transport: Transport
    contact: bool
    clock: Callable[[], float]
    _members: list[Instance] | None = None
    # (slot, attempt) whose launch started a pool member, while they boot: the controller ticks
    # warm_boot_s after their launch to put them to work (kept in memory: after a restart they are
    # simply picked up by the next tick)
    started: frozenset[tuple[str, int]] = frozenset()

    @property
    def pool(self) -> WarmPool | None:
        return pool_of(self.provider) if self.policy.scaling.warm_pool.enabled else None

    def members(self) -> list[Instance]:
        """The pool as listed once this tick (pool_members)."""
        if self._members is None:
            pool = self.pool
            self._members = pool.pool_members() if pool is not None else []
        return self._members

    def assign(self, actions: tuple[Any, ...]) -> tuple[Any, ...]:
        """Reconcile's launches, each given a stopped member of its type where one is left."""
        if self.pool is None or not any(isinstance(a, Launch) for a in actions):
            return actions
        wanted = [
            Wanted(slot=a.slot, attempt=a.attempt, instance_type=a.instance_type, capacity_type=a.capacity_type)
            for a in actions
            if isinstance(a, Launch)
        ]
        given = assign(wanted, self.members())
        if given:  # when each type last gave a member: its refill waits for the scale-in (refill_waits)
            book, kinds = self._book(), {(w.slot, w.attempt): w.instance_type for w in wanted}
            book["claimed"] = {**book.get("claimed", {}), **{kinds[k]: self.clock() for k in given}}
            self.store.put(STORE_KEY, book)
        return tuple(
            replace(a, pooled=given[(a.slot, a.attempt)])
            if isinstance(a, Launch) and (a.slot, a.attempt) in given
            else a
            for a in actions
        )

    def reuse(self, actions: tuple[Any, ...], quarantined: Collection[str] = ()) -> tuple[Any, ...]:
        """Reconcile's scale-in terminations of initialised on-demand instances, each given a
        member name where its type's pool is below target: stopped into the pool instead. Each
        name is booked under its instance (`returning`) before act, so a crash between the
        record's move to TERMINATING and the pool return is resumed: reconcile re-sends the
        terminate of a terminating instance still listed, and it goes out as that return again."""
        if self.pool is None:
            return actions
        actions = self._resume(actions)
        ends = [
            a for a in actions if isinstance(a, Terminate) and a.reason is Reason.SCALE_IN and a.attempt is not None
        ]
        if not ends or not self.policy.scaling.warm_pool.reuse_on_scale_in:
            return actions
        recs = {r.key: r for r in self.store.open_records() if r.state in RETURNABLE}
        retiring = [
            Retiring(slot=r.slot, attempt=r.attempt, instance_type=r.instance_type, capacity_type=r.capacity_type)
            for a in ends
            if (r := recs.get((a.slot, a.attempt or 0))) is not None
            and a.instance_id == r.instance_id
            and a.instance_id not in quarantined
        ]
        book, now = self._book(), self.clock()
        pending: dict[str, int] = {}
        for itype in book["pending"].values():
            pending[itype] = pending.get(itype, 0) + 1
        claimed = {a.pooled for a in actions if isinstance(a, Launch) and a.pooled}
        keys = returns(self._want(now), self.members(), claimed, retiring, pending)
        if not keys:
            return actions
        names = {}
        for key in keys:
            book["seq"] += 1
            names[key] = f"pool-{self.policy.fleet}-{book['seq']}"
        out = tuple(
            replace(a, to_pool=names[(a.slot, a.attempt)])
            if isinstance(a, Terminate) and (a.slot, a.attempt) in names
            else a
            for a in actions
        )
        returning = {a.instance_id: a.to_pool for a in out if isinstance(a, Terminate) and a.to_pool}
        book["returning"] = {**book.get("returning", {}), **returning}
        self.store.put(STORE_KEY, book)  # a name is never given twice, even after a crash
        return out

    def _resume(self, actions: tuple[Any, ...]) -> tuple[Any, ...]:
        """The re-sent terminate of an instance whose pool return a crash interrupted (its record
        TERMINATING, the instance still listed: reconcile's orphan) goes out as that return, under
        the name it was booked with. Booked names whose record is no longer terminating are
        dropped: returned, gone, or never moved (a crash before the transition: decided afresh)."""
        book = self._book()
        ending = {r.instance_id for r in self.store.open_records() if r.state is State.TERMINATING}
        booked = {iid: name for iid, name in book.get("returning", {}).items() if iid in ending}
        if booked != book.get("returning", {}):
            book["returning"] = booked
            self.store.put(STORE_KEY, book)
        return tuple(
            replace(a, to_pool=booked[a.instance_id])
            if isinstance(a, Terminate) and a.attempt is None and a.instance_id in booked
            else a
            for a in actions
        )

    def refill(self, outcome: Outcome) -> PoolReport | None:
        """Stop the initialised members, launch what each type lacks, terminate the excess."""
        pool, planned = self.pool, self.planned()
        if pool is None or planned is None:
            return None
        changes, report = planned
        if changes.stop:  # in batches where the provider has them (EC2: StopInstances, 1,000 ids a call)
            self._outcomes(outcome, "pool stop", changes.stop, pool_stop_many(pool, changes.stop))
            faults.point("after_stop")
        if changes.terminate:
            failed = terminate_many(self.provider, changes.terminate)
            self._outcomes(outcome, "pool terminate", changes.terminate, failed)
        self._launch(pool, changes.launch, outcome)
        return replace(report, started=outcome.warm_starts, returned=outcome.pool_returns)

    def planned(self) -> tuple[PoolChanges, PoolReport] | None:
        """What refill would change, and the pool as listed; calls nothing that changes anything
        (advisory mode publishes this instead: loop/tick/advisory.py). None without a pool."""
        if self.pool is None:
            return None
        self._members = None  # after act: the members just claimed are gone
        members, now = self.members(), self.clock()
        want = self._want(now)
        ready = self._initialised([m for m in members if m.state == "running"])
        cfg = self.policy.scaling.warm_pool
        delay = cfg.refill_delay_s if cfg.reuse_on_scale_in else 0.0
        waiting = refill_waits(self._book().get("claimed", {}), now, delay)
        changes = refill(want, members, ready, now=now, timeout_s=self.policy.provider.ready_timeout_s, waiting=waiting)
        counts: dict[str, int] = {}
        for m in members:
            counts[m.state] = counts.get(m.state, 0) + 1
        return changes, PoolReport(target=want, members=counts)

    def _want(self, now: float) -> dict[str, int]:
        sc = self.policy.scaling
        return targets(sc.warm_pool, self._types(), self._launches(now), now, sc.boot_s, self.store.first_launch())

    def _book(self) -> dict[str, Any]:
        book: dict[str, Any] = self.store.get(STORE_KEY, {"seq": 0, "pending": {}})
        return book

    def _types(self) -> tuple[str, ...]:
        return pooled_types(self.policy.scaling.warm_pool, [t.name for t in self.policy.instance_types])

    def _launches(self, now: float) -> dict[str, list[float]]:
        out: dict[str, list[float]] = {}
        for r in self.store.records_since(now - 86400.0):
            out.setdefault(r.instance_type, []).append(r.created_at)
        return out

    def _initialised(self, running: Sequence[Instance]) -> frozenset[str]:
        """The running members whose agent answers (installed, models on disk; without agents to
        contact, the provider's readiness -- running -- is all there is). Asked as the fleet's
        agents are: in a bounded pool, each under its deadline (transport/bounded.py), so a
        member that hangs costs its own deadline, not one per member."""
        if not self.contact:
            return frozenset(m.id for m in running)
        cfg = self.policy.agents
        replies = call_all(self.transport.status, running, cfg.max_concurrency, agent_deadline_s(cfg))
        return frozenset(
            m.id for m, reply in zip(running, replies, strict=True) if not isinstance(reply, TransportError)
        )

    def _launch(self, pool: WarmPool, types: Sequence[str], outcome: Outcome) -> None:
        """Pending names first (a crash left them unanswered), then new ones; intent first."""
        book = self._book()
        todo, names = list(types), []
        for name, itype in sorted(book["pending"].items()):
            if itype in todo:  # unanswered last time: the same name, so the same instance if it was launched
                todo.remove(itype)
                names.append((name, itype))
        for itype in todo:
            book["seq"] += 1
            names.append((f"pool-{self.policy.fleet}-{book['seq']}", itype))
        # A pending name not re-sent is dropped: were its instance launched, it is a member now,
        # counted against the target; were it not, nothing of it exists.
        book["pending"] = dict(names)
        self.store.put(STORE_KEY, book)
        for name, itype in names:
            if self._call(outcome, f"pool launch {name} {itype}", lambda n=name, t=itype: pool.pool_launch(n, t), None):
                faults.point("after_pool_launch")
                book["pending"].pop(name, None)
                self.store.put(STORE_KEY, book)

    def _outcomes(
        self, outcome: Outcome, what: str, instance_ids: Sequence[str], failed: dict[str, ProviderError]
    ) -> None:
        """Each id's outcome of a batched call, in the order asked."""
        for iid in instance_ids:
            exc = failed.get(iid)
            if exc is not None:
                outcome.error(exc.decision.metric, f"{what} {iid}: {exc}")
            else:
                outcome.done.append(f"{what} {iid}")
                log.info("%s %s", what, iid)

    def _call(self, outcome: Outcome, what: str, call: Callable[[], object], point: str | None) -> bool:
        try:
            call()
        except ProviderError as exc:
            outcome.error(exc.decision.metric, f"{what}: {exc}")
            return False
        if point:
            faults.point(point)
        outcome.done.append(what)
        log.info("%s", what)
        return True
