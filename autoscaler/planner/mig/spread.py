"""Fault domains on MIG GPUs (scaling.redundancy min_servers 2): N+1 slices, spread so that no
GPU holds more of a workload than its spare. Pure.

MIG isolates a slice's memory, caches and faults from its neighbours, so a server's crash costs
its own slice only; a lost GPU (an Xid, a reset, its instance gone) costs every slice on it, so
the fault domain is the GPU, as under MPS. A workload gets one slice more than its rate needs, as
large as its largest (`n_plus_one`): its spare (its slices' throughput less its rate) is then at
least that slice's. No GPU takes more of the workload than the spare (`fits`, used by `fill` and
for the kept GPUs in plan.py), so whichever GPU is lost the rest still covers the whole rate, and
the workload is on two GPUs or more. Re-plans keep its slices and add what covers the rate without
its worst GPU (`carried_by`, `hold_apart`). docs/planner.md ("MIG GPUs", Redundancy) says what a
fleet capped below that gets.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence

from autoscaler.config.mig import MigGeometry, Slot
from autoscaler.planner.mig.gpus import Gpu, Inst, Slice
from autoscaler.planner.mig.packing import free_start
from autoscaler.planner.mig.segments import Segment
from autoscaler.planner.types import Demand

REL = 1e-9


def n_plus_one(segs: list[Segment]) -> list[Segment]:
    """One slice more than `segs` (which cover the rate), as large as the largest."""
    if not segs:
        return segs
    return [*segs, max(segs, key=lambda s: (s.throughput_rps, s.compute))]


def spares(segs: Sequence[tuple[Demand, Segment]], carried: Mapping[str, float]) -> dict[str, float]:
    """Per redundant workload, what its kept (`carried`) and new slices serve beyond its rate: the
    most one GPU may hold of it."""
    out: dict[str, float] = {}
    for d, s in segs:
        if d.redundant:
            out[d.workload] = out.get(d.workload, carried.get(d.workload, 0.0) - d.rate_rps) + s.throughput_rps
    return out


def carried_by(insts: Sequence[Inst]) -> tuple[dict[str, float], dict[str, float]]:
    """Per workload, what the kept GPUs' slices serve, and the most any one GPU of them serves."""
    carried: dict[str, float] = {}
    worst: dict[str, float] = {}
    for inst in insts:
        for g in inst.gpus:
            for s in g.slices:
                carried[s.workload] = carried.get(s.workload, 0.0) + s.seg.throughput_rps
                worst[s.workload] = max(worst.get(s.workload, 0.0), g.load(s.workload))
    return carried, worst


def fits(g: Gpu, d: Demand, s: Segment, spare: Mapping[str, float]) -> bool:
    """Whether slice `s` of `d` may join GPU `g`: always for a workload without redundancy; for a
    redundant one, while the GPU holds no more of it than its spare."""
    if not d.redundant:
        return True
    return g.load(d.workload) + s.throughput_rps <= spare.get(d.workload, 0.0) * (1 + REL) + REL


def fill(
    geometry: MigGeometry,
    cuts: Sequence[tuple[Slot, ...]],
    segs: list[tuple[Demand, Segment]],
    where: tuple[str, Mapping[str, float]],
    strict: bool,
) -> list[Gpu]:
    """Slices into the cuts' slots (a workload's slices side by side) on GPUs of type `where[0]`,
    GPUs left empty dropped. A redundant workload's slices go first, largest first, each to a GPU
    it `fits` (`where[1]`: the spares, over all its slices, kept GPUs' too): a slot cut for its
    profile there, else free units there, else (`strict`) a GPU of its own; not strict (the caps
    leave no GPU to spare) the slot of its profile on the GPU holding least of it."""
    free: dict[str, deque[tuple[int, Slot]]] = {}
    for k, cut in enumerate(cuts):
        for slot in cut:
            free.setdefault(slot[0], deque()).append((k, slot))
    gpus, taken = [Gpu(where[0]) for _ in cuts], [list(c) for c in cuts]
    apart = [x for x in segs if x[0].redundant]
    for d, s in sorted(apart, key=lambda x: (x[0].workload, -x[1].throughput_rps, -x[1].compute)):
        k, slot = _apart(geometry, free, (gpus, taken, where[0]), (d, s, where[1]), strict)
        gpus[k].slices.append(Slice(d.workload, d.model, slot, s))
    for d, s in sorted((x for x in segs if not x[0].redundant), key=lambda x: (x[0].workload, -x[1].compute)):
        k, slot = free[s.slice].popleft()
        gpus[k].slices.append(Slice(d.workload, d.model, slot, s))
    return [g for g in gpus if g.slices]


def _apart(
    geometry: MigGeometry,
    free: dict[str, deque[tuple[int, Slot]]],
    state: tuple[list[Gpu], list[list[Slot]], str],
    what: tuple[Demand, Segment, Mapping[str, float]],
    strict: bool,
) -> tuple[int, Slot]:
    """Where slice `what` (its demand, segment, the spares) goes (see `fill`)."""
    (gpus, taken, gpu), (d, s, spare) = state, what
    queue = free.setdefault(s.slice, deque())
    for entry in queue:
        if fits(gpus[entry[0]], d, s, spare):
            queue.remove(entry)
            return entry
    for k, g in enumerate(gpus):
        if fits(g, d, s, spare) and (start := free_start(geometry, taken[k], s.slice)) is not None:
            taken[k].append((s.slice, start))
            return k, (s.slice, start)
    if not strict and queue:
        entry = min(queue, key=lambda e: gpus[e[0]].load(d.workload))
        queue.remove(entry)
        return entry
    slot = (s.slice, geometry.profile(s.slice).starts[0])
    gpus.append(Gpu(gpu))
    taken.append([slot])
    return len(gpus) - 1, slot


def hold_apart(held: list[tuple[Slice, Gpu]], rate: float) -> None:
    """A redundant workload's kept slices: where N+1 on their own (on two GPUs or more, the rest
    covering `rate` whenever any one GPU is lost), the smallest beyond that dropped; where not, all
    kept, and plan.py adds slices until they are (what covers the rate without the worst GPU)."""
    if not survives(held, rate):
        return
    keep = list(held)
    for item in sorted(held, key=lambda x: x[0].seg.throughput_rps):
        rest = [x for x in keep if x is not item]
        if survives(rest, rate):
            keep = rest
    for s, g in held:
        if not any(s is k for k, _ in keep):
            g.slices.remove(s)


def survives(held: list[tuple[Slice, Gpu]], rate: float) -> bool:
    """Whether these slices are on two GPUs or more and cover `rate` without any one GPU's."""
    per_gpu: dict[int, float] = {}
    for s, g in held:
        per_gpu[id(g)] = per_gpu.get(id(g), 0.0) + s.seg.throughput_rps
    return len(per_gpu) >= 2 and sum(per_gpu.values()) - max(per_gpu.values()) >= rate * (1 - REL)
