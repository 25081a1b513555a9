"""The act step's launches (loop/steps/actuator.py): each intent written before its call, a run
of launches sent together where the provider allows it, a run of warm starts claimed together.

A run of launches goes out with the first alone, as one at a time would send it (no capacity ends
the round for a re-plan, throttling backs off, before any other is sent), then the rest with up to
the provider's `launch_concurrency` in flight (EC2: 8; a provider without it, such as the
simulator's, launches one at a time). Each call keeps its own client token and passes the
send-time fence (loop/service/fence.py); outcomes are written in the actions' order, on the
tick's thread. A run of warm starts goes to the pool's `start_pooled_many` (fleet/base.py).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from autoscaler.config.offerings import offering_key
from autoscaler.core.fleet.lifecycle import Change, Reason, Record, new_record, transition
from autoscaler.core.rollout.reconcile import Launch
from autoscaler.fleet.base import (
    POOL_CLAIMED,
    TAG_POOL,
    BatchPool,
    CapacityError,
    Claim,
    Instance,
    OnRecord,
    Provider,
    ProviderError,
    Retry,
    pool_of,
    start_pooled_many,
)
from autoscaler.loop.state.controller_state import ControllerState
from autoscaler.loop.state.store import Store
from autoscaler.loop.steps import faults
from autoscaler.loop.steps.outcome import Outcome


class Launches:
    """Mixed into the Actuator, which supplies the state and the stubs below."""

    store: Store
    provider: Provider
    state: ControllerState
    tick: int | None
    clock: Callable[[], float]
    outcome: Outcome
    _launches: list[Launch]
    _starts: list[Launch]

    def _backing_off(self, what: str) -> bool:
        raise NotImplementedError

    def _open(self) -> dict[str, dict[int, Record]]:
        raise NotImplementedError

    def _write(self, change: Change) -> None:
        raise NotImplementedError

    def _provider_failed(self, what: str, exc: ProviderError) -> None:
        raise NotImplementedError

    def _provider_ok(self) -> None:
        raise NotImplementedError

    def launch(self, a: Launch) -> None:
        if self._batched_start(a):
            self._starts.append(a)  # started with the run of warm starts it is part of (_flush_starts)
        elif not a.pooled and self._launch_concurrency() > 1:
            self._launches.append(a)  # sent with the run of launches it is part of (_flush_launches)
        else:
            self._launch_now(a)

    def _batched_start(self, a: Launch) -> bool:
        return a.pooled is not None and isinstance(pool_of(self.provider), BatchPool)

    def _flush_starts(self) -> None:
        """A run of warm starts in as few calls as the pool allows (EC2: the claims' tags, then
        one StartInstances), every intent written first; outcomes in the actions' order."""
        batch, self._starts = self._starts, []
        prepared = [(a, p) for a in batch if (p := self._prepare(a)) is not None]
        pool = pool_of(self.provider)
        if not prepared or pool is None:
            return
        gen = self.state.plan_generation
        claims = [Claim(a.pooled or "", a.slot, a.instance_type, gen, a.attempt) for a, _ in prepared]
        for (a, (rec, aid)), result in zip(prepared, start_pooled_many(pool, claims), strict=True):
            if isinstance(result, Instance) and result.tags.get(TAG_POOL) == POOL_CLAIMED:
                self.outcome.warm_started.append((a.slot, a.attempt))
            self._launched(a, rec, aid, result)

    def _launch_now(self, a: Launch) -> None:
        prepared = self._prepare(a)
        if prepared is not None:
            self._launched(a, *prepared, self._attempt(a, self.store.epoch))

    def _prepare(self, a: Launch) -> tuple[Record, int] | None:
        """The launch's intent, committed (its REQUESTED record and action row); None while the
        provider backs off."""
        if self._backing_off(f"launch {a.slot}"):
            return None
        rec = self._intend_launch(a)
        return rec, self.store.begin_action(self.tick, "launch", a.slot, _detail(a), self.clock())

    def _attempt(self, a: Launch, salt: str) -> Instance | ProviderError:
        """The provider's call (no store access: it may run on a launch thread)."""
        try:
            return self._start_or_launch(a, salt)
        except ProviderError as exc:
            return exc

    def _launched(self, a: Launch, rec: Record, aid: int, result: Instance | ProviderError) -> None:
        """The launch's outcome, written."""
        if isinstance(result, ProviderError):
            self._launch_failed(a, rec, aid, result)
            return
        faults.point("after_start" if a.pooled else "after_launch")
        self._provider_ok()
        self._write(transition(rec, Reason.LAUNCHED, self.clock(), a.reason, instance_id=result.id))
        self.store.finish_action(aid, "done", self.clock())
        self.outcome.done.append(f"launch {a.slot} {a.offering} -> {result.id}")

    def _launch_concurrency(self) -> int:
        """RunInstances in flight at once: the provider's `launch_concurrency` (EC2: 8; a
        provider without it, e.g. the simulator's, launches one at a time)."""
        return int(getattr(self.provider, "launch_concurrency", 1))

    def _flush_launches(self) -> None:
        """A run of launches: the first alone, as one at a time would send it (a refusal for no
        capacity ends the round, throttling backs off, before any other is sent); then the rest
        at once, at most `launch_concurrency` in flight, each with its own intent written first,
        its own client token and the send-time fence. Outcomes are written in the actions' order;
        an error that is no provider error (the lease lost) is raised at its place, after every
        call has returned."""
        batch, self._launches = self._launches, []
        if not batch:
            return
        self._launch_now(batch[0])
        if self.outcome.capacity:
            return
        prepared = [(a, p) for a in batch[1:] if (p := self._prepare(a)) is not None]
        if not prepared:
            return
        workers, salt = min(self._launch_concurrency(), len(prepared)), self.store.epoch
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="igniter-launch") as pool:
            futures = [pool.submit(self._attempt, a, salt) for a, _ in prepared]
        for (a, (rec, aid)), future in zip(prepared, futures, strict=True):
            self._launched(a, rec, aid, future.result())

    def _start_or_launch(self, a: Launch, salt: str) -> Instance:
        """StartInstances of the warm-pool member reconcile's launch was given, else a new instance."""
        pool = pool_of(self.provider)
        if a.pooled is not None and pool is not None:
            inst = pool.start_pooled(a.pooled, a.slot, a.instance_type, self.state.plan_generation, attempt=a.attempt)
            if inst.tags.get(TAG_POOL) == POOL_CLAIMED:
                self.outcome.warm_started.append((a.slot, a.attempt))
            return inst
        return self.provider.launch(
            a.slot,
            a.instance_type,
            self.state.plan_generation,
            attempt=a.attempt,
            salt=salt,
            capacity_type=a.capacity_type,
        )

    def _intend_launch(self, a: Launch) -> Record:
        """The REQUESTED record, committed before the provider is called."""
        now = self.clock()
        existing = self._open().get(a.slot, {}).get(a.attempt)
        base = existing or new_record(
            a.slot, a.attempt, a.instance_type, now, self.state.plan_generation, a.capacity_type
        )
        change = transition(base, Reason.REQUEST, now, a.reason)
        self._write(change)
        return change.record

    def _launch_failed(self, a: Launch, rec: Record, aid: int, exc: ProviderError) -> None:
        """The record, the retry and the metric as the provider's error table says."""
        now = self.clock()
        decision = exc.decision
        if decision.record is OnRecord.CLOSE:
            self._write(transition(rec, Reason.LAUNCH_FAILED, now, str(exc)))
        self.store.finish_action(aid, "failed", now, str(exc))
        if decision.retry is Retry.REPLAN:
            capacity = exc.capacity_type if isinstance(exc, CapacityError) else a.capacity_type
            itype = exc.instance_type if isinstance(exc, CapacityError) else a.instance_type
            self.outcome.capacity.append(offering_key(itype or a.instance_type, capacity))
        self._provider_failed(f"launch {a.slot}", exc)


def _detail(a: Launch) -> dict[str, object]:
    return {
        "instance_type": a.instance_type,
        "capacity_type": a.capacity_type,
        "attempt": a.attempt,
        "reason": a.reason,
        **({"pooled": a.pooled} if a.pooled else {}),
    }
