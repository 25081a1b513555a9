"""The MIG planner: workloads -> segments -> slices on GPUs -> instances. Pure.

1. Each workload gets the lightest set of segments covering its rate (segments.py) on the GPU type
   where that costs least (its compute slices / 7 x the type's cheapest price per GPU), among the
   types it may use (`Demand.gpus`: on-demand floors under spot).
2. Per GPU type, the slices are packed onto the fewest GPUs over the valid cuts (packing.py) and
   the GPUs onto the cheapest instances max_instances allows (planner/packing.py `cover`); when the
   caps cannot hold them, the workloads needing the most compute are left unplaced until they can.
3. With a current plan, a workload's slices that still serve (the same row, still within its
   latency budget) stay where they are, largest first until they carry its rate; only the rest is
   planned, first into free units of the GPUs kept, then onto new ones. The kept plan wins unless it
   costs more than `STABILITY_TOLERANCE` over a fresh one (api.py's rule for the MPS planners).

4. A workload with scaling.redundancy min_servers 2 gets N+1 slices spread over GPUs (spread.py),
   kept from the current plan all together or not at all.

A workload's rate is split over its slices in proportion to their throughput.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence

from autoscaler.config.mig import MigGeometry, Slot
from autoscaler.model.mig import MigModel
from autoscaler.planner.build import count_moved
from autoscaler.planner.mig.gpus import Gpu, Inst, Slice
from autoscaler.planner.mig.joint import choose_jointly
from autoscaler.planner.mig.packing import fewest_gpus, free_start
from autoscaler.planner.mig.segments import Chooser, Segment, items, why_none
from autoscaler.planner.mig.spread import carried_by, fill, fits, hold_apart, n_plus_one, spares
from autoscaler.planner.packing import cover
from autoscaler.planner.redundancy import redundancy_faults
from autoscaler.planner.state import price_per_gpu
from autoscaler.planner.types import Demand, GpuOut, InstanceOption, InstanceOut, PlacementOut, Plan, Unplaced

STABILITY_TOLERANCE = 0.03
NAME = "igniter-mig"


def plan_mig(
    demands: Sequence[Demand],
    options: Sequence[InstanceOption],
    models: Mapping[str, MigModel],
    current: Plan | None = None,
) -> Plan:
    """The cheapest MIG plan found; with `current`, the one keeping its slices unless that costs
    more than STABILITY_TOLERANCE over a fresh plan."""
    fresh = _plan(demands, options, models, None)
    if current is None:
        return fresh
    kept = _plan(demands, options, models, current)
    if (
        kept.cost_per_hour <= fresh.cost_per_hour * (1 + STABILITY_TOLERANCE) + 1e-9
        and len(kept.unplaced) <= len(fresh.unplaced)
        and len(redundancy_faults(kept, demands)) <= len(redundancy_faults(fresh, demands))
    ):
        return kept
    note = f"fresh plan: keeping slices would cost {kept.cost_per_hour:.2f} $/h"
    return Plan(NAME, fresh.instances, fresh.unplaced, fresh.moved, {**fresh.stats, "stability": note})


def _plan(
    demands: Sequence[Demand],
    options: Sequence[InstanceOption],
    models: Mapping[str, MigModel],
    current: Plan | None,
) -> Plan:
    by_name = {d.workload: d for d in demands}
    insts = _kept(current, by_name, options, models) if current is not None else []
    carried, worst = carried_by(insts)
    chooser, unplaced = Chooser(), []
    todo: dict[str, list[tuple[Demand, float, list[Segment]]]] = {}
    for d in sorted(demands, key=lambda d: d.workload):
        top = worst.get(d.workload, 0.0) if d.redundant else 0.0  # N+1: covered without its worst GPU
        rest = d.rate_rps + top - carried.get(d.workload, 0.0)
        if rest <= 1e-9 * max(1.0, d.rate_rps):
            continue
        found = _choose(chooser, d, (rest, top), options, models)
        if isinstance(found, Unplaced):
            unplaced.append(found)
            continue
        gpu, segs = found
        todo.setdefault(gpu, []).append((d, rest, segs))
    for gpu in sorted(todo):
        chosen = _together(todo[gpu], models[gpu])
        unplaced += _place((gpu, spares(chosen, carried)), chosen, insts, options, models[gpu])
    return _build(insts, by_name, unplaced, current)


def _choose(
    chooser: Chooser,
    d: Demand,
    need: tuple[float, float],
    options: Sequence[InstanceOption],
    models: Mapping[str, MigModel],
) -> tuple[str, list[Segment]] | Unplaced:
    """The GPU type and segments that serve `need[0]` of `d` at least cost; for a redundant `d`
    with one slice more where the largest exceeds `need[1]` (its kept slices' worst GPU, spread.py)."""
    rate, top = need
    prices = price_per_gpu([o for o in options if d.gpus is None or o.gpu in d.gpus])
    best: tuple[float, str, list[Segment]] | None = None
    reasons = []
    for gpu in sorted(prices):
        model = models[gpu]
        segs = chooser.segments(model, d.model, d.slo_ms, rate, d.correction)
        if segs is None:
            reasons.append(why_none(model, d.model, d.slo_ms, d.correction))
            continue
        segs = n_plus_one(segs) if d.redundant and max(s.throughput_rps for s in segs) > top else segs
        cost = sum(s.compute for s in segs) / model.geometry.compute_slices * prices[gpu]
        if best is None or cost < best[0] - 1e-12:
            best = (cost, gpu, segs)
    if best is None:
        return Unplaced(d.workload, reasons[0] if reasons else "no MIG instance type is available")
    return best[1], best[2]


def _together(entries: list[tuple[Demand, float, list[Segment]]], model: MigModel) -> list[tuple[Demand, Segment]]:
    """The segments chosen jointly with the cuts (joint.py) where that packs onto fewer GPUs than
    each workload's own lightest set."""
    alone = [(d, s) for d, _, segs in entries for s in segs]
    free = [e for e in entries if not e[0].redundant]  # N+1 sets (spread.py) are not re-chosen
    wants = [(rest, items(model, d.model, d.slo_ms, d.correction)) for d, rest, _ in free]
    joint = choose_jointly(model.geometry, wants)
    if joint is None:
        return alone
    fixed = [(d, s) for d, _, segs in entries if d.redundant for s in segs]
    together = fixed + [(d, s) for (d, _, _), segs in zip(free, joint) for s in segs]
    covered = all(sum(s.throughput_rps for s in segs) >= rest * (1 - 1e-9) for (_, rest, _), segs in zip(free, joint))
    geo = model.geometry
    fewer = len(fewest_gpus(geo, Counter(s.slice for _, s in together))) < len(
        fewest_gpus(geo, Counter(s.slice for _, s in alone))
    )
    return together if covered and fewer else alone


def _place(
    where: tuple[str, Mapping[str, float]],
    segs: list[tuple[Demand, Segment]],
    insts: list[Inst],
    options: Sequence[InstanceOption],
    model: MigModel,
) -> list[Unplaced]:
    """Slices into free units of kept GPUs of type `where[0]`, then onto new GPUs and instances
    (redundant workloads' spares in `where[1]`); workloads that the caps cannot hold are unplaced
    (most compute first)."""
    (gpu, spare), geo = where, model.geometry
    rest: list[tuple[Demand, Segment]] = []
    kept_gpus = [g for i in insts if i.option.gpu == gpu for g in i.gpus]
    full: dict[str, int] = {}
    for d, s in sorted(segs, key=lambda x: (-x[1].units, x[0].workload)):
        target = _room(geo, kept_gpus, full, (d, s, spare))
        if target is None:
            rest.append((d, s))
        else:
            target[0].slices.append(Slice(d.workload, d.model, (s.slice, target[1]), s))
    return _open(where, rest, insts, options, model)


def _room(
    geo: MigGeometry, gpus: Sequence[Gpu], full: dict[str, int], what: tuple[Demand, Segment, Mapping[str, float]]
) -> tuple[Gpu, int] | None:
    """The first of `gpus` that slice `what` fits (spread.py) with room for its profile, and the
    start there. Placing only takes room, so a GPU without room for a profile never has it again:
    `full[profile]` counts the leading GPUs known full for it, which keeps a re-plan of thousands
    of kept GPUs linear instead of a scan of them all per slice."""
    d, s, spare = what
    for k in range(full.get(s.slice, 0), len(gpus)):
        start = free_start(geo, gpus[k].cut(), s.slice)
        if start is None:
            continue
        full[s.slice] = k
        if fits(gpus[k], d, s, spare):
            return gpus[k], start
        return next(
            (
                (g, st)
                for g in gpus[k + 1 :]
                if fits(g, d, s, spare) and (st := free_start(geo, g.cut(), s.slice)) is not None
            ),
            None,
        )
    full[s.slice] = len(gpus)
    return None


def _open(
    where: tuple[str, Mapping[str, float]],
    segs: list[tuple[Demand, Segment]],
    insts: list[Inst],
    options: Sequence[InstanceOption],
    model: MigModel,
) -> list[Unplaced]:
    """New GPUs of type `where[0]` for `segs` (redundant workloads' spares in `where[1]`) on new
    instances; workloads the caps cannot hold are unplaced, the most compute first (ties: by name).
    While the slices left need more GPUs than the caps hold (compute and memory units summed: no
    packing does better), the packing is not tried: it would fail (issue 50: one HiGHS solve and
    fill per dropped workload made a capped fleet's plan quadratic)."""
    gpu, geo = where[0], model.geometry
    opts = [o for o in options if o.gpu == gpu]
    used = Counter(i.option.key for i in insts)
    limits = [None if o.max_instances is None else max(0, o.max_instances - used[o.key]) for o in opts]
    room = None if not opts or None in limits else sum(o.gpus * (n or 0) for o, n in zip(opts, limits))
    took: dict[str, tuple[int, int]] = {}
    for d, s in segs:
        c, u = took.get(d.workload, (0, 0))
        took[d.workload] = (c + s.compute, u + s.units)
    compute, units = sum(c for c, _ in took.values()), sum(u for _, u in took.values())
    dropped: list[Unplaced] = []
    for gone in sorted(took, key=lambda w: (-took[w][0], w)):
        if room is None or max(-(-compute // geo.compute_slices), -(-units // geo.memory_units)) <= room:
            out = {u.workload for u in dropped}
            live = [(d, s) for d, s in segs if d.workload not in out]
            got = _held(model, fewest_gpus(geo, Counter(s.slice for _, s in live)), live, where, (opts, limits))
            if got is not None:
                _fill(got[0], got[1], insts)
                return dropped
        dropped.append(Unplaced(gone, f"no capacity: the {gpu} instance types are at max_instances"))
        compute, units = compute - took[gone][0], units - took[gone][1]
    return dropped


def _held(
    model: MigModel,
    cuts: list[tuple[Slot, ...]],
    segs: list[tuple[Demand, Segment]],
    where: tuple[str, Mapping[str, float]],
    offered: tuple[list[InstanceOption], list[int | None]],
) -> tuple[list[Gpu], list[tuple[InstanceOption, int]]] | None:
    """The slices on GPUs (redundant workloads' apart, spread.py) and the instances holding them;
    where the caps cannot hold the GPUs that apart takes, the cuts' GPUs with the slices as far
    apart as they go (the plan's stats then name the workload, api.make_plan); None: not even that."""
    for strict in (True, False):
        gpus = fill(model.geometry, cuts, segs, where, strict)
        try:
            return gpus, cover(len(gpus), *offered)
        except ValueError:
            if not any(d.redundant for d, _ in segs):
                return None
    return None


def _fill(gpus: list[Gpu], mix: list[tuple[InstanceOption, int]], insts: list[Inst]) -> None:
    """GPUs into instances, the largest instances first."""
    gpu = gpus[0].gpu
    for option, count in sorted(mix, key=lambda x: -x[0].gpus):
        for _ in range(count):
            members, gpus = gpus[: option.gpus], gpus[option.gpus :]
            if members:
                insts.append(Inst(option, members + [Gpu(gpu) for _ in range(option.gpus - len(members))]))


def _kept(
    current: Plan, demands: Mapping[str, Demand], options: Sequence[InstanceOption], models: Mapping[str, MigModel]
) -> list[Inst]:
    """The current plan's MIG slices that still serve, on their instances (at most what each
    workload's rate needs, largest first; a redundant workload's all or none, spread.py); instances
    left empty are not kept."""
    offered = {o.key: o for o in options}
    need = {w: d.rate_rps for w, d in demands.items()}
    out = []
    for inst in current.instances:
        option = offered.get(inst.key)
        if option is None or option.gpu not in models:
            continue
        gpus = [Gpu(option.gpu) for _ in range(option.gpus)]
        for had in inst.gpus:
            if 0 <= had.index < option.gpus:
                gpus[had.index].slices = [
                    s for p in had.placements if (s := _still_serves(p, demands, models[option.gpu]))
                ]
        out.append(Inst(option, gpus))
    everything = sorted(
        ((s, g) for i in out for g in i.gpus for s in g.slices), key=lambda x: (-x[0].seg.throughput_rps, x[0].workload)
    )
    apart: dict[str, list[tuple[Slice, Gpu]]] = {}  # per redundant workload, its slices in that order
    for s, g in everything:
        if demands[s.workload].redundant:
            apart.setdefault(s.workload, []).append((s, g))
        elif need[s.workload] <= 1e-9:
            g.slices.remove(s)
        else:
            need[s.workload] -= s.seg.throughput_rps
    for w in sorted(apart):
        hold_apart(apart[w], demands[w].rate_rps)
    return [i for i in out if any(g.slices for g in i.gpus)]


def _still_serves(p: PlacementOut, demands: Mapping[str, Demand], model: MigModel) -> Slice | None:
    d = demands.get(p.workload)
    if d is None or d.model != p.model or p.mig_profile is None or p.mig_start is None or d.rate_rps <= 0:
        return None
    row = model.row(p.model, p.mig_profile, p.batch, p.processes)
    if row is None or not model.usable(row, d.slo_ms, d.correction):
        return None
    prof = model.geometry.profile(p.mig_profile)
    seg = Segment(p.mig_profile, prof.compute_slices, prof.memory_units, row, row.slice_throughput_rps / d.correction)
    return Slice(p.workload, p.model, (p.mig_profile, p.mig_start), seg, kept=True)


def _build(insts: list[Inst], demands: Mapping[str, Demand], unplaced: list[Unplaced], current: Plan | None) -> Plan:
    gone = {u.workload for u in unplaced}
    capacity: dict[str, float] = {}
    for i in insts:
        for g in i.gpus:
            g.slices = [s for s in g.slices if s.workload not in gone]
            for s in g.slices:
                capacity[s.workload] = capacity.get(s.workload, 0.0) + s.seg.throughput_rps
    out = tuple(
        InstanceOut(
            i.option.name,
            i.option.price_per_hour,
            tuple(GpuOut(k, g.gpu, _placements(g, demands, capacity)) for k, g in enumerate(i.gpus)),
            capacity_type=i.option.capacity_type,
        )
        for i in insts
        if any(g.slices for g in i.gpus)
    )
    uniq = {u.workload: u for u in unplaced}
    plan = Plan(NAME, out, tuple(uniq[w] for w in sorted(uniq)))
    moved = count_moved(plan, current) if current is not None else 0
    return Plan(NAME, out, plan.unplaced, moved, {"gpus": plan.gpu_count})


def _placements(g: Gpu, demands: Mapping[str, Demand], capacity: Mapping[str, float]) -> tuple[PlacementOut, ...]:
    out = []
    for s in sorted(g.slices, key=lambda s: s.slot[1]):
        d = demands[s.workload]
        share = d.rate_rps * s.seg.throughput_rps / capacity[s.workload] if capacity[s.workload] > 0 else 0.0
        out.append(
            PlacementOut(
                s.workload,
                s.model,
                s.seg.row.batch,
                100.0 * s.seg.compute / 7.0,
                share,
                s.seg.row.latency_ms * d.correction,
                s.seg.throughput_rps,
                mig_profile=s.slot[0],
                mig_start=s.slot[1],
                processes=s.seg.row.processes,
            )
        )
    return tuple(out)


def lower_bound_gpus(
    demands: Sequence[Demand], gpu: str, model: MigModel, chooser: Chooser | None = None
) -> tuple[int, float]:
    """A lower bound on the GPUs of one type any plan needs: each workload's fewest compute slices
    (over every multiset of its usable rows that covers its rate), summed, over 7, rounded up; and
    the fractional value. The knapsack here weighs compute alone (segments.py adds memory units)."""
    total = 0
    for d in demands:
        if d.rate_rps <= 0:
            continue
        best = _fewest_compute(model, d)
        total += best if best is not None else 0
    frac = total / model.geometry.compute_slices
    return math.ceil(frac - 1e-9), frac


def _fewest_compute(model: MigModel, d: Demand) -> int | None:
    rows = model.best_rows(d.model, d.slo_ms, d.correction)
    if not rows:
        return None
    thr: dict[int, float] = {}
    for r in rows:
        c = model.geometry.profile(r.slice).compute_slices
        thr[c] = max(thr.get(c, 0.0), r.slice_throughput_rps / d.correction)
    best = [0.0]
    while best[-1] < d.rate_rps * (1 - 1e-12):
        w = len(best)
        best.append(max([best[w - 1]] + [best[w - c] + t for c, t in thr.items() if c <= w]))
    return len(best) - 1
