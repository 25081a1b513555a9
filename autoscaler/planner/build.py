"""Working state -> Plan: kept instances first (in their current order), then new instances.

New instances come from the cheapest cover of the floating GPUs of each type (packing.py); their
GPUs are filled in the order they were opened, and every GPU of an instance is listed, empty or
not, so a GPU's index is the physical one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from autoscaler.planner.packing import cover
from autoscaler.planner.state import Gpu, GpuPool
from autoscaler.planner.types import GpuOut, InstanceOption, InstanceOut, PlacementOut, Plan, Unplaced


def placements(g: Gpu) -> tuple[PlacementOut, ...]:
    return tuple(
        PlacementOut(t.workload, s.model, s.batch, r, t.rate, p[0], p[1])
        for t, s, r, p in zip(g.tasks, g.sizes, g.shares, g.preds)
    )


def _instance(option: InstanceOption, members: Sequence[Gpu | None]) -> InstanceOut:
    gpus = tuple(
        GpuOut(i, option.gpu, placements(g) if g is not None else ())
        for i, g in enumerate(list(members) + [None] * (option.gpus - len(members)))
    )
    return InstanceOut(option.name, option.price_per_hour, gpus, capacity_type=option.capacity_type)


def kept_instances(fleet: GpuPool) -> list[InstanceOut]:
    """Current-plan instances that still hold something, GPUs at their original indices."""
    out = []
    for _k, kept in enumerate(fleet.kept):
        members = [fleet.gpus.get(gid) for gid in kept.gids]
        if any(g is not None and g.tasks for g in members):
            out.append(_instance(kept.option, members))
    return out


def new_instances(fleet: GpuPool) -> list[InstanceOut]:
    """Floating GPUs packed into the cheapest instances that max_instances still allow."""
    left = fleet.remaining()
    out = []
    for gtype in sorted(fleet.floating_counts()):
        gpus = sorted(
            (g for g in fleet.open_gpus() if g.kept is None and g.gpu == gtype and g.tasks), key=lambda g: g.gid
        )
        opts = [o for o in fleet.options if o.gpu == gtype]
        while gpus:  # more than once only where spread instance left instances short (take_apart)
            mix = cover(len(gpus), opts, [left[o.name] for o in opts])
            for option, count in sorted(mix, key=lambda x: -x[0].gpus):
                for _ in range(count):
                    members, gpus = take_apart(gpus, option.gpus)
                    out.append(_instance(option, members))
                    cap = left[option.name]
                    left[option.name] = None if cap is None else cap - 1
    return [i for i in out if any(g.placements for g in i.gpus)]


def take_apart(gpus: list[Gpu], n: int) -> tuple[list[Gpu], list[Gpu]]:
    """Up to `n` GPUs for one instance, in order, skipping any that would share the instance with
    another server of a workload spread across instances (scaling.redundancy spread instance);
    returns them and the GPUs left. The first GPU always fits, so every round places one."""
    taken: list[Gpu] = []
    spread: set[str] = set()
    rest: list[Gpu] = []
    for g in gpus:
        mine = {t.workload for t in g.tasks if t.demand.redundant and t.demand.spread == "instance"}
        if len(taken) < n and not mine & spread:
            taken.append(g)
            spread |= mine
        else:
            rest.append(g)
    return taken, rest


def moved(fleet: GpuPool) -> int:
    """Placements that start or change (any not kept exactly as they were)."""
    return sum(not p for g in fleet.open_gpus() for p in g.pinned)


def build(name: str, fleet: GpuPool, unplaced: Iterable[Unplaced], stats: dict[str, Any]) -> Plan:
    """The Plan for the state: instances, unplaced workloads sorted by name, and `moved`."""
    uniq = {u.workload: u for u in unplaced}
    return Plan(
        name,
        tuple(kept_instances(fleet) + new_instances(fleet)),
        tuple(uniq[w] for w in sorted(uniq)),
        moved(fleet),
        stats,
    )


def _identity(itype: str, g: GpuOut, p: PlacementOut) -> tuple[object, ...]:
    return (
        itype,
        g.index,
        g.gpu,
        p.workload,
        p.model,
        p.batch,
        round(p.mps_percent, 6),
        p.mig_profile,
        p.mig_start,
        p.processes,
    )


def count_moved(plan: Plan, current: Plan) -> int:
    """Placements of `plan` with no identical placement (same instance type, GPU index, batch and
    share) in `current`: the servers that would have to start, for plans not built from `current`."""
    before = Counter(_identity(i.instance_type, g, p) for i in current.instances for g in i.gpus for p in g.placements)
    moved = 0
    for inst in plan.instances:
        for g in inst.gpus:
            for p in g.placements:
                key = _identity(inst.instance_type, g, p)
                if before[key] > 0:
                    before[key] -= 1
                else:
                    moved += 1
    return moved
