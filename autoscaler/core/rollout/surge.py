"""Surge capacity: a planned server that cannot start where it is planned (its GPU still holds the
servers it replaces) starts early somewhere else, so that no move waits forever and none takes
capacity away before its replacement serves. Pure.

The early server is a *stand-in*: a temporary copy of the planned server (same model and batch, its
planned MPS share or all the room there is if that is more; a new name `<planned name>-s<k>` and
port) that carries at least the planned server's predicted throughput, judged by the model where
it runs. It goes, in this order of preference, where there is room:
1. beside the servers of another ready GPU of the same GPU type that is at rest (it runs exactly
   what the layout wants): borrowed room, free and ready within one tick;
2. on a surge instance already running;
3. on paper, on a surge instance booting or on room a booting planned instance will have beside
   its planned servers (it starts there as borrowed room once that one is ready: no later than a
   new surge instance would be, at no extra cost);
4. on a *spare*: an instance a re-plan no longer wants, booting or ready, kept as a surge instance
   instead of being retired. It is paid for already and ready sooner than a new one; without it,
   a re-plan that moves a workload's capacity from an instance about to be ready onto a GPU still
   full would retire that instance and wait for a new surge instance to boot, short meanwhile;
5. on a new surge instance (`<fleet>-<type>-surge<n>`, the cheapest type with that GPU).
Once the stand-in serves, its workload has the capacity it was planned to get, so the servers in
the way may leave (rollout's floors), the planned server starts in the room they leave, and the
stand-in leaves once that one serves (the move is complete).

**Capacity that serves sooner.** A planned server on an instance still booting (or launched this
tick), or one that waits on a ready GPU for servers that leave once such an instance is ready
(moves.py), of a workload short of its demand gets a stand-in too, where a surge instance or spare
is ready already or was launched before that instance (so it is ready first, the boot time being
the same): on a re-plan that moves a workload's new capacity from a booting surge instance to a new
instance, the surge instance would otherwise be retired and the workload stay short until the new
one is ready. No new instance is launched for it, and only the shortfall is covered.

**Bursting** (`scaling.burst`, on by default). Before any of that, such a short workload's planned
server gets stand-ins in the MPS share that ready GPUs at rest leave free, where the model says it
and every neighbour stay within their budgets and no floor breaks: capacity in seconds, with no
boot and no extra cost (bursting.py).

**MIG re-cuts.** On a MIG GPU a planned slice that shares a memory unit with a slice still running
cannot start (colocation.py judges such a cut as serving nothing), so a re-cut whose new slices
land on units the old cut holds is a blocked move like any other: the new slice starts first where
the cut leaves free units (rollout.Tick), and otherwise its stand-in runs the same slice profile
(same measured row) on another GPU of the type, at any start that profile allows there (the free
units of another cut rarely sit where this one planned it: `TypeInfo.mig_starts`), or on a surge
instance. The old slice's servers leave only once that serves (the floors), drain through the
gateway first (`drained`), and the agent destroys a slice only after its servers have exited
(agents/node/mig.py); the planned slice is assigned in those units once the agent no longer
reports the old one (rollout.Tick: `Gpu.held`, and the slices freed this tick).

A surge instance (or spare) with nothing to do is retired at once; it is billed like any other
meanwhile. `scaling.max_surge` bounds the surge instances alive at once, spares kept for
stand-ins included (default: 1, or 10 % of the planned fleet if larger); max_instances and
max_cost_per_hour bound them like any other instance. A planned server that gets no stand-in
waits while the surge budget is busy with other moves. Where a limit makes a stand-in impossible
(max_surge 0, its type at max_instances, the cost cap), the servers in its way are removed before
it serves (break-before-make): the only way the invariant breaks, reported as a Breach.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from autoscaler.core.layout.layout_types import PlannedServer
from autoscaler.core.rollout.blocking import Pick
from autoscaler.core.rollout.borrowing import Virtual
from autoscaler.core.rollout.bursting import Bursting
from autoscaler.core.rollout.rollout import EPS, Amounts, GpuKey, Tick
from autoscaler.core.rollout.surge_types import (
    Breach,
    SurgeInput,
    SurgePlan,
    SurgeSlot,
    TypeInfo,
    is_surge_slot,
    surge_budget,
)

__all__ = ["Breach", "SurgeInput", "SurgePlan", "SurgeSlot", "TypeInfo", "allocate", "is_surge_slot", "surge_budget"]


class _Allocator(Bursting):
    """Stand-ins for one tick's blocked moves and late servers, in the order of preference the
    module docstring gives (borrowing.py's state and ready GPUs, bursting.py's free share)."""

    # -- per pick ---------------------------------------------------------------------------------
    def serve(self, pick: Pick) -> None:
        key = pick.blockage.key
        limits: list[str] = []
        for t in pick.needs:
            if self._covered(t) or self._adopt(t):  # a stand-in is already there (starting or serving)
                continue
            why = self._place(t, t.predicted_throughput_rps, pick.blockage.instance_type, key)
            if why == "busy" and self.inp.frozen and not self.launches and not self.started:
                limits.append("max_surge")
            elif why == "busy":
                self.notes.append(
                    f"surge: {t.name} on {key[0]} GPU {key[1]} waits for the surge budget "
                    f"({self.inp.budget} instance(s) busy with other moves)"
                )
            elif why == "unfit":
                self.notes.append(f"surge: no GPU can hold a stand-in for {t.name}; its move waits")
            elif why is not None:
                limits.append(why)
        if limits:
            self._force(pick, limits[0])

    def _covered(self, t: PlannedServer) -> bool:
        return self.carried[t.name] >= t.predicted_throughput_rps * (1 - EPS)

    def _gap(self, workload: str) -> float:
        """How far the workload's ready capacity, and the stand-ins on their way, fall short of its demand."""
        return self.tick.inp.demand.get(workload, 0.0) - self.tick.cap[workload] - self.gained[workload]

    def _adopt(self, t: PlannedServer) -> bool:
        """A stand-in left over from an earlier plan (its planned server is gone) that carries as much
        as `t` would serves as t's stand-in: no second one for the same capacity."""
        for i, (_, s) in enumerate(self.orphans):
            if s.workload == t.workload and s.predicted_throughput_rps >= t.predicted_throughput_rps * (1 - EPS):
                del self.orphans[i]
                return True
        return False

    def _place(self, b: PlannedServer, thr: float, itype: str, blocked: GpuKey) -> str | None:
        """None once placed; else "busy" (the budget is in use) or the limit that forbids a stand-in."""
        gpu = self._info(itype).gpu
        if self._borrow(b, thr, gpu, blocked) or self._ready_surge(b, thr, gpu):
            return None
        if self._on_paper(b, thr, gpu):
            return None
        return self._launch(b, thr, gpu, blocked)

    def _ready_surge(self, b: PlannedServer, thr: float, gpu: str) -> bool:
        """A ready surge instance, then a ready spare (module docstring, 2 and 4)."""
        for key in self.temporary:
            if self._info(self.tick.gpus[key].instance_type).gpu != gpu:
                continue
            if self._may_use(key[0]) and self._try_gpu(key, b, thr):
                return True
        return False

    def early(self) -> None:
        """Stand-ins for planned servers still booting, in free share of ready GPUs first, then on
        surge instances and spares that serve sooner, as far as their workloads are short (module
        docstring)."""
        paper = Amounts()  # placed on paper this way, per workload
        for t, itype, since in sorted(self.inp.late, key=lambda x: (x[2], x[0].name)):
            gap = self._gap(t.workload) - paper[t.workload]
            if gap <= EPS * (1.0 + t.predicted_throughput_rps) or self._covered(t):
                continue
            thr, gpu = t.predicted_throughput_rps, self._info(itype).gpu
            if (self.inp.burst and self._burst(t, gap, gpu) >= gap * (1 - EPS)) or self.inp.burst_only:
                continue
            if not self._ready_surge(t, thr, gpu) and self._on_paper(t, thr, gpu, sooner_than=since):
                paper[t.workload] += thr

    def _on_paper(self, b: PlannedServer, thr: float, gpu: str, sooner_than: float | None = None) -> bool:
        """On a booting instance's room, on paper; with `sooner_than`, only on a surge instance or
        spare launched before then."""
        for v in self.virtual:
            if v.info.gpu != gpu or not self._may_use(v.slot):
                continue
            if sooner_than is not None and not (self._temporary(v.slot) and v.since < sooner_than):
                continue
            for i, servers in enumerate(v.gpus):
                room = 100.0 - sum(s.mps_percent for s in servers)
                for shape in self._shapes(replace(b, gpu_index=i), v.info.name, room):
                    trial = [*servers, shape]
                    verdict = self.inp.judge(v.info.name, trial)
                    if all(ok for ok, _ in verdict) and verdict[-1][1] >= thr * (1 - EPS):
                        servers.append(trial[-1])
                        self._enlist(v.slot)
                        return True
        return False

    def _launch(self, b: PlannedServer, thr: float, gpu: str, blocked: GpuKey) -> str | None:
        options = sorted((t for t in self.inp.types.values() if t.gpu == gpu), key=lambda t: (t.price_per_hour, t.name))
        if not options:
            options = [self._info(self.tick.gpus[blocked].instance_type)]
        if self.inp.budget <= 0:
            return "max_surge"
        if self.live_surge >= self.inp.budget:
            return "busy"
        cap = self.inp.max_instances
        if cap is not None and sum(self.live_by_type.values()) >= cap:
            return "max_instances"
        why = "max_instances"
        for t in options:
            if t.max_instances is not None and self.live_by_type.get(t.name, 0) >= t.max_instances:
                continue
            cost_cap = self.inp.max_cost_per_hour
            if cost_cap is not None and self.cost + t.price_per_hour > cost_cap + 1e-9:
                why = "max_cost_per_hour"
                continue
            verdict = self.inp.judge(t.name, [b])
            if not (verdict[0][0] and verdict[0][1] >= thr * (1 - EPS)):
                return "unfit"
            self._open(t, b, blocked)
            return None if self._on_paper(b, thr, gpu) else "unfit"
        return why

    def _open(self, t: TypeInfo, b: PlannedServer, blocked: GpuKey) -> None:
        slot = self.taken.take(f"{self.inp.fleet}-{t.name}-surge")
        self.virtual.append(Virtual(slot, t, [[] for _ in range(t.gpus)]))
        self.live_surge += 1
        self.live_by_type[t.name] = self.live_by_type.get(t.name, 0) + 1
        self.cost += t.price_per_hour
        self.launches.append(
            (slot, t.name, f"surge: stand-in for {b.name} while {blocked[0]} GPU {blocked[1]} changes")
        )

    def _force(self, pick: Pick, limit: str) -> None:
        """Break-before-make: the servers in the way go, smallest share first, until the planned
        servers of the GPU can start."""
        key = pick.blockage.key
        gone: list[PlannedServer] = []
        for b in sorted(pick.blockage.blockers, key=lambda s: (s.mps_percent, s.name)):
            self.tick.force_out([b.name])
            gone.append(b)
            self.tick.start([key])
            if not self.tick.unstarted(key):
                break
        names = tuple(s.name for s in gone)
        detail = (
            f"break-before-make on {key[0]} GPU {key[1]}: {', '.join(names)} removed before their "
            f"replacements are ready ({limit} leaves no room for surge)"
        )
        self.notes.append(detail)
        workloads = tuple(sorted({s.workload for s in gone}))
        self.breaches.append(
            Breach(slot=key[0], gpu=key[1], servers=names, workloads=workloads, limit=limit, detail=detail)
        )

    def plan(self) -> SurgePlan:
        return SurgePlan(
            launches=tuple(self.launches),
            keep=frozenset(self.keep),
            breaches=tuple(self.breaches),
            notes=tuple(self.notes),
            stand_ins=tuple(self.started),
            bursts=tuple(self.bursts),
        )


def allocate(picks: Iterable[Pick], inp: SurgeInput, tick: Tick) -> SurgePlan:
    """Stand-ins for every pick's needs, in pick order, then for capacity that serves sooner (see
    the module docstring); starts those that go on ready GPUs and forces out blockers a limit
    leaves without one, both on `tick`."""
    alloc = _Allocator(inp, tick)
    for pick in picks:
        alloc.serve(pick)
    alloc.early()
    return alloc.plan()
