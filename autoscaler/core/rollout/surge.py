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
server gets stand-ins in the MPS share that ready GPUs at rest leave free (of the same GPU type, at
its share or the free share if less, at the largest batch up to its planned one that meets its
budget there: a batch chosen for more share can miss it in less), each started only where the model says
it and every neighbour stay within their latency budgets, every planned neighbour still carries
the rate it is planned for (and its workload's planned servers its demand), and no floor breaks (`Tick.fits_beside`, `keep_rates`; a planned
neighbour slowed below its rate can be a move's new capacity, whose old servers then never leave,
so the move never starts and the burst waiting for it never goes): capacity in seconds, with no boot and no extra cost. They carry what the model predicts, possibly
less than the planned server, until the shortfall is covered; what they cannot carry falls to
surge instances and the planned launches. Like every stand-in they leave once the planned server
serves, so the next regular plan absorbs them (or retires them when the burst is over). A late
server tries every such GPU, and most refuse it: where the judge can say so without a judgement
(rollout_types.Refusals: it misses its budget alone and the GPU can only slow it down, or its MIG
units are taken there), no candidate is judged (at 1,000 instances, 130,000 judgements a re-plan
tick became 19,000).

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

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

from autoscaler.core.layout.layout_types import PlannedServer
from autoscaler.core.rollout.blocking import Pick
from autoscaler.core.rollout.burst_memo import passing_batches
from autoscaler.core.rollout.rollout import EPS, Amounts, GpuKey, Tick, original_of
from autoscaler.core.rollout.surge_types import (
    SURGE_SLOT,
    Breach,
    SurgeInput,
    SurgePlan,
    SurgeSlot,
    TypeInfo,
    is_surge_slot,
    surge_budget,
)

BURST_MIN_SHARE = 5.0  # MPS percent: a burst stand-in in less share carries too little to be worth a process

__all__ = ["Breach", "SurgeInput", "SurgePlan", "SurgeSlot", "TypeInfo", "allocate", "is_surge_slot", "surge_budget"]


@dataclass
class _Virtual:
    """A surge instance not ready yet (or launched now): stand-ins are packed onto it on paper each
    tick, the same way every tick while it boots, and started once it is ready."""

    slot: str
    info: TypeInfo
    gpus: list[list[PlannedServer]] = field(default_factory=list)
    since: float = math.inf  # launch time (inf: launched this tick, or a planned instance)


