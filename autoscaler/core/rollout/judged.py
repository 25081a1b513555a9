"""The GPUs of one tick as judged, the state rollout.Tick keeps current: what each GPU runs, the
judge's word on it (each workload's ready capacity there, the servers within budget), the floors
and the stand-ins' relief, and what a newcomer's trial reads of a GPU (refusals said without a
judgement, its content). Pure; the invariant, and the steps that change this state (stop, start,
force out), are rollout.py's."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from autoscaler.core.layout.layout_types import PlannedServer
from autoscaler.core.rollout.rollout_types import (
    EPS,
    Amounts,
    GpuKey,
    RolloutInput,
    bounds_of,
    original_of,
    refusal_of,
    rooms_of,
)

__all__ = ["Judged", "Part", "loading"]


@dataclass(frozen=True, slots=True)
class Part:
    """One GPU's judgement: capacity per workload (ready, not draining), what its ready stand-ins
    carry per original, and the servers within budget."""

    capacity: Amounts
    stand_ins: Mapping[str, float]
    ok: frozenset[str]


class Judged:
    """Each GPU of a tick, what it runs and its judged capacity, kept current by `_commit`; the
    floors (rollout.py's module docstring). rollout.Tick drives it."""

    def __init__(self, inp: RolloutInput) -> None:
        self.inp = inp
        self.refusal = refusal_of(inp.judge)
        self.rooms = rooms_of(inp.judge) if self.refusal is not None else None  # a room keys refusals
        self.room_at: dict[GpuKey, tuple[int, Hashable | None]] = {}  # `_room`, per GPU version
        # `refuses_all` by (instance type, kind of room, id of the probes), with the probes held
        self.refused_in: dict[tuple[str, Hashable, int], tuple[Sequence[PlannedServer], bool]] = {}
        self.bounds = bounds_of(inp.judge)
        self.loaded: dict[GpuKey, tuple[int, list[PlannedServer] | None]] = {}  # `_loaded`, per GPU version
        self.gpus = {g.key: g for g in inp.gpus}
        self.slot_keys: dict[str, list[GpuKey]] = {}  # slot -> its GPUs' keys: one instance's GPUs, not all
        for g in inp.gpus:
            self.slot_keys.setdefault(g.key[0], []).append(g.key)
        self.version = dict.fromkeys(self.gpus, 0)  # per GPU, bumped by each change of what it runs
        self.commits = 0  # changes on any GPU: the floors' capacity (`cap`) moves only with them
        self.starting_ok: dict[GpuKey, tuple[int, frozenset[str]]] = {}  # `_starting_ok`, per GPU version
        self.wanted_by_key: dict[GpuKey, dict[tuple[object, ...], PlannedServer]] = {}  # `_slows`
        self.content_ids: dict[GpuKey, tuple[int, int]] = {}  # burst_memo: (version, id of `content`)
        self.shapes: dict[tuple[Hashable, str, int], tuple[str, Hashable] | None] = {}  # burst_memo: per family
        self.wanted: dict[GpuKey, frozenset[tuple[object, ...]]] = {}
        self.planned_names = {t.name for g in inp.gpus for t in g.wanted} | inp.elsewhere
        self.on: dict[GpuKey, list[PlannedServer]] = {g.key: list(g.running) for g in inp.gpus}
        self.runs: Counter[tuple[str, object]] = Counter()  # (name, agent_key) -> servers so on any GPU
        for servers in self.on.values():
            self._count(servers, 1)
        self.draining: set[str] = set()
        self.started: set[str] = set()
        self.stopped: set[str] = set()
        self.freed: dict[GpuKey, list[tuple[str, int]]] = {}  # MIG slices whose server left this tick
        self.forced: set[str] = set()
        self.planned_keys = {t.name: t.agent_key() for g in inp.gpus for t in g.wanted}
        running = {v.name for g in inp.gpus for v in g.running if self.planned_keys.get(v.name) == v.agent_key()}
        self.done = {  # stand-ins whose planned server runs and serves: their move is complete
            v.name for g in inp.gpus for v in g.running if (o := original_of(v.name)) in running and o in inp.ready
        }
        self.parts = {k: self._judge(k, v) for k, v in self.on.items()}
        self.pos = {k: i for i, k in enumerate(self.parts)}
        self.relieved: dict[str, set[GpuKey]] = {}  # original -> GPUs where ready stand-ins carry for it
        for k, p in self.parts.items():
            self._index(k, p, add=True)
        self.cap = Amounts.total(p.capacity for p in self.parts.values())
        self.before = dict(self.cap)
        self.baseline = dict(inp.baseline) if inp.baseline is not None else dict(self.cap)
        now = self.cap.minus(self._paired())
        self.floor = {w: self._floor(w, now) for w in set(self.cap) | set(self.baseline)}

    def _floor(self, w: str, now: Mapping[str, float]) -> float:
        """w's floor (module docstring): at most what its plan carries, where that is at least its
        capacity before the change."""
        base = self.baseline.get(w, 0.0)
        floor = min(max(base, now.get(w, 0.0)), self.inp.demand.get(w, math.inf))
        plan = (self.inp.planned or {}).get(w)
        return min(floor, plan) if plan is not None and plan >= base else floor

    # -- judging ----------------------------------------------------------------------------------
    def _verdict(
        self, key: GpuKey, servers: Sequence[PlannedServer], serving: frozenset[str] = frozenset()
    ) -> list[tuple[PlannedServer, bool, float]]:
        """The judge's word on the servers that load the GPU (`loading`), those in `serving` judged
        as if ready. A MIG slice holds its memory units while its server is assigned, loaded or
        not (starting, or handed over to a successor): such servers go to the judge too, after
        the loaded ones, so a cut that needs their units is no valid cut (colocation.py), and
        only the loaded ones' verdicts count. On MPS a handover frees the GPU at once; on MIG the
        successor needs free units, or a stand-in elsewhere (surge.py)."""
        ready = self.inp.ready  # the servers here that count as ready: not a union of every name in the fleet
        loaded = loading(servers, {s.name for s in servers if s.name in ready or s.name in serving}, self._wanted(key))
        names = {s.name for s in loaded}
        held = [s for s in servers if s.mig_profile is not None and s.name not in names]
        verdict = self.inp.judge(self.gpus[key].instance_type, [*loaded, *held, *self._held(key)]) if loaded else ()
        return [(s, good, thr) for s, (good, thr) in zip(loaded, verdict)]

    def _held(self, key: GpuKey) -> list[PlannedServer]:
        """The slices the GPU's agent still holds with no server assigned (Gpu.held), and those
        whose server leaves its assignment this tick, as servers that hold units and serve
        nothing: the agent destroys a slice only after its server stopped, and the controller
        cuts those units again only once the agent no longer reports it (the next tick at the
        earliest)."""
        return [
            PlannedServer(
                name=f"(held {p}@{s})",
                workload="",
                model="",
                gpu_index=key[1],
                index=-1,
                batch=1,
                mps_percent=0.0,
                mig_profile=p,
                mig_start=s,
            )
            for p, s in self.held_slices(key)
        ]

    def held_slices(self, key: GpuKey) -> list[tuple[str, int]]:
        """(profile, start) of the slices on `key` that hold units with no server (`_held`)."""
        return [*self.gpus[key].held, *self.freed.get(key, ())]

    def _wanted(self, key: GpuKey) -> frozenset[tuple[object, ...]]:
        if key not in self.wanted:
            self.wanted[key] = frozenset(v.agent_key() for v in self.gpus[key].wanted)
        return self.wanted[key]

    def _judge(
        self,
        key: GpuKey,
        servers: Sequence[PlannedServer],
        gone: frozenset[str] = frozenset(),
        serving: frozenset[str] = frozenset(),
    ) -> Part:
        return self._part(self._verdict(key, servers, serving), gone)

    def _part(self, verdict: Sequence[tuple[PlannedServer, bool, float]], gone: frozenset[str] = frozenset()) -> Part:
        """A GPU's judgement (`Part`) from the judge's word on the servers that load it."""
        cap = Amounts()
        stand: dict[str, float] = {}
        for s, good, thr in verdict:
            if good and s.name not in self.draining and s.name not in gone and s.name not in self.done:
                cap[s.workload] += thr
                if (orig := original_of(s.name)) is not None:
                    stand[orig] = stand.get(orig, 0.0) + thr
        return Part(cap, stand, frozenset(s.name for s, good, _ in verdict if good))

    def _paired(self) -> Amounts:
        """Per workload, what its ready stand-ins carry while their originals still run."""
        running = {s.name: s.workload for servers in self.on.values() for s in servers}
        out = Amounts()
        for part in self.parts.values():
            for orig, thr in part.stand_ins.items():
                if orig in running:
                    out[running[orig]] += thr
        return out

    def _relief(self, name: str) -> float:
        """What the ready stand-ins of `name` carry (summed in GPU order, over the GPUs that hold some)."""
        return sum(self.parts[k].stand_ins[name] for k in sorted(self.relieved.get(name, ()), key=self.pos.__getitem__))

    def _index(self, key: GpuKey, part: Part, add: bool) -> None:
        for orig in part.stand_ins:
            keys = self.relieved.setdefault(orig, set())
            if add:
                keys.add(key)
            else:
                keys.discard(key)

    def _holds(self, key: GpuKey, part: Part, relief: Mapping[str, float] | None = None) -> bool:
        """No workload on this GPU ends below its floor, or below where it is now if that is lower
        (less `relief`: the stand-ins of a server that leaves, see the module docstring). Relief
        only lowers the bar of a workload already below its floor: one at or above it never goes
        below it (two removals in one tick, the second with a stand-in's relief, did: a MIG re-cut
        whose earlier plan left an orphaned stand-in, found by the MIG property test)."""
        old = self.parts[key].capacity
        for w in set(old) | set(part.capacity):
            new = self.cap[w] - old[w] + part.capacity[w]
            floor, tol = self.floor.get(w, 0.0), EPS * (1.0 + self.cap[w])
            ref = floor if self.cap[w] >= floor - tol else min(floor, self.cap[w] - (relief or {}).get(w, 0.0))
            if new < ref - tol:
                return False
        return True

    def _commit(self, key: GpuKey, servers: list[PlannedServer], part: Part) -> None:
        self.cap = self.cap.minus(self.parts[key].capacity).plus(part.capacity)
        self._index(key, self.parts[key], add=False)
        self._index(key, part, add=True)
        self._count(self.on[key], -1)
        self._count(servers, 1)
        self.on[key], self.parts[key] = servers, part
        self.version[key] += 1
        self.commits += 1

    def _count(self, servers: Iterable[PlannedServer], by: int) -> None:
        """`runs` as `servers` join (1) or leave (-1) a GPU: an index by name and agent key, so
        whether a server runs somewhere is not a scan of the fleet."""
        for s in servers:
            at = (s.name, s.agent_key())
            self.runs[at] += by
            if not self.runs[at]:
                del self.runs[at]

    # -- what a trial reads of a GPU ----------------------------------------------------------------
    def refuses(self, key: GpuKey, t: PlannedServer) -> bool:
        """Whether the judge is sure, without a judgement, that t misses its budget on `key`
        beside what the GPU runs and holds (rollout_types.refusal_of): then t is no ok server in
        any verdict `_future` or `judged_ok` asks for, and they refuse it at once."""
        return self.refusal is not None and self.refusal.refuses(
            self.gpus[key].instance_type, t, [*self.on[key], *self._held(key)]
        )

    def refuses_all(self, key: GpuKey, ts: Sequence[PlannedServer]) -> bool:
        """`refuses` for every one of `ts` (and some there are), the rest of the GPU listed once.
        Where the judge names the GPU's kind of room (rollout_types.Rooms), the answer for `ts`
        (the same list object: a caller's probes, made once a tick) is found once per kind of
        room and read for every other GPU of that kind."""
        if self.refusal is None or not ts:
            return False
        itype = self.gpus[key].instance_type
        room = self._room(key, itype)
        if room is None:
            beside = [*self.on[key], *self._held(key)]
            return all(self.refusal.refuses(itype, t, beside) for t in ts)
        at = (itype, room, id(ts))
        seen = self.refused_in.get(at)
        if seen is None or seen[0] is not ts:
            beside = [*self.on[key], *self._held(key)]
            seen = self.refused_in[at] = (ts, all(self.refusal.refuses(itype, t, beside) for t in ts))
        return seen[1]

    def _room(self, key: GpuKey, itype: str) -> Hashable | None:
        """The judge's kind of room of `key` (rollout_types.Rooms), found again only once what the
        GPU runs or holds changed (a slice freed this tick commits a new version too)."""
        if self.rooms is None:
            return None
        seen = self.room_at.get(key)
        if seen is None or seen[0] != self.version[key]:
            seen = self.room_at[key] = (self.version[key], self.rooms.room_of(itype, [*self.on[key], *self._held(key)]))
        return seen[1]

    def only_slow(self, key: GpuKey, room: float) -> bool:
        """Whether what `key` runs can only slow down a newcomer of at most `room` MPS share
        (rollout_types.Refusals): then one that misses its budget alone misses it there too."""
        beside = [*self.on[key], *self._held(key)]
        return self.refusal is not None and self.refusal.only_slow(self.gpus[key].instance_type, beside, room)

    def short_of(self, key: GpuKey, t: PlannedServer, need: float) -> bool:
        """Whether t surely may not start on `key` (`_future` says None) or carries less than
        `need` there, said from the judge's most hopeful verdict on the GPU with t serving
        (rollout_types.Bounds) without a judgement: at best t misses its budget or carries less,
        or a server within budget there now misses it. False for a successor, on MIG, or where
        the judge cannot say."""
        if self.bounds is None or t.replaces or t.mig_profile is not None or self.gpus[key].held or self.freed.get(key):
            return False
        loaded = self._loaded(key)
        hope = self.bounds.hopeful(self.gpus[key].instance_type, [*loaded, t]) if loaded is not None else None
        if hope is None:
            return False
        if not hope[-1][0] or hope[-1][1] < need:
            return True
        if all(may for may, _ in hope):  # every server may meet its budget: none of them is short
            return False
        ok, maybe = self.parts[key].ok, {s.name for s, (may, _) in zip(loaded or (), hope) if may}
        return any(s.name in ok and s.name not in maybe for s in loaded or ())

    def _loaded(self, key: GpuKey) -> list[PlannedServer] | None:
        """The servers that load `key` beside a newcomer judged as serving, as `_future` judges
        them (every server there serving: `loading`), found once per GPU version; None where a
        MIG slice is assigned (its units go to the judge too)."""
        seen = self.loaded.get(key)
        if seen is None or seen[0] != self.version[key]:
            on = self.on[key]
            mig = any(s.mig_profile is not None for s in on)
            seen = self.loaded[key] = (
                self.version[key],
                None if mig else loading(on, {s.name for s in on}, self._wanted(key)),
            )
        return seen[1]

    def content(self, key: GpuKey) -> tuple[object, ...]:
        """What `judged_ok` reads of a GPU besides the newcomer: its type, servers, the layout's
        wants there, the slices it holds, and the servers within budget now."""
        starting = frozenset(s.name for s in self.on[key] if s.name not in self.inp.ready)
        before = self.parts[key].ok | (self._starting_ok(key, starting) if starting else frozenset())
        g = self.gpus[key]
        return (g.instance_type, tuple(self.on[key]), self._wanted(key), tuple(self.held_slices(key)), before)

    def _starting_ok(self, key: GpuKey, starting: frozenset[str]) -> frozenset[str]:
        """The servers on `key` within budget with those still starting judged as serving; judged
        again only once the GPU changed (`version`)."""
        seen = self.starting_ok.get(key)
        if seen is None or seen[0] != self.version[key]:
            seen = self.starting_ok[key] = (self.version[key], self._judge(key, self.on[key], serving=starting).ok)
        return seen[1]


def loading(
    servers: Sequence[PlannedServer], ready: Collection[str], wanted: Collection[tuple[object, ...]]
) -> list[PlannedServer]:
    """The servers that load a GPU: those ready (one still starting loads its model and runs no
    kernels), except a retiring one (its agent key not in `wanted`) whose successor (a ready
    server on the same GPU that `replaces` it) has taken over its load: the gateway sends it
    nothing new and it leaves at the next tick. That holds even if a later plan no longer wants
    the successor either: its load is still with the successor. Two servers that each name the
    other (a successor whose predecessor left, and a later server that took that name) cannot say
    which took over: both load the GPU, the cautious reading (layout never reuses such a name)."""
    names = {s.name: s for s in servers}
    taken = {
        s.replaces
        for s in servers
        if s.replaces and s.name in ready and getattr(names.get(s.replaces), "replaces", "") != s.name
    }
    return [s for s in servers if s.name in ready and (s.name not in taken or s.agent_key() in wanted)]
