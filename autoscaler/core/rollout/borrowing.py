"""Stand-ins on ready GPUs (surge.py's module docstring, 1 and 2): the surge allocator's state, the
ready GPUs that may lend room (planned GPUs at rest, in key order), the shapes a copy of a planned
server may take there, and the trial of one GPU, refused without a judgement where the judge can
say so. Pure; surge.py places stand-ins in its order of preference, bursting.py bursts into free
share.

A blocked move's stand-in tries every ready GPU of its type at rest, and on a fleet at rest nearly
all of them are full: its share pushes the GPU past 100 %, MPS splits the shares, and the stand-in
or a server already there misses its budget, or the stand-in carries less than its planned server
(at 2,000 instances, a re-plan tick's 43,470 trials all failed, 43,320 of them past 100 %). Such a
GPU is not always refused (the judge accepts some over-subscribed trials, and the floors may allow
them), so none is skipped for its shares alone: the judge's most hopeful verdict decides
(rollout_types.Bounds, crowding.at_best: each server alone at its split share is never judged
worse beside the others): it rules out 39,913 of those trials without a judgement. So is a trial
whose stand-in misses its budget even alone, on a GPU that can only slow it down
(rollout_types.Refusals).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from autoscaler.core.layout.layout_types import PlannedServer
from autoscaler.core.layout.slots import SlotNames, surge_stem
from autoscaler.core.rollout.rollout import EPS, Amounts, GpuKey, Tick, original_of
from autoscaler.core.rollout.surge_types import Breach, SurgeInput, TypeInfo, is_surge_slot

__all__ = ["Borrowing", "Virtual"]


@dataclass
class Virtual:
    """A surge instance not ready yet (or launched now): stand-ins are packed onto it on paper each
    tick, the same way every tick while it boots, and started once it is ready."""

    slot: str
    info: TypeInfo
    gpus: list[list[PlannedServer]] = field(default_factory=list)
    since: float = math.inf  # launch time (inf: launched this tick, or a planned instance)


class Borrowing:
    """The surge allocator's state for one tick, and stand-ins on ready GPUs (module docstring)."""

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
        self.virtual = [Virtual(s.slot, self._info(s.instance_type), since=s.since) for s in inp.slots if not s.ready]
        self.virtual += [self._planned(slot, itype, servers) for slot, itype, servers in inp.booting]
        self.virtual += [Virtual(s.slot, self._info(s.instance_type), since=s.since) for s in inp.spare if not s.ready]
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
        self.taken = SlotNames(inp.taken_slots, surge_stem, inp.slot_tops)  # the surge slots' names: Surge._open
        self.lenders = self._lenders()
        self.at_rest: dict[GpuKey, tuple[int, bool]] = {}  # per GPU: (Tick.version, at rest then)
        self.roomy: dict[str, tuple[int, list[GpuKey]]] = {}  # per GPU type: (Tick.commits, `_roomy`)
        self.resting: dict[str, tuple[int, list[GpuKey]]] = {}  # per GPU type: (Tick.commits, `_lendable`)
        self.probes: dict[tuple[int, str], tuple[PlannedServer, list[PlannedServer]]] = {}  # `_probes`, by id(t)
        # `_refused`, per (id of b, type, share) with b held: whether b missed alone, and its probe
        self.shares: dict[tuple[int, str, float], tuple[PlannedServer, bool, PlannedServer]] = {}
        self.alone: dict[
            tuple[PlannedServer, str, float], frozenset[int]
        ] = {}  # `_missed_alone`, per (late server, type, share)
        self.temporary = sorted(
            (k for k in tick.gpus if self._temporary(k[0])), key=lambda k: (not is_surge_slot(k[0]), k)
        )

    def _planned(self, slot: str, itype: str, servers: Sequence[PlannedServer]) -> Virtual:
        """A booting planned instance on paper: its GPUs hold its planned servers."""
        info = self._info(itype)
        gpus: list[list[PlannedServer]] = [[] for _ in range(info.gpus)]
        for v in servers:
            gpus[min(v.gpu_index, info.gpus - 1)].append(v)
        return Virtual(slot, info, gpus)

    def _info(self, itype: str) -> TypeInfo:
        return self.inp.types.get(itype) or TypeInfo(name=itype, gpu=itype, gpus=1, price_per_hour=0.0)

    # -- stand-ins on ready GPUs ---------------------------------------------------------------------
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
        if self._refused(key, b, room, thr):
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
        """Ready planned GPUs of GPU type `gpu` at rest (running exactly what the layout wants),
        found again only after a GPU changed (Tick.commits): each blocked move asks."""
        seen = self.resting.get(gpu)
        if seen is None or seen[0] != self.tick.commits:
            seen = self.resting[gpu] = (self.tick.commits, [k for k in self.lenders.get(gpu, ()) if self._rests(k)])
        return seen[1] if blocked is None else [key for key in seen[1] if key != blocked]

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

    def _refused(self, key: GpuKey, b: PlannedServer, room: float, thr: float) -> bool:
        """Whether every shape `_try_gpu` would try for b on `key` surely fails, said without a
        judgement: on MIG each start's slice (`_probes`, rollout_types.Refusals); on MPS each
        share (b's, then all the room if that is more) misses alone on a GPU that can only slow
        it down, or at best fails or carries less than `thr` there (`_refused_at`)."""
        if self.tick.refusal is None and self.tick.bounds is None:
            return False
        itype = self.tick.gpus[key].instance_type
        if b.mig_profile is not None and self._info(itype).starts(b.mig_profile):
            return self.tick.refuses_all(key, self._probes(b, itype))
        share = b.mps_percent
        refused = self._refused_at(key, b, itype, share, thr)
        return refused and (room <= share or self._refused_at(key, b, itype, room, thr))

    def _refused_at(self, key: GpuKey, b: PlannedServer, itype: str, share: float, thr: float) -> bool:
        """b at `share` misses its budget alone on a GPU that can only slow it down
        (rollout_types.Refusals), or its stand-in at best may not start on `key` or carries less
        than `thr` (Tick.short_of, rollout_types.Bounds: on a full GPU, where MPS splits the
        shares, nearly every trial). Whether b misses alone and its probe are found once a tick
        per share, by b's identity (b held beside them): a stand-in asks for each GPU of its type,
        and hashing a server's fields at each ask cost more than the answer read from them. The
        probe reads as the stand-in: neither reads a name, GPU index, port index or predecessor."""
        at = (id(b), itype, share)
        seen = self.shares.get(at)
        if seen is None or seen[0] is not b:
            refusal = self.tick.refusal
            misses = refusal is not None and refusal.misses_alone(itype, replace(b, mps_percent=share))
            seen = self.shares[at] = (b, misses, replace(b, mps_percent=share, replaces=""))
        if seen[1] and self.tick.only_slow(key, share):
            return True
        if self.tick.bounds is None or b.mig_profile is not None:
            return False
        return self.tick.short_of(key, seen[2], thr * (1 - EPS))

    def _probes(self, t: PlannedServer, itype: str) -> list[PlannedServer]:
        """t's slice at each start `_shapes` tries on `itype`, made once a tick: a refusal reads no
        name, GPU index, port index or predecessor (rollout_types.Refusals), so one probe per
        start stands for the stand-in on every GPU. Found by t's identity (t held beside them):
        a burst asks once for each GPU it tries, and hashing a server's fields each time cost more
        than the refusal read by kind of room (judged.py refuses_all) it leads to."""
        at = (id(t), itype)
        seen = self.probes.get(at)
        if seen is None or seen[0] is not t:
            made = [replace(c, replaces="") for c in self._shapes(t, itype, 0.0)] if self.tick.refusal else []
            seen = self.probes[at] = (t, made)
        return seen[1]
