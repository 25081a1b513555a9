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

Each GPU's judged state (what it runs, the judge's word on it, the floors' accounting) is
judged.py's `Judged`, which `Tick` extends with these steps.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from autoscaler.core.layout.layout_types import PlannedServer, is_stand_in
from autoscaler.core.rollout.judged import Judged, Part, loading
from autoscaler.core.rollout.rollout_types import (
    EPS,
    Amounts,
    Gpu,
    GpuKey,
    Judge,
    RolloutInput,
    RolloutStep,
    original_of,
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


class Tick(Judged):
    """The assignment being decided for one tick, each GPU's judged capacity kept current.

    Drive it as reconcile does: `stop()`, `start()`, then `blockages()`; surge.py may then
    `try_start` stand-ins and `force_out` blockers; `result()` gives the RolloutStep."""

    # -- 1. stop ------------------------------------------------------------------------------------
    def stop(self) -> None:
        """Every retiring server leaves (or drains) if no floor breaks without it: the originals,
        round after round until a round releases none (one leaving can speed up a neighbour),
        then the stand-ins. A round asks again only the servers refused before some release
        since: `_release` reads only what a release commits, and the retiring servers and their
        order stay as they were (a release starts nothing, so no GPU's planned servers change)."""
        # each with `commits` when its release was last refused (-1: not asked yet)
        todo = [(key, s, -1) for key, s in self._retiring(stand_ins=False)]
        while todo:
            left = []
            for key, s, refused in todo:
                if refused != self.commits:
                    if self._release(key, s):
                        continue
                    refused = self.commits
                left.append((key, s, refused))
            if len(left) == len(todo):
                break
            todo = left
        for key, s in self._retiring(stand_ins=True):
            self._release(key, s)

    def _retiring(self, stand_ins: bool) -> list[tuple[GpuKey, PlannedServer]]:
        """Servers the layout does not want where they run, those in a planned server's way first."""
        out = []
        for key, servers in self.on.items():
            wanted = self._wanted(key)
            mine = [
                s
                for s in servers
                if s.agent_key() not in wanted and s.name not in self.draining and is_stand_in(s.name) == stand_ins
            ]
            if mine:  # whether they are in a planned server's way, asked only of GPUs with some
                in_way = bool(self.unstarted(key))
                out += [(not in_way, key, s.name, s) for s in mine]
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
        return not self.runs.get((orig, agent))  # no server named so runs it anywhere

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
        within its latency budget is not enough for a guest in free share (bursting.py). A
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
    ) -> tuple[Part, float, list[tuple[PlannedServer, bool, float]]] | None:
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


def step(inp: RolloutInput) -> RolloutStep:
    """Stops then starts, without surge (see reconcile for the whole tick)."""
    tick = Tick(inp)
    tick.stop()
    tick.start()
    return tick.result()
