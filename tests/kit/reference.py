"""The fleet-scale algorithms as they were before issue 50 indexed them: every pair scored, every
GPU scanned. Kept only for the property tests that check the indexed ones give the same answers
(tests/core/test_indexed_property.py); the product never imports this."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from autoscaler.core.layout import slots
from autoscaler.core.layout.layout_types import LayoutInput, PlannedServer, is_stand_in
from autoscaler.core.rollout import blocking, bursting, moves, rollout, surge
from autoscaler.core.rollout.blocking import Blockage, Pick, Progress, Resolution
from autoscaler.core.rollout.rollout import EPS, Amounts, GpuKey
from autoscaler.core.rollout.surge import SurgeInput, SurgePlan, is_surge_slot
from autoscaler.planner.types import Plan


def match_slots(plan: Plan, inp: LayoutInput) -> dict[int, str]:
    """slots.match_slots before the index: all pairs of an offering scored, sorted, taken greedily."""
    by_type = slots._candidates(inp)
    wanted = [slots._Wanted.of(inst) for inst in plan.instances]
    scored = sorted(
        (*slots._likeness(w, c), c.ordinal, i, c.slot)
        for i, (inst, w) in enumerate(zip(plan.instances, wanted, strict=True))
        for c in by_type.get(inst.key, ())
        if not (c.leaving and not slots._fits_beside(inst, c.leaving))
    )
    out: dict[int, str] = {}
    used: set[str] = set()
    for *_, i, slot in scored:
        if i not in out and slot not in used:
            out[i] = slot
            used.add(slot)
    if inp.short and inp.booting:
        slots._retarget(plan, wanted, by_type, inp, out)
    return out


def resolve(blockages: Sequence[Blockage], progress: Progress) -> Resolution:
    """blocking.resolve before its fixed point was carried from one pick to the next: found from
    nothing again after each pick, by iterating the rule (`progressing`)."""
    at = {t.name: b for b in blockages for t in b.waiting}
    picked: dict[GpuKey, Pick] = {}
    stuck: dict[GpuKey, str] = {}
    while True:
        moving = progressing(progress, at, picked)
        open_ = [b for b in blockages if b.key not in picked and not blocking._waits(b, moving, progress.leaving)]
        for b in open_:
            if b.key not in stuck and (why := blocking._hopeless(b, progress, moving)) is not None:
                stuck[b.key] = why
        candidates = [b for b in open_ if b.key not in stuck]
        if not candidates:
            break
        best = min(candidates, key=lambda b: (len(b.waiting), sum(s.mps_percent for s in b.waiting), b.key))
        picked[best.key] = Pick(blockage=best)
    waiting = tuple(b for b in blockages if b.key not in picked and b.key not in stuck)
    return Resolution(
        picks=tuple(picked.values()),
        waiting=waiting,
        stuck=tuple((b, stuck[b.key]) for b in blockages if b.key in stuck),
    )


def progressing(progress: Progress, at: Mapping[str, Blockage], picked: Mapping[GpuKey, Pick]) -> set[str]:
    """blocking._Moving before it counted: the rule iterated from nothing to its least fixed
    point, every pending server judged again each round."""
    moving: set[str] = set()
    while True:
        now = {
            w
            for w, names in progress.pending.items()
            if names and all(_moves(n, progress, at, picked, moving) for n in names)
        }
        if now == moving:
            return moving
        moving = now


def _moves(
    name: str, progress: Progress, at: Mapping[str, Blockage], picked: Mapping[GpuKey, Pick], moving: set[str]
) -> bool:
    if name in progress.coming:
        return True
    b = at.get(name)
    return b is not None and (b.key in picked or blocking._waits(b, moving, progress.leaving))


class Tick(rollout.Tick):
    """rollout.Tick as it judged before the index: the whole fleet scanned for a name (also for a
    stand-in's planned server), each GPU judged twice per candidate, the stand-ins' relief summed
    over every GPU, every GPU asked what it wants and whether a planned server waits there;
    `stop` asking every retiring server again each round, found again each round."""

    def stop(self) -> None:
        while any([self._release(key, s) for key, s in self._retiring(stand_ins=False)]):
            pass
        for key, s in self._retiring(stand_ins=True):
            self._release(key, s)

    def _relief(self, name: str) -> float:
        return sum(p.stand_ins.get(name, 0.0) for p in self.parts.values())

    def _retiring(self, stand_ins: bool) -> list[tuple[GpuKey, PlannedServer]]:
        out = []
        for key, servers in self.on.items():
            wanted = {v.agent_key() for v in self.gpus[key].wanted}
            in_way = bool(self.unstarted(key))
            out += [
                (not in_way, key, s.name, s)
                for s in servers
                if s.agent_key() not in wanted and s.name not in self.draining and is_stand_in(s.name) == stand_ins
            ]
        return [(key, s) for _, key, _, s in sorted(out, key=lambda t: t[:3])]

    def _waiting_for(self, s: PlannedServer, key: GpuKey) -> bool:
        orig = rollout.original_of(s.name)
        if orig is None or orig not in self.planned_names:
            return False
        if any(v.name == orig for v in self.unstarted(key)):
            return False
        agent = self.planned_keys.get(orig)
        return not any(v.name == orig and v.agent_key() == agent for servers in self.on.values() for v in servers)

    def _slows(self, key: GpuKey, verdict: Sequence[tuple[PlannedServer, bool, float]], guest: str) -> bool:
        wanted = {v.agent_key(): v for v in self.gpus[key].wanted}
        lost = Amounts()
        for s, _, thr in verdict:
            v = wanted.get(s.agent_key())
            if v is None or s.name == guest:
                continue
            if thr < v.rate_rps * (1 - EPS):
                return True
            lost[v.workload] += max(0.0, v.predicted_throughput_rps - thr)
        planned = self.inp.planned or {}
        for w, loss in lost.items():
            have, need = planned.get(w, 0.0), self.inp.demand.get(w, 0.0)
            if have >= need * (1 - EPS) and have - loss < need * (1 - EPS):
                return True
        return False

    def _future(self, key: GpuKey, t: PlannedServer) -> Any:
        if any(s.name == t.name for k, servers in self.on.items() if k[0] == key[0] for s in servers):
            return None
        servers = [*self.on[key], t]
        starting = frozenset(s.name for s in self.on[key] if s.name not in self.inp.ready)
        part = self._judge(key, servers, serving=starting | {t.name})
        idle = {t.replaces} if t.replaces else set()
        before = self.parts[key].ok | (self._judge(key, self.on[key], serving=starting).ok if starting else frozenset())
        if t.name not in part.ok or not before - idle <= part.ok or not self._holds(key, part):
            return None
        verdict = self._verdict(key, servers, starting | {t.name})
        return part, next(thr for s, _, thr in verdict if s.name == t.name), verdict


class _Allocator(surge._Allocator):
    """surge._Allocator as it scanned before: every GPU sorted and compared for each lendable
    question, every GPU of the fleet for a stand-in's port index."""

    def _stand_in(self, b: PlannedServer, slot: str, gpu: int) -> PlannedServer:
        k = 0
        while f"{b.name}-s{k}" in self.names:
            k += 1
        used = {s.index for key, servers in self.tick.on.items() if key[0] == slot for s in servers}
        used |= {s.index for key, g in self.tick.gpus.items() if key[0] == slot for s in g.wanted}
        index = next(i for i in range(len(used) + 1) if i not in used)
        return replace(b, name=f"{b.name}-s{k}", gpu_index=gpu, index=index, replaces="")

    def _lendable(self, gpu: str, blocked: GpuKey | None = None) -> list[GpuKey]:
        out = []
        for key, g in sorted(self.tick.gpus.items()):
            if key == blocked or is_surge_slot(key[0]) or not g.wanted or self._info(g.instance_type).gpu != gpu:
                continue
            if sorted(s.agent_key() for s in self.tick.on[key]) == sorted(s.agent_key() for s in g.wanted):
                out.append(key)
        return out

    def _burst(self, t: PlannedServer, gap: float, gpu: str) -> float:
        got = 0.0
        for key in self._lendable(gpu):
            if got >= gap * (1 - EPS):
                break
            got += self._burst_on(key, t)
        return got

    def _burst_fit(self, key: GpuKey, t: PlannedServer) -> tuple[float | None, PlannedServer | None]:
        base = self._stand_in(t, key[0], key[1])
        itype = self.tick.gpus[key].instance_type
        if t.mig_profile is not None and self._info(itype).starts(t.mig_profile):
            for cand in self._shapes(base, itype, 0.0):
                if got := self.tick.fits_beside(key, cand, keep_rates=True):
                    return got, cand
            return None, None
        share = min(t.mps_percent, 100.0 - sum(s.mps_percent for s in self.tick.on[key]))
        if share < bursting.BURST_MIN_SHARE:
            return None, None
        scaled = t.predicted_throughput_rps * share / t.mps_percent
        for batch in range(t.batch, 0, -1):
            cand = replace(base, mps_percent=share, batch=batch, predicted_throughput_rps=scaled)
            if got := self.tick.fits_beside(key, cand, keep_rates=True):
                return got, cand
        return None, None

    def _ready_surge(self, b: PlannedServer, thr: float, gpu: str) -> bool:
        keys = sorted(self.tick.gpus, key=lambda k: (not is_surge_slot(k[0]), k))
        for key in keys:
            if not self._temporary(key[0]) or self._info(self.tick.gpus[key].instance_type).gpu != gpu:
                continue
            if self._may_use(key[0]) and self._try_gpu(key, b, thr):
                return True
        return False


def allocate(picks: Iterable[Pick], inp: SurgeInput, tick: rollout.Tick) -> SurgePlan:
    alloc = _Allocator(inp, tick)
    for pick in picks:
        alloc.serve(pick)
    alloc.early()
    return alloc.plan()


def waiting_late(
    waiting: Sequence[Blockage], late: Sequence[tuple[PlannedServer, str, float]]
) -> list[tuple[PlannedServer, str, float]]:
    out = []
    for b in waiting:
        workloads = {s.workload for s in b.blockers}
        since = min((t for v, _, t in late if v.workload in workloads), default=-math.inf)
        out += [(v, b.instance_type, since) for v in b.waiting]
    return out


@contextmanager
def old_moves() -> Iterator[None]:
    """reconcile's moves with every algorithm above in place of the indexed ones."""
    saved = {n: getattr(moves, n) for n in ("Tick", "allocate", "resolve", "_waiting_late")}
    moves.Tick, moves.allocate, moves.resolve, moves._waiting_late = Tick, allocate, resolve, waiting_late  # type: ignore[misc]
    try:
        yield
    finally:
        for n, v in saved.items():
            setattr(moves, n, v)
