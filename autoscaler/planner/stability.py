"""Planning against the current plan: keep what still works where it is.

Every instance of the current plan whose type is still offered is kept (up to max_instances). A
current placement stays exactly as it is (same GPU, batch and share: no server restart) when the
workload still runs the same model, the placement meets its latency budget at that share, and
the rate it now carries has not fallen so far that a fresh placement would be much smaller. Each workload's
rate goes to its kept placements first, up to what each can carry; if some rate is left over,
the smallest kept placement is released too and the rest is planned afresh as one piece, so a
small rate increase resizes one server rather than adding a sliver. Kept placements are then
re-checked with their kept neighbours, and any that fail are released as well.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from autoscaler.model.perfmodel import PerfModel
from autoscaler.planner.shares import predict, violated
from autoscaler.planner.state import Gpu, GpuPool, Kept
from autoscaler.planner.tasks import Size, Task, make_size, size_on
from autoscaler.planner.types import Demand, PlacementOut, Plan

SLACK = 0.25  # release a kept placement whose fresh lower bound would shrink by more than this (+ 2 units)


@dataclass(slots=True)
class Held:
    """A current placement the new plan keeps, before its GPU is re-checked."""

    gpu: Gpu
    demand: Demand
    size: Size
    share: float
    rate: float


def open_kept(fleet: GpuPool, current: Plan) -> list[tuple[Gpu, PlacementOut]]:
    """Register the kept instances' GPUs; returns every current placement on them."""
    by_name = {o.name: o for o in fleet.options}
    out: list[tuple[Gpu, PlacementOut]] = []
    for inst in current.instances:
        o = by_name.get(inst.instance_type)
        if o is None or (o.max_instances is not None and fleet.used[o.name] >= o.max_instances):
            continue
        if any(g.gpu != o.gpu or not 0 <= g.index < o.gpus for g in inst.gpus):
            continue
        fleet.used[o.name] += 1
        k = len(fleet.kept)
        gpus = [fleet.new_gpu(o.gpu, (k, i)) for i in range(o.gpus)]
        fleet.kept.append(Kept(o, [g.gid for g in gpus]))
        out.extend((gpus[gi.index], p) for gi in inst.gpus for p in gi.placements)
    return out


def _hold(fleet: GpuPool, gpu: Gpu, p: PlacementOut, d: Demand, rest: float) -> Held | None:
    """Keep `p` for up to `rest` of its workload's rate if it still makes sense solo."""
    model = fleet.models[gpu.gpu]
    if p.model != d.model or d.model not in model.coef or not 0 < p.mps_percent <= 100:
        return None
    if d.gpus is not None and gpu.gpu not in d.gpus:
        return None
    lat, thr = model.solo(d.model, p.batch, p.mps_percent)
    carry = min(rest, thr / d.correction)
    if lat * d.correction > d.slo_ms / 2.0 or carry <= 0:
        return None
    if _shrinks(model, gpu.gpu, d, p.rate_rps, carry):
        return None
    size = make_size(model, gpu.gpu, d, p.batch, p.mps_percent, carry)
    return Held(gpu, d, size, p.mps_percent, carry)


def _shrinks(model: PerfModel, gpu: str, d: Demand, before: float, now: float) -> bool:
    """Whether the rate a placement carries fell enough that a fresh one would be much smaller
    (compared like for like: both solo lower bounds, since co-location raised the kept share)."""
    if now >= before:
        return False
    old, new = size_on(model, gpu, d, before), size_on(model, gpu, d, now)
    if old is None or new is None:
        return False
    return new.lower < old.lower * (1 - SLACK) - 2 * model.unit


def hold_workload(fleet: GpuPool, d: Demand, current: Sequence[tuple[Gpu, PlacementOut]]) -> tuple[list[Held], float]:
    """Kept placements of one workload and the rate left for fresh tasks."""
    held: list[Held] = []
    rest = d.rate_rps
    for gpu, p in sorted(current, key=lambda x: (-x[1].mps_percent, x[0].gid)):
        if rest <= 1e-9 * d.rate_rps:
            break
        h = _hold(fleet, gpu, p, d, rest)
        if h is not None:
            held.append(h)
            rest -= h.rate
    if rest > 1e-9 * d.rate_rps and held:
        smallest = min(held, key=lambda h: h.share)
        held.remove(smallest)
        rest += smallest.rate
    return held, max(rest, 0.0)


