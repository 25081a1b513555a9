"""Step 3 of reconcile: which servers each ready GPU runs after this tick. Pure.

rollout.Tick stops what is no longer needed and starts what fits (the invariant); blocking.resolve
tells moves that wait for capacity on its way from moves that would wait forever; surge.allocate
starts those early on borrowed room or surge instances, or, where a policy limit leaves no room
(or the surge budget is busy with moves that cannot finish: the fleet is frozen), removes the
servers in their way first and reports a Breach.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from autoscaler.core.fleet.lifecycle import BOOTING, Record, State
from autoscaler.core.layout.layout_types import Layout, PlannedServer, SlotSpec
from autoscaler.core.rollout.actions import FleetView, Launch, Limits, fleet_cost
from autoscaler.core.rollout.blocking import Blockage, Progress, resolve
from autoscaler.core.rollout.rollout import Gpu, GpuKey, Judge, RolloutInput, RolloutStep, Tick, original_of
from autoscaler.core.rollout.surge import SurgeInput, SurgePlan, SurgeSlot, allocate, is_surge_slot, surge_budget


@dataclass(frozen=True, slots=True)
class Moves:
    step: RolloutStep
    surge: SurgePlan


def plan_moves(
    layout: Layout,
    current: Mapping[str, Record],
    view: FleetView,
    limits: Limits,
    launches: Sequence[object],
    notes: list[str],
) -> Moves:
    """Stops, starts, and stand-ins where a move would otherwise wait forever (module docstring)."""
    rest = _at_rest(layout, current, view)
    if rest is not None and not _coming(current, launches, limits):
        return Moves(rest, SurgePlan())
    judge = limits.server_judge()
    tick = Tick(_rollout_input(layout, current, view, limits, judge))
    tick.stop()
    tick.start()
    blockages = []
    for k, waiting in tick.blocked().items():
        blockers, draining = _blockers(tick, k, waiting), [s.name for s in tick.on[k] if s.name in tick.draining]
        held = [f"{p}@{s}" for p, s in tick.held_slices(k)]
        if not blockers and (draining or held):  # what is in the way leaves by itself
            notes.append(
                f"make-before-break on {k[0]} GPU {k[1]}: {', '.join(s.name for s in waiting)} start once "
                + " and ".join(
                    ([f"{', '.join(draining)} drained"] if draining else [])
                    + ([f"its agent destroyed slice(s) {', '.join(held)}"] if held else [])
                )
            )
            continue
        blockages.append(Blockage(key=k, instance_type=tick.gpus[k].instance_type, waiting=waiting, blockers=blockers))
    frozen = _frozen(tick, current, launches)
    progress = _progress(layout, current, view, launches, tick, frozen)
    res = resolve(blockages, progress)
    for b, why in res.stuck:
        notes.append(f"move on {b.key[0]} GPU {b.key[1]} waits: {why}")
    for b in res.waiting:
        notes.append(
            f"make-before-break on {b.key[0]} GPU {b.key[1]}: {', '.join(s.name for s in b.waiting)} "
            f"start once {', '.join(s.name for s in b.blockers)} leave (their replacements are coming)"
        )
    inp = _surge_input(layout, current, view, limits, launches, judge, frozen)
    inp = replace(inp, late=(*inp.late, *_waiting_late(res.waiting, inp.late)), burst_only=rest is not None)
    plan = allocate(res.picks, inp, tick)
    notes.extend(plan.notes)
    step = tick.result()
    for w, gap in sorted(step.short().items()):
        notes.append(f"invariant: {w} is {gap:.1f} req/s below its floor {step.floor[w]:.1f} (a limit left no room)")
    notes.extend(_held(layout, tick, step))
    return Moves(step, plan)


def _held(layout: Layout, tick: Tick, step: RolloutStep) -> list[str]:
    """Retiring servers kept although every planned server of their workload serves: the plan
    carries less than the workload's floor (a forecast below the observed rate, or a plan whose
    predictions the co-location judges lower). They stay until the plan catches up; say so."""
    pending = tick.inp.pending
    planned = {s.agent_key() for _, s in layout.servers()}
    kept: dict[str, list[str]] = defaultdict(list)
    for servers in step.assign.values():
        handed = {s.replaces for s in servers if s.replaces}
        for s in servers:
            if s.agent_key() in planned or s.name in handed or s.name in step.draining:
                continue
            if s.workload not in pending:
                kept[s.workload].append(s.name)
    return [
        f"{w} keeps {', '.join(sorted(names))}: its planned servers serve but carry less than its floor "
        f"{step.floor.get(w, 0.0):.1f} req/s without them"
        for w, names in sorted(kept.items())
        if names and not any(original_of(n) for n in names)
    ]


def _coming(current: Mapping[str, Record], launches: Sequence[object], limits: Limits) -> bool:
    """With bursting on, instances launched now or still booting: a short workload's capacity on its
    way may be carried meanwhile in free share (surge.py), so the at-rest shortcut does not apply."""
    if not limits.burst:
        return False
    return any(isinstance(a, Launch) for a in launches) or any(r.state in BOOTING for r in current.values())


def _at_rest(layout: Layout, current: Mapping[str, Record], view: FleetView) -> RolloutStep | None:
    """The step when nothing is to move (most ticks): every instance is a planned one, and every
    ready one runs exactly its planned servers, all of them ready. None otherwise."""
    specs = {s.slot: s for s in layout.slots}
    assign: dict[GpuKey, tuple[PlannedServer, ...]] = {}
    for slot, rec in current.items():
        spec = specs.get(slot)
        if spec is None:
            return None
        if rec.state is not State.READY:
            continue
        applied = view.applied.get(slot, ())
        if sorted(v.agent_key() for v in applied) != sorted(v.agent_key() for v in spec.servers):
            return None
        if any(v.name not in view.ready_servers for v in spec.servers):
            return None
        for v in applied:
            assign[(slot, v.gpu_index)] = (*assign.get((slot, v.gpu_index), ()), v)
    return RolloutStep(
        assign=assign,
        started=frozenset(),
        stopped=frozenset(),
        draining=frozenset(),
        blocked={},
        before={},
        after={},
        floor={},
        baseline={},
        converged=True,
    )


def _rollout_input(
    layout: Layout, current: Mapping[str, Record], view: FleetView, limits: Limits, judge: Judge
) -> RolloutInput:
    booting = {s for s, r in current.items() if r.state is not State.READY}
    return RolloutInput(
        gpus=_ready_gpus(layout, current, view, limits),
        ready=view.ready_servers,
        demand=_demand(layout, view),
        judge=judge,
        baseline=view.baseline,
        drained=view.drained,
        draining=view.draining_book,
        pending=frozenset(s.workload for _, s in layout.servers() if s.name not in view.ready_servers),
        elsewhere=frozenset(s.name for slot, s in layout.servers() if slot in booting or slot not in current),
        planned=layout.capacity(),
    )


def _frozen(tick: Tick, current: Mapping[str, Record], launches: Sequence[object]) -> bool:
    """Nothing changes this tick and nothing is on its way (no instance booting or launching, no
    server starting, nothing draining). Then no blocked move may wait for another (whatever the
    estimates say, nothing will come), and one that waits for the surge budget would wait for ever
    (the surge in use serves moves that cannot finish either): the budget is then a limit that
    makes the invariant impossible to keep."""
    if tick.started or tick.stopped or tick.draining or launches:
        return False
    if any(r.state is not State.READY for r in current.values()):
        return False
    return not any(s.name not in tick.inp.ready for servers in tick.on.values() for s in servers)


def _blockers(tick: Tick, key: GpuKey, waiting: Sequence[PlannedServer]) -> tuple[PlannedServer, ...]:
    """The servers in the way, less those a waiting server replaces on this GPU (it will start
    beside them and take over their load: a handover), unless nothing else is in the way."""
    way = tick.in_the_way(key)
    replaced = {t.replaces for t in waiting}
    others = tuple(s for s in way if s.name not in replaced)
    return others if others else way


def _demand(layout: Layout, view: FleetView) -> dict[str, float]:
    """Per workload, max(observed rate, the rate the layout was planned for), whichever are known;
    with neither, what the layout's servers carry; 0 for a workload the layout no longer has."""
    planned = layout.capacity()
    names = set(planned) | set(layout.rates) | set(view.rates)
    names |= {s.workload for servers in view.applied.values() for s in servers}
    out = {}
    for w in names:
        known = [v for v in (view.rates.get(w), layout.rates.get(w)) if v is not None]
        out[w] = max(known) if known else planned.get(w, 0.0)
    return out


