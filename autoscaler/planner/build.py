"""Working state -> Plan: kept instances first (in their current order), then new instances.

New instances come from the cheapest cover of the floating GPUs of each type (packing.py); their
GPUs are filled in the order they were opened, and every GPU of an instance is listed, empty or
not, so a GPU's index is the physical one.
"""

from __future__ import annotations

import heapq
from collections import Counter, deque
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
        waiting = Waiting(g for g in fleet.open_gpus() if g.kept is None and g.gpu == gtype and g.tasks)
        opts = [o for o in fleet.options if o.gpu == gtype]
        while waiting:  # more than once only where spread instance left instances short (take_apart)
            mix = cover(len(waiting), opts, [left[o.name] for o in opts])
            for option, count in sorted(mix, key=lambda x: -x[0].gpus):
                for _ in range(count):
                    out.append(_instance(option, waiting.take_apart(option.gpus)))
                    cap = left[option.name]
                    left[option.name] = None if cap is None else cap - 1
    return [i for i in out if any(g.placements for g in i.gpus)]


def spread_workloads(g: Gpu) -> frozenset[str]:
    """The workloads on `g` whose servers must each sit on a different instance."""
    return frozenset(t.workload for t in g.tasks if t.demand.redundant and t.demand.spread == "instance")


class Waiting:
    """Floating GPUs waiting for an instance, in GPU order, queued by the spread-instance workloads
    they hold (their class): GPUs of one class block or admit each other alike, so an instance
    looks at each class's first GPU only. Scanning every waiting GPU for each instance instead was
    quadratic: minutes for the 29,000 GPUs a rate near limits.MAX_RATE_RPS needs, and for a
    spread-instance workload's thousands of servers that each take an instance of their own."""

    def __init__(self, gpus: Iterable[Gpu]) -> None:
        self.queues: dict[frozenset[str], deque[Gpu]] = {}
        for g in sorted(gpus, key=lambda g: g.gid):
            self.queues.setdefault(spread_workloads(g), deque()).append(g)
        self.heads = [(q[0].gid, cls) for cls, q in self.queues.items()]
        heapq.heapify(self.heads)
        self.count = sum(len(q) for q in self.queues.values())

    def __len__(self) -> int:
        return self.count

    def take_apart(self, n: int) -> list[Gpu]:
        """Up to `n` GPUs for one instance, in GPU order, skipping any that would share the
        instance with another server of a workload spread across instances (scaling.redundancy
        spread instance); the skipped ones wait for the next instance. The first GPU always
        fits, so every round places one. Same GPUs as a scan of the whole queue in order: a GPU
        skipped stays skipped for this instance, as its class only grows more blocked."""
        taken: list[Gpu] = []
        spread: set[str] = set()
        blocked = []
        while self.heads and len(taken) < n:
            head = heapq.heappop(self.heads)
            cls = head[1]
            if cls & spread:
                blocked.append(head)
                continue
            queue = self.queues[cls]
            taken.append(queue.popleft())
            spread |= cls
            if queue:
                heapq.heappush(self.heads, (queue[0].gid, cls))
        for head in blocked:
            heapq.heappush(self.heads, head)
        self.count -= len(taken)
        return taken


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
