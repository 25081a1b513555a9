"""Changing the fleet without outage: the invariant, and what each GPU runs this tick. Pure.

**The invariant.** At every moment each workload's *ready capacity* (the summed predicted
throughput of its servers that report ready and are not draining, each judged by the performance
model beside the neighbours it actually loads its GPU with, see `loading`) stays at or above its
*floor*:

    floor(w)  = min(before(w), demand(w)), and at most planned(w) where planned(w) >= baseline(w)
    before(w) = max(baseline(w), its ready capacity now, less the stand-ins whose planned server
                already runs); baseline(w): w's capacity when the current change began
    demand(w) = max(w's observed rate now, the rate the target layout was planned for)
    planned(w) = what the target layout's servers for w carry (their predicted throughput)

demand is at least the current rate, so the floor is at least min(current rate, capacity before
the change): the promise in DESIGN.md. A change may lower a workload's capacity to what it still
needs (a scale-in), never below what it had while its replacement does not serve yet. The only
exception is a limit the policy sets (max_instances, max_cost_per_hour, the surge budget) that
makes keeping it impossible: surge.py then forces servers out (`Tick.force_out`) and reports a
Breach; `RolloutStep.short()` lists every workload a tick left below its floor.

`before` takes the larger of the two because capacity that arrived during a long change is the
capacity "before" the next part of it (a workload that grew must not be moved back down). The
capacity when the change began is threaded through the controller's state (`baseline`), since a
change spans several ticks.

A change that gives a workload at least what it had (planned >= baseline) needs no more than its
plan while it moves: the move ends at the plan, so a floor above it would keep the replaced
servers for good. demand can exceed the plan (the layout keeps the highest rate read while no
plan is cheaper; a limit or a scripted plan carries less than its rates): a MIG re-cut from a 3g
slice to a 4g one stalled on one read past the 4g, `before` counting the stand-in beside the old
slice (`make demo-mig`, 3 runs of 11). The cap is at least the baseline: the promise holds.

**Stand-ins** (surge.py: a planned server that cannot start where it is planned starts early
elsewhere, as `<name>-s<k>`) carry their workload's new capacity until the planned server serves:
while it has not started they stay whatever the floors say (the move is under way), and once it
serves they carry nothing (it took their load) and leave. One that runs where a later plan put its
own planned server (a burst in free share) is in that server's way: it leaves like any server the
layout does not want there, as the floors allow (`_waiting_for`). Surge is scaffolding, never
capacity to protect.

**One tick** (`Tick`), on the GPUs of ready instances:
1. stop: each running server the layout no longer wants there (it moved, was resized under a new
   name, its instance is surplus, it is a stand-in) leaves if no floor breaks without it; servers
   in the way of a planned server go first, stand-ins last, and one still starting stays while
   its workload's new servers are not ready either (it may serve first), unless it is in the way.
   With a gateway, a server that may leave drains first (the gateway sends it nothing new, so it
   no longer counts as capacity) and leaves its agent's assignment once the gateway reports it
   drained (`drained`). One the gateway is draining already (`draining`) is not ready (it takes
   no new requests) but is no starting server either: its drain goes on.
2. start: each planned server not running yet starts if its GPU can hold it once it serves: the
   judge predicts every server there within its latency budget (MPS shares above 100 % are judged
   as the proportional split MPS gives when all are busy, see colocation.py) and no floor breaks
   (a new neighbour slows the others down). Servers still starting there are judged as serving
   too, and none that would meet its budget without the newcomer may miss it with it (a planned
   server on a new instance starts in the same tick as a stand-in beside it). A resize hands over:
   the successor (`replaces`) takes its predecessor's load once ready, so the two are never judged
   busy together.
3. what could not start is blocked; blocking.py decides whether it waits or needs surge capacity.
A server started now counts as capacity only once it reports ready, so make-before-break takes two
ticks at least: start beside, then stop.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from autoscaler.core.layout.layout_types import PlannedServer, is_stand_in
from autoscaler.core.rollout.rollout_types import (
    EPS,
    Amounts,
    Gpu,
    GpuKey,
    Judge,
    RolloutInput,
    RolloutStep,
    original_of,
    refusal_of,
    shares_judge,
)

__all__ = [
    "EPS",
    "Amounts",
    "Gpu",
    "GpuKey",
    "Judge",
    "RolloutInput",
    "RolloutStep",
    "Tick",
    "loading",
    "original_of",
    "shares_judge",
    "step",
]


@dataclass(frozen=True, slots=True)
class _Part:
    """One GPU's judgement: capacity per workload (ready, not draining), what its ready stand-ins
    carry per original, and the servers within budget."""

    capacity: Amounts
    stand_ins: Mapping[str, float]
    ok: frozenset[str]


class Tick:
    """The assignment being decided for one tick, each GPU's judged capacity kept current.

    Drive it as reconcile does: `stop()`, `start()`, then `blockages()`; surge.py may then
    `try_start` stand-ins and `force_out` blockers; `result()` gives the RolloutStep."""

    def __init__(self, inp: RolloutInput) -> None:
        self.inp = inp
        self.refusal = refusal_of(inp.judge)
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
    ) -> _Part:
        return self._part(self._verdict(key, servers, serving), gone)

    def _part(self, verdict: Sequence[tuple[PlannedServer, bool, float]], gone: frozenset[str] = frozenset()) -> _Part:
        """A GPU's judgement (`_Part`) from the judge's word on the servers that load it."""
        cap = Amounts()
        stand: dict[str, float] = {}
        for s, good, thr in verdict:
            if good and s.name not in self.draining and s.name not in gone and s.name not in self.done:
                cap[s.workload] += thr
                if (orig := original_of(s.name)) is not None:
                    stand[orig] = stand.get(orig, 0.0) + thr
        return _Part(cap, stand, frozenset(s.name for s, good, _ in verdict if good))

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

    def _index(self, key: GpuKey, part: _Part, add: bool) -> None:
        for orig in part.stand_ins:
            keys = self.relieved.setdefault(orig, set())
            if add:
                keys.add(key)
            else:
                keys.discard(key)

    def _holds(self, key: GpuKey, part: _Part, relief: Mapping[str, float] | None = None) -> bool:
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

    def _commit(self, key: GpuKey, servers: list[PlannedServer], part: _Part) -> None:
        self.cap = self.cap.minus(self.parts[key].capacity).plus(part.capacity)
        self._index(key, self.parts[key], add=False)
        self._index(key, part, add=True)
        self.on[key], self.parts[key] = servers, part
        self.version[key] += 1
        self.commits += 1

    # -- 1. stop ------------------------------------------------------------------------------------
    def stop(self) -> None:
        """Every retiring server leaves (or drains) if no floor breaks without it: the originals
        until none more can (one leaving can speed up a neighbour), then the stand-ins."""
        while any([self._release(key, s) for key, s in self._retiring(stand_ins=False)]):
            pass
        for key, s in self._retiring(stand_ins=True):
            self._release(key, s)

    def _retiring(self, stand_ins: bool) -> list[tuple[GpuKey, PlannedServer]]:
        """Servers the layout does not want where they run, those in a planned server's way first."""
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

    def _release(self, key: GpuKey, s: PlannedServer) -> bool:
        starting = s.name not in self.inp.ready and s.name not in self.inp.draining
        if starting and s.workload in self.inp.pending and not self.unstarted(key):
            return False  # still starting: it may serve before its replacement does, and is in no one's way
        if self._waiting_for(s, key):
            return False  # a stand-in whose planned server has not started: its move is under way
        drained = self.inp.drained is None or s.name in self.inp.drained
        servers = [v for v in self.on[key] if v.name != s.name] if drained else self.on[key]
        part = self._judge(key, servers, frozenset({s.name}))
        if not self._holds(key, part, {s.workload: self._relief(s.name)}):
            return False
        (self.stopped if drained else self.draining).add(s.name)
        if drained and s.mig_profile is not None and s.mig_start is not None:
            self.freed.setdefault(key, []).append((s.mig_profile, s.mig_start))
        self._commit(key, servers, part)
        return True

    def _waiting_for(self, s: PlannedServer, key: GpuKey) -> bool:
        """A stand-in whose planned server is still waiting to start where it is planned, elsewhere
        than on the stand-in's own GPU: a later plan may put the planned server where its stand-in
        runs (a burst in free share), and there the stand-in is in its way, so waiting for it would
        wait for good (it leaves as any server the layout does not want there, floors permitting)."""
        orig = original_of(s.name)
        if orig is None or orig not in self.planned_names:
            return False
        if any(v.name == orig for v in self.unstarted(key)):
            return False
        agent = self.planned_keys.get(orig)
        return not any(v.name == orig and v.agent_key() == agent for servers in self.on.values() for v in servers)

    def force_out(self, names: Iterable[str]) -> None:
        """Break-before-make: these servers leave now, floors or not (a limit left no other way)."""
        names = set(names)
        for key, servers in self.on.items():
            if any(s.name in names for s in servers):
                kept = [s for s in servers if s.name not in names]
                self._commit(key, kept, self._judge(key, kept))
        self.forced |= names
        self.stopped |= names

    # -- 2. start -----------------------------------------------------------------------------------
    def start(self, keys: Iterable[GpuKey] | None = None) -> None:
        """Each planned server not running yet starts where its GPU can hold it (module docstring)."""
        for key in sorted(self.on) if keys is None else keys:
            for t in self.unstarted(key):
                self.try_start(key, t)

    def unstarted(self, key: GpuKey) -> list[PlannedServer]:
        running = {s.agent_key() for s in self.on[key]}
        return [t for t in self.gpus[key].wanted if t.agent_key() not in running]

    def try_start(self, key: GpuKey, t: PlannedServer) -> bool:
        """Start `t` on `key` if, once it serves, every server there is within budget and no floor
        breaks (see `_future`)."""
        if self._future(key, t) is None:
            return False
        servers = [*self.on[key], t]
        self._commit(key, servers, self._judge(key, servers))  # t loads nothing until it is ready
        self.started.add(t.name)
        return True

    def fits_beside(self, key: GpuKey, t: PlannedServer, *, keep_rates: bool = False) -> float | None:
        """t's judged throughput once it serves on `key`, if it could start there now, else None.

        With `keep_rates`, also None where t slows a server the layout wants on `key` (`_slows`):
        within its latency budget is not enough for a guest in free share (surge.py's bursts). A
        planned server slowed below what its workload needs may be a move's new capacity, which
        then carries less than the floor its old servers guard, so they stay, the move that
        waits for their room never starts, and a burst waiting for that move stays with it."""
        future = self._future(key, t)
        if future is None:
            return None
        if keep_rates and self._slows(key, future[2], t.name):
            return None
        return future[1]

    def _slows(self, key: GpuKey, verdict: Sequence[tuple[PlannedServer, bool, float]], guest: str) -> bool:
        """Whether, in `verdict`, a server the layout wants on `key` (not `guest`) carries less
        than its planned rate (`rate_rps`), or its workload's planned servers, which carried its
        demand, no longer do (the layout's capacity less what the guest costs them here)."""
        wanted = self.wanted_by_key.get(key)
        if wanted is None:
            wanted = self.wanted_by_key[key] = {v.agent_key(): v for v in self.gpus[key].wanted}
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

    def _future(
        self, key: GpuKey, t: PlannedServer
    ) -> tuple[_Part, float, list[tuple[PlannedServer, bool, float]]] | None:
        """The GPU once `t` serves, t's throughput then and the judge's word on every server there;
        None if t may not start.

        A resize hands over: the server t replaces (`t.replaces`, on this GPU) takes no load once
        t serves (see `loading`), so the GPU never runs old and new busy at once, and the floors
        are judged with t carrying that load.

        Servers still starting there are judged as serving, and each that would meet its budget
        without t must still meet it with t: a stand-in that started beside a planned server on a
        new instance, before that server was ready, put it over its budget once it was (ServeGen
        1-minute rows, second half: m-small-1 then counted for nothing, so m-small-2 never left
        the room m-large-0 was planned in, and m-large ran on its stand-in alone for 17 minutes
        of a rising rate)."""
        if any(s.name == t.name for k in self.slot_keys[key[0]] for s in self.on[k]):
            return None  # its old version still runs under the same name: the agent would restart it
        if self.refuses(key, t):
            return None
        servers = [*self.on[key], t]
        starting = frozenset(s.name for s in self.on[key] if s.name not in self.inp.ready)
        verdict = self._verdict(key, servers, starting | {t.name})
        part = self._part(verdict)
        idle = {t.replaces} if t.replaces else set()
        before = self.parts[key].ok | (self._starting_ok(key, starting) if starting else frozenset())
        if t.name not in part.ok or not before - idle <= part.ok or not self._holds(key, part):
            return None
        return part, next(thr for s, _, thr in verdict if s.name == t.name), verdict

    def judged_ok(self, key: GpuKey, t: PlannedServer) -> bool:
        """The judge's part of `_future`: t within its budget on `key` once it serves, and every
        server there that is within its budget now still within it. Depends on `content(key)`
        and t alone (every server on the GPU is judged as serving)."""
        if self.refuses(key, t):
            return False
        starting = frozenset(s.name for s in self.on[key] if s.name not in self.inp.ready)
        ok = self._part(self._verdict(key, [*self.on[key], t], starting | {t.name})).ok
        idle = {t.replaces} if t.replaces else set()
        before = self.parts[key].ok | (self._starting_ok(key, starting) if starting else frozenset())
        return t.name in ok and before - idle <= ok

    def refuses(self, key: GpuKey, t: PlannedServer) -> bool:
        """Whether the judge is sure, without a judgement, that t misses its budget on `key`
        beside what the GPU runs and holds (rollout_types.refusal_of): then t is no ok server in
        any verdict `_future` or `judged_ok` asks for, and they refuse it at once."""
        return self.refusal is not None and self.refusal.refuses(
            self.gpus[key].instance_type, t, [*self.on[key], *self._held(key)]
        )

    def refuses_all(self, key: GpuKey, ts: Sequence[PlannedServer]) -> bool:
        """`refuses` for every one of `ts` (and some there are), the rest of the GPU listed once."""
        if self.refusal is None or not ts:
            return False
        itype, beside = self.gpus[key].instance_type, [*self.on[key], *self._held(key)]
        return all(self.refusal.refuses(itype, t, beside) for t in ts)

    def only_slow(self, key: GpuKey, room: float) -> bool:
        """Whether what `key` runs can only slow down a newcomer of at most `room` MPS share
        (rollout_types.Refusals): then one that misses its budget alone misses it there too."""
        beside = [*self.on[key], *self._held(key)]
        return self.refusal is not None and self.refusal.only_slow(self.gpus[key].instance_type, beside, room)

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

    # -- 3. what is left ------------------------------------------------------------------------------
    def blocked(self) -> dict[GpuKey, tuple[PlannedServer, ...]]:
        return {k: tuple(u) for k in sorted(self.on) if (u := self.unstarted(k))}

    def in_the_way(self, key: GpuKey) -> tuple[PlannedServer, ...]:
        """The servers on a GPU that the layout does not want there and that still carry capacity."""
        wanted = {v.agent_key() for v in self.gpus[key].wanted}
        return tuple(s for s in self.on[key] if s.agent_key() not in wanted and s.name not in self.draining)

    def throughput(self, key: GpuKey, name: str) -> float:
        """A server's judged throughput where it runs now (0 if it misses its budget or is not ready)."""
        return next((thr for s, ok, thr in self._verdict(key, self.on[key]) if s.name == name and ok), 0.0)

    def result(self) -> RolloutStep:
        return RolloutStep(
            assign={k: tuple(v) for k, v in self.on.items()},
            started=frozenset(self.started),
            stopped=frozenset(self.stopped),
            draining=frozenset(self.draining),
            blocked=self.blocked(),
            before=self.before,
            after=dict(self.cap),
            floor=self.floor,
            baseline=self.baseline,
            forced=frozenset(self.forced),
            converged=self._converged(),
        )

    def _converged(self) -> bool:
        for key, servers in self.on.items():
            wanted = self.gpus[key].wanted
            if sorted(s.agent_key() for s in servers) != sorted(s.agent_key() for s in wanted):
                return False
            if any(s.name not in self.inp.ready for s in wanted):
                return False
        return not self.draining


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


def step(inp: RolloutInput) -> RolloutStep:
    """Stops then starts, without surge (see reconcile for the whole tick)."""
    tick = Tick(inp)
    tick.stop()
    tick.start()
    return tick.result()