def _gpu_indices(spec: SlotSpec | None, applied: Sequence[PlannedServer], gpus: int) -> list[int]:
    idx = set(range(len(spec.gpus))) if spec is not None else set(range(gpus))
    return sorted(idx | {s.gpu_index for s in applied})


def _ready_gpus(layout: Layout, current: Mapping[str, Record], view: FleetView, limits: Limits) -> tuple[Gpu, ...]:
    """Every GPU of every ready instance: what it runs and what the layout wants on it."""
    specs = {s.slot: s for s in layout.slots}
    out: list[Gpu] = []
    for slot, rec in sorted(current.items()):
        if rec.state is not State.READY:
            continue
        spec, applied = specs.get(slot), view.applied.get(slot, ())
        info = limits.types.get(rec.instance_type)
        for i in _gpu_indices(spec, applied, info.gpus if info else 1):
            wanted = tuple(s for s in spec.servers if s.gpu_index == i) if spec else ()
            running = tuple(s for s in applied if s.gpu_index == i)
            held = tuple((p, s) for g, p, s in view.held_slices.get(slot, ()) if g == i)
            out.append(Gpu(key=(slot, i), instance_type=rec.instance_type, running=running, wanted=wanted, held=held))
    return tuple(out)


def _progress(
    layout: Layout,
    current: Mapping[str, Record],
    view: FleetView,
    launches: Sequence[object],
    tick: Tick,
    frozen: bool = False,
) -> Progress:
    """Where each workload's planned servers stand (blocking.Progress); with the fleet `frozen`,
    nothing is coming and nothing leaves by itself."""
    booting = _launch_times(current, [a for a in launches if isinstance(a, Launch)])
    running = {s.agent_key() for servers in tick.on.values() for s in servers}
    pending: dict[str, set[str]] = defaultdict(set)
    coming, never = set(), set()
    for slot, srv in layout.servers():
        if srv.name in view.ready_servers and srv.agent_key() in running:
            continue
        pending[srv.workload].add(srv.name)
        if slot in booting or srv.agent_key() in running:
            coming.add(srv.name)
        elif slot not in current:
            never.add(srv.name)
    return Progress(
        pending={w: frozenset(v) for w, v in pending.items()},
        coming=frozenset() if frozen else frozenset(coming),
        never=frozenset(never),
        leaving=frozenset() if frozen else _leaving(layout, tick, coming),
    )