def hold_redundant(fleet: GpuPool, d: Demand, current: Sequence[tuple[Gpu, PlacementOut]]) -> tuple[list[Held], float]:
    """A redundant workload's placements are kept all together or not at all: kept, they must
    still be N+1 on their own (two or more, in different fault domains, the others carrying the
    whole rate when the largest is lost), each sized for its load in that case; else the whole
    rate is planned afresh."""
    held = [h for gpu, p in current if (h := _hold(fleet, gpu, p, d, float("inf"))) is not None]
    caps = [h.rate for h in held]
    worst = sum(caps) - max(caps, default=0.0)
    if len(held) < len(current) or len(held) < d.min_servers or worst < d.rate_rps or not _apart(held, d):
        return [], d.rate_rps
    model = {h.gpu.gid: fleet.models[h.gpu.gpu] for h in held}
    return [
        replace(
            h,
            rate=d.rate_rps * c / sum(caps),
            size=make_size(model[h.gpu.gid], h.gpu.gpu, d, h.size.batch, h.share, d.rate_rps * c / worst),
        )
        for h, c in zip(held, caps)
    ], 0.0


def _apart(held: Sequence[Held], d: Demand) -> bool:
    """No two in one fault domain (a GPU; with spread instance, a kept instance)."""
    domains = [h.gpu.gid if d.spread == "gpu" or h.gpu.kept is None else h.gpu.kept[0] for h in held]
    return len(set(domains)) == len(domains)


def seat(fleet: GpuPool, held: list[Held]) -> list[Held]:
    """Put held placements on their GPUs; release those that fail with their kept neighbours."""
    by_gpu: dict[int, list[Held]] = {}
    for h in held:
        by_gpu.setdefault(h.gpu.gid, []).append(h)
    released = []
    for items in by_gpu.values():
        items = list(items)
        while items:
            g = items[0].gpu
            sizes, shares = [h.size for h in items], [h.share for h in items]
            preds = predict(fleet.models[g.gpu], sizes, shares)
            bad = [i for i, (s, p) in enumerate(zip(sizes, preds)) if violated(s, p)]
            if not bad and sum(shares) <= 100.0 + 1e-9:
                # negative ids mark tasks kept from the current plan (unique per GPU and position)
                tasks = [
                    Task(-1 - i - 1000 * g.gid, h.demand, h.rate, {g.gpu: h.size}, g.gpu) for i, h in enumerate(items)
                ]
                fleet.set(g, tasks, sizes, shares, preds, [True] * len(items))
                break
            worst = max(bad or range(len(items)), key=lambda i: shares[i])
            released.append(items.pop(worst))
    return released


def seed(fleet: GpuPool, current: Plan, demands: Sequence[Demand]) -> dict[str, float]:
    """Keep what can be kept; returns the rate of each workload still to plan afresh."""
    on_kept = open_kept(fleet, current)
    by_wl: dict[str, list[tuple[Gpu, PlacementOut]]] = {}
    for gpu, p in on_kept:
        by_wl.setdefault(p.workload, []).append((gpu, p))
    todo: dict[str, float] = {}
    held: list[Held] = []
    for d in demands:
        if d.rate_rps <= 0:
            continue
        hold = hold_redundant if d.redundant else hold_workload
        h, rest = hold(fleet, d, by_wl.get(d.workload, []))
        held.extend(h)
        todo[d.workload] = rest
    for seated in seat(fleet, held):
        todo[seated.demand.workload] = todo.get(seated.demand.workload, 0.0) + seated.rate
    return todo


def remaining_demands(demands: Sequence[Demand], todo: Mapping[str, float]) -> list[Demand]:
    """Demands cut down to the rate the kept placements do not carry."""
    return [
        replace(d, rate_rps=todo[d.workload])
        for d in demands
        if todo.get(d.workload, 0.0) > 1e-9 * max(d.rate_rps, 1e-12)
    ]