class _Allocator:
    def __init__(self, inp: SurgeInput, tick: Tick) -> None:
        self.inp, self.tick = inp, tick
        self.names = set(inp.names)
        copies = [(k, s) for k, servers in tick.on.items() for s in servers if original_of(s.name) is not None]
        self.carried = Amounts()  # per original: what its stand-ins carry
        self.gained = Amounts()  # per workload: stand-ins started, not ready yet (or started this tick)
        for _, c in copies:
            self.carried[original_of(c.name) or ""] += c.predicted_throughput_rps
            if c.name not in tick.inp.ready:
                self.gained[c.workload] += c.predicted_throughput_rps
        wanted = {t.name for g in tick.gpus.values() for t in g.wanted}
        self.orphans = [(k, s) for k, s in copies if original_of(s.name) not in wanted]  # their plan changed
        self.spare = {s.slot for s in inp.spare}
        self.enlisted = {k[0] for k, _ in copies if k[0] in self.spare}  # spares that hold stand-ins
        self.keep = {k[0] for k, _ in copies if is_surge_slot(k[0])} | self.enlisted
        self.virtual = [_Virtual(s.slot, self._info(s.instance_type), since=s.since) for s in inp.slots if not s.ready]
        self.virtual += [self._planned(slot, itype, servers) for slot, itype, servers in inp.booting]
        self.virtual += [_Virtual(s.slot, self._info(s.instance_type), since=s.since) for s in inp.spare if not s.ready]
        for v in self.virtual:
            v.gpus = v.gpus or [[] for _ in range(v.info.gpus)]
        self.live_surge = len(inp.slots) + len(self.enlisted)
        self.live_by_type = dict(inp.live_by_type)
        self.cost = inp.cost_per_hour
        self.launches: list[tuple[str, str, str]] = []
        self.breaches: list[Breach] = []
        self.notes: list[str] = []
        self.started: list[str] = []
        self.bursts: list[str] = []  # stand-ins started in free share for capacity that serves sooner
        self.taken = set(inp.taken_slots)
        self.lenders = self._lenders()
        self.at_rest: dict[GpuKey, tuple[int, bool]] = {}  # per GPU: (Tick.version, at rest then)
        self.roomy: dict[str, tuple[int, list[GpuKey]]] = {}  # per GPU type: (Tick.commits, `_roomy`)
        self.probes: dict[tuple[PlannedServer, str], list[PlannedServer]] = {}  # `_probes`
        self.misses: dict[tuple[PlannedServer, str, float], bool] = {}  # `_refused`: missed alone, per share
        self.alone: dict[
            tuple[PlannedServer, str, float], frozenset[int]
        ] = {}  # `_missed_alone`, per (late server, type, share)
        self.temporary = sorted(
            (k for k in tick.gpus if self._temporary(k[0])), key=lambda k: (not is_surge_slot(k[0]), k)
        )

    def _planned(self, slot: str, itype: str, servers: Sequence[PlannedServer]) -> _Virtual:
        """A booting planned instance on paper: its GPUs hold its planned servers."""
        info = self._info(itype)
        gpus: list[list[PlannedServer]] = [[] for _ in range(info.gpus)]
        for v in servers:
            gpus[min(v.gpu_index, info.gpus - 1)].append(v)
        return _Virtual(slot, info, gpus)

    def _info(self, itype: str) -> TypeInfo:
        return self.inp.types.get(itype) or TypeInfo(name=itype, gpu=itype, gpus=1, price_per_hour=0.0)

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

    def _stand_in(self, b: PlannedServer, slot: str, gpu: int) -> PlannedServer:
        name, index = self._fresh(b, slot)
        return replace(b, name=name, gpu_index=gpu, index=index, replaces="")

    def _fresh(self, b: PlannedServer, slot: str) -> tuple[str, int]:
        """A stand-in's name (`<b>-s<k>`, the first k no server has) and a port index free on `slot`."""
        k = 0
        while f"{b.name}-s{k}" in self.names:
            k += 1
        keys = self.tick.slot_keys.get(slot, ())
        used = {s.index for key in keys for s in self.tick.on[key]}
        used |= {s.index for key in keys for s in self.tick.gpus[key].wanted}
        return f"{b.name}-s{k}", next(i for i in range(len(used) + 1) if i not in used)

    def _try_gpu(self, key: GpuKey, b: PlannedServer, thr: float) -> bool:
        """Start a stand-in for b on `key` in the first of its shapes (`_shapes`) where it carries
        at least b's `thr`."""
        room = 100.0 - sum(s.mps_percent for s in self.tick.on[key])
        if self._refused(key, b, room):
            return False
        for cand in self._shapes(self._stand_in(b, key[0], key[1]), self.tick.gpus[key].instance_type, room):
            got = self.tick.fits_beside(key, cand)
            if got is not None and got >= thr * (1 - EPS):
                break
        else:
            return False
        cand = replace(cand, predicted_throughput_rps=got)
        if not self.tick.try_start(key, cand):
            return False
        self.names.add(cand.name)
        self.started.append(cand.name)
        self.carried[b.name] += got
        self.gained[b.workload] += got
        self._enlist(key[0])
        return True

    def _shapes(self, b: PlannedServer, itype: str, room: float) -> list[PlannedServer]:
        """The ways a copy of b may run on a GPU of `itype` with `room` MPS share free: in a MIG
        slice, the same slice at each allowed start (its planned one first: the units free beside
        another GPU's cut are rarely the ones b was planned in); otherwise at b's share, or all the
        room there is if that is more."""
        starts = self._info(itype).starts(b.mig_profile) if b.mig_profile is not None else ()
        if starts:
            return [b, *(replace(b, mig_start=s) for s in starts if s != b.mig_start)]
        return [replace(b, mps_percent=share) for share in sorted({b.mps_percent, max(b.mps_percent, room)})]

    def _temporary(self, slot: str) -> bool:
        return is_surge_slot(slot) or slot in self.spare

    def _may_use(self, slot: str) -> bool:
        """A surge instance, or a spare already holding stand-ins or within the surge budget."""
        return slot not in self.spare or slot in self.enlisted or self.live_surge < self.inp.budget

    def _enlist(self, slot: str) -> None:
        """A surge instance or spare that holds a stand-in stays; a spare counts against the budget."""
        if slot in self.spare and slot not in self.enlisted:
            self.enlisted.add(slot)
            self.live_surge += 1
            self.notes.append(f"surge: {slot}, no longer planned, stays as a surge instance for stand-ins")
        if self._temporary(slot):
            self.keep.add(slot)

    def _lenders(self) -> dict[str, list[GpuKey]]:
        """Per GPU type, the ready planned GPUs that may lend room (not surge instances, some
        server wanted there), in key order: what `_lendable` filters, found once a tick."""
        out: dict[str, list[GpuKey]] = {}
        for key, g in sorted(self.tick.gpus.items()):
            if not is_surge_slot(key[0]) and g.wanted:
                out.setdefault(self._info(g.instance_type).gpu, []).append(key)
        return out

    def _lendable(self, gpu: str, blocked: GpuKey | None = None) -> list[GpuKey]:
        """Ready planned GPUs of GPU type `gpu` at rest (running exactly what the layout wants)."""
        return [key for key in self.lenders.get(gpu, ()) if key != blocked and self._rests(key)]

    def _rests(self, key: GpuKey) -> bool:
        """Whether the GPU runs exactly what the layout wants there, judged again only once what it
        runs has changed (Tick.version)."""
        version = self.tick.version[key]
        seen = self.at_rest.get(key)
        if seen is None or seen[0] != version:
            wanted = self.tick.gpus[key].wanted
            seen = (version, sorted(s.agent_key() for s in self.tick.on[key]) == sorted(s.agent_key() for s in wanted))
            self.at_rest[key] = seen
        return seen[1]

    def _borrow(self, b: PlannedServer, thr: float, gpu: str, blocked: GpuKey) -> bool:
        return any(self._try_gpu(key, b, thr) for key in self._lendable(gpu, blocked))

    def _burst(self, t: PlannedServer, gap: float, gpu: str) -> float:
        """Burst into free share (module docstring, "Bursting"): stand-ins for `t` in the MPS share
        ready GPUs at rest leave free, each carrying what the model says it can there with every
        neighbour still within its budget, until they cover `gap`; returns what they carry."""
        got = 0.0
        for key in self._lendable(gpu) if t.mig_profile is not None else self._roomy(gpu):
            if got >= gap * (1 - EPS):
                break
            got += self._burst_on(key, t)
        return got

    def _roomy(self, gpu: str) -> list[GpuKey]:
        """The GPUs `_lendable` gives with BURST_MIN_SHARE free at least: the only ones where an
        MPS burst stand-in may go (`_burst_fit`). Found again only after a GPU changed."""
        seen = self.roomy.get(gpu)
        if seen is None or seen[0] != self.tick.commits:
            free = [k for k in self._lendable(gpu) if self._free(k) >= BURST_MIN_SHARE]
            seen = self.roomy[gpu] = (self.tick.commits, free)
        return seen[1]

    def _free(self, key: GpuKey) -> float:
        return 100.0 - sum(s.mps_percent for s in self.tick.on[key])

    def _burst_on(self, key: GpuKey, t: PlannedServer) -> float:
        """One burst stand-in for `t` on `key` (`_burst_fit`; in MPS share, at least
        BURST_MIN_SHARE); its judged throughput, 0 where none fits."""
        got, cand = self._burst_fit(key, t)
        if not got or cand is None or not self.tick.try_start(key, replace(cand, predicted_throughput_rps=got)):
            return 0.0
        self.names.add(cand.name)
        self.started.append(cand.name)
        self.bursts.append(cand.name)
        self.carried[t.name] += got
        self.gained[t.workload] += got
        return got

    def _burst_fit(self, key: GpuKey, t: PlannedServer) -> tuple[float | None, PlannedServer | None]:
        """A burst stand-in for `t` that fits on `key`, and its judged throughput: in t's slice at
        the first allowed start the GPU's cut leaves free on a MIG GPU (a slice is whole or
        nothing); otherwise at t's share or the free share if less, at the largest batch up to t's
        that the model lets it serve there (t's batch was chosen for t's share: in less share it
        can miss its budget where a smaller batch still carries most of what that share can)."""
        itype = self.tick.gpus[key].instance_type
        if t.mig_profile is not None and self._info(itype).starts(t.mig_profile):
            if self.tick.refuses_all(key, self._probes(t, itype)):
                return None, None  # every start taken or refused (Tick.refuses): no candidate is made
            for cand in self._shapes(self._stand_in(t, key[0], key[1]), itype, 0.0):
                if got := self.tick.fits_beside(key, cand, keep_rates=True):
                    return got, cand
            return None, None
        share = min(t.mps_percent, self._free(key))
        if share < BURST_MIN_SHARE:
            return None, None
        name, index = self._fresh(t, key[0])
        scaled = t.predicted_throughput_rps * share / t.mps_percent  # what a model-free judge credits

        def make(batch: int) -> PlannedServer:
            return replace(
                t,
                name=name,
                gpu_index=key[1],
                index=index,
                replaces="",
                mps_percent=share,
                batch=batch,
                predicted_throughput_rps=scaled,
            )

        missed = self._missed_alone(t, itype, share, make) if self.tick.only_slow(key, share) else frozenset()
        if len(missed) >= t.batch:
            return None, None  # the judge would refuse it at every batch (Tick.refuses): none is asked
        sig, family = (t, name, index, share, scaled), (t, share, scaled)
        trials = passing_batches(self.tick, key, make, t.batch, sig=sig, family=family, name=name, refused=missed)
        for batch in trials:
            if got := self.tick.fits_beside(key, make(batch), keep_rates=True):  # the judge refused the others
                return got, make(batch)
        return None, None

    def _refused(self, key: GpuKey, b: PlannedServer, room: float) -> bool:
        """Whether the judge refuses every shape `_try_gpu` would try for b on `key`, said without
        a judgement (rollout_types.Refusals): on MIG each start's slice (`_probes`); on MPS each
        share, missed alone (found once a tick per share) on a GPU that can only slow it down."""
        if self.tick.refusal is None:
            return False
        itype = self.tick.gpus[key].instance_type
        if b.mig_profile is not None and self._info(itype).starts(b.mig_profile):
            return self.tick.refuses_all(key, self._probes(b, itype))
        refusal = self.tick.refusal
        for share in sorted({b.mps_percent, max(b.mps_percent, room)}):  # `_shapes` on MPS
            if (b, itype, share) not in self.misses:
                self.misses[(b, itype, share)] = refusal.misses_alone(itype, replace(b, mps_percent=share))
            if not (self.misses[(b, itype, share)] and self.tick.only_slow(key, share)):
                return False
        return True

    def _probes(self, t: PlannedServer, itype: str) -> list[PlannedServer]:
        """t's slice at each start `_shapes` tries on `itype`, made once a tick: a refusal reads no
        name, GPU index, port index or predecessor (rollout_types.Refusals), so one probe per
        start stands for the stand-in on every GPU."""
        at = (t, itype)
        if at not in self.probes:
            self.probes[at] = (
                [replace(c, replaces="") for c in self._shapes(t, itype, 0.0)] if self.tick.refusal else []
            )
        return self.probes[at]

    def _missed_alone(
        self, t: PlannedServer, itype: str, share: float, make: Callable[[int], PlannedServer]
    ) -> frozenset[int]:
        """The batches at which a burst stand-in for `t` in `share` misses its budget alone
        (rollout_types.Refusals.misses_alone), found once a tick per late server, type and share:
        the answer reads no name or port, so every GPU with that much room shares it."""
        refusal = self.tick.refusal
        if refusal is None:
            return frozenset()
        at = (t, itype, share)
        if at not in self.alone:
            self.alone[at] = frozenset(b for b in range(t.batch, 0, -1) if refusal.misses_alone(itype, make(b)))
        return self.alone[at]

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
        prefix = f"{self.inp.fleet}-{t.name}-surge"
        n = 1 + max(
            (int(m.group(1)) for s in self.taken if s.startswith(prefix) and (m := SURGE_SLOT.search(s))), default=-1
        )
        slot = f"{prefix}{n}"
        self.taken.add(slot)
        self.virtual.append(_Virtual(slot, t, [[] for _ in range(t.gpus)]))
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