def _leaving(layout: Layout, tick: Tick, coming: set[str]) -> frozenset[str]:
    """Servers in the way that may leave once their workload's coming servers serve, with the
    waiting server that replaces them there (if anything is still to come, or in the way for a
    reason of its own: a group of servers each waiting for another's successor never moves). By the plan's predicted throughput: an estimate that only
    decides whether to wait; the floors decide what leaves."""
    arriving: dict[str, float] = defaultdict(float)
    for _, srv in layout.servers():
        if srv.name in coming:
            arriving[srv.workload] += srv.predicted_throughput_rps
    out = set()
    for key, waiting in tick.blocked().items():
        way = tick.in_the_way(key)
        for s in way:
            replaced = {t.replaces for t in waiting}
            held = arriving[s.workload] > 0 or any(v.name != s.name and v.name not in replaced for v in way)
            successor = sum(t.predicted_throughput_rps for t in waiting if t.replaces == s.name) if held else 0.0
            gain = arriving[s.workload] + successor
            if gain > 0 and tick.cap[s.workload] - tick.throughput(key, s.name) + gain >= tick.floor.get(
                s.workload, 0.0
            ):
                out.add(s.name)
    return frozenset(out)


def _surge_input(
    layout: Layout,
    current: Mapping[str, Record],
    view: FleetView,
    limits: Limits,
    launches: Sequence[object],
    judge: Judge,
    frozen: bool,
) -> SurgeInput:
    launching = [a for a in launches if isinstance(a, Launch)]
    live_by_type: dict[str, int] = defaultdict(int)
    for r in current.values():
        live_by_type[r.instance_type] += 1
    for a in launching:
        if a.slot not in current:
            live_by_type[a.instance_type] += 1
    names = {s.name for _, s in layout.servers()} | {s.name for v in view.applied.values() for s in v}
    cost = fleet_cost(view, []) + sum(view.prices.get(a.instance_type, 0.0) for a in launching if a.slot not in current)
    return SurgeInput(
        fleet=limits.fleet,
        types=limits.types,
        budget=surge_budget(limits.max_surge, len(layout.slots)),
        slots=[
            SurgeSlot(slot=s, instance_type=r.instance_type, ready=r.state is State.READY, since=r.created_at)
            for s, r in sorted(current.items())
            if is_surge_slot(s)
        ],
        live_by_type=live_by_type,
        max_instances=limits.max_instances,
        cost_per_hour=cost,
        max_cost_per_hour=limits.max_cost_per_hour,
        slot_tops=view.slot_tops,
        taken_slots=frozenset(view.max_attempt) | frozenset(current),
        names=frozenset(names),
        judge=judge,
        frozen=frozen,
        booting=_booting(layout, current, launching),
        spare=_spare(layout, current),
        late=_late(layout, current, launching),
        burst=limits.burst,
    )


def _waiting_late(
    waiting: Sequence[Blockage], late: Sequence[tuple[PlannedServer, str, float]]
) -> list[tuple[PlannedServer, str, float]]:
    """Blocked servers that wait for their blockers to leave, as late as the earliest launch of the
    booting instances the blockers' workloads wait for (surge.py: capacity that serves sooner);
    with none booting, they wait for servers starting now, and only ready room is sooner."""
    first: dict[str, float] = {}  # per workload, its earliest late launch
    for v, _, t in late:
        first[v.workload] = min(t, first.get(v.workload, t))
    out = []
    for b in waiting:
        workloads = {s.workload for s in b.blockers}
        since = min((first[w] for w in workloads if w in first), default=-math.inf)
        out += [(v, b.instance_type, since) for v in b.waiting]
    return out


def _launch_times(current: Mapping[str, Record], launching: Sequence[Launch]) -> dict[str, float]:
    """Slot -> launch time of each instance not ready yet: booting, or launched this tick (inf)."""
    since = {s: r.created_at for s, r in current.items() if r.state is not State.READY}
    return since | {a.slot: math.inf for a in launching}


def _late(
    layout: Layout, current: Mapping[str, Record], launching: Sequence[Launch]
) -> list[tuple[PlannedServer, str, float]]:
    """Planned servers on instances not ready yet, with the instance's type and launch time."""
    since = _launch_times(current, launching)
    return [
        (v, spec.instance_type, since[spec.slot]) for spec in layout.slots if spec.slot in since for v in spec.servers
    ]


def _spare(layout: Layout, current: Mapping[str, Record]) -> list[SurgeSlot]:
    """Instances the layout no longer wants, booting or ready (not surge instances, and not one whose
    launch may not have happened): surge.py may keep them for stand-ins."""
    desired = {s.slot for s in layout.slots}
    return [
        SurgeSlot(slot=s, instance_type=r.instance_type, ready=r.state is State.READY, since=r.created_at)
        for s, r in sorted(current.items())
        if s not in desired and not is_surge_slot(s) and r.state is not State.REQUESTED
    ]


def _booting(
    layout: Layout, current: Mapping[str, Record], launching: Sequence[Launch]
) -> list[tuple[str, str, tuple[PlannedServer, ...]]]:
    """Planned instances not ready yet (booting, or launched this tick), with their servers."""
    coming = _launch_times(current, launching)
    return [(s.slot, s.instance_type, s.servers) for s in layout.slots if s.slot in coming]
