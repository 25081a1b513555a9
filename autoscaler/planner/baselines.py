"""The baselines of the iGniter paper (Sec. 5), on the same tasks, model and instance types.

All three start from the same batch rule, lower bounds and replicas as iGniter (the "+" in the
paper's names), and report the latencies the model predicts for what they place, so --compare's
re-check shows where they break an SLO:

- `ffd`: first-fit decreasing on the lower bounds; interference ignored (shares stay at the bounds).
- `gslice` (GSLICE+): workloads in arrival order, first fit on the lower bounds; then GSLICE's
  reactive tuning adds one resource unit at a time to each workload missing its SLO, while its
  GPU has room; it never moves a workload, so a full GPU keeps its violations.
- `gpulets` (gpu-lets+): a GPU splits into at most two gpu-lets of 20/40/50/60/80/100 %; each
  task takes the smallest gpu-let at or above its lower bound, best fit onto a GPU with one
  gpu-let left, where the pair's interference (here: our model) keeps both within budget.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from autoscaler.model.perfmodel import PerfModel
from autoscaler.planner.build import build
from autoscaler.planner.igniter import Config, capacity_reason, open_for, plan_tasks
from autoscaler.planner.shares import EPS, Prediction, predict, violated
from autoscaler.planner.state import Gpu, GpuPool
from autoscaler.planner.tasks import Size, Task
from autoscaler.planner.types import Demand, InstanceOption, Plan, Unplaced

GPULETS = (20.0, 40.0, 50.0, 60.0, 80.0, 100.0)
UNBOUNDED = 10**6  # no co-location limit: these baselines do not model the scheduling delay
BLOCK = 256  # GPUs per block of first fit's scan


class FirstFit:
    """First fit over GPUs in the order opened: a vectorised scan of free share per type, block by
    block (the most free share of each BLOCK GPUs kept beside), so a task that fits no open GPU,
    as a whole-GPU replica never does, costs a scan of the blocks and not of every GPU: the flat
    scan made ffd and gslice quadratic (221,132 GPUs at the rate ceiling: minutes)."""

    def __init__(self, fleet: GpuPool) -> None:
        self.fleet = fleet
        self.free: dict[str, np.ndarray] = {}
        self.top: dict[str, np.ndarray] = {}  # the most free share in each block of BLOCK GPUs
        self.gids: dict[str, list[int]] = {}
        self.pos: dict[int, int] = {}

    def find(self, task: Task) -> Gpu | None:
        """The first open GPU (of any type the task fits) whose free share holds its bound."""
        found = [g for gtype, size in task.sizes.items() if (g := self._first(gtype, size)) is not None]
        return min(found, key=lambda g: g.gid, default=None)

    def _first(self, gtype: str, size: Size) -> Gpu | None:
        free = self.free.get(gtype)
        if free is None:
            return None
        n, need = len(self.gids[gtype]), size.lower - EPS
        for block in np.flatnonzero(self.top[gtype][: -(-n // BLOCK)] >= need):
            lo = int(block) * BLOCK
            for i in np.flatnonzero(free[lo : min(lo + BLOCK, n)] >= need):
                g = self.fleet.gpus[self.gids[gtype][lo + i]]
                if self._memory_ok(g, size.memory_mb):
                    return g
        return None

    def _memory_ok(self, g: Gpu, need: float) -> bool:
        cap = self.fleet.models[g.gpu].memory_mb
        return cap is None or g.memory + need <= cap

    def add(self, g: Gpu, task: Task) -> None:
        """Put `task` on `g` at its lower bound (no interference considered)."""
        size = task.sizes[g.gpu]
        self.fleet.set(
            g, [*g.tasks, task], [*g.sizes, size], [*g.shares, size.lower], [*g.preds, (0.0, 0.0)], [*g.pinned, False]
        )
        self.sync(g)

    def sync(self, g: Gpu) -> None:
        """Record a GPU's free share (appending a newly opened one; arrays grow by doubling)."""
        gids = self.gids.setdefault(g.gpu, [])
        if g.gid not in self.pos:
            self.pos[g.gid] = len(gids)
            gids.append(g.gid)
            arr = self.free.setdefault(g.gpu, np.zeros(BLOCK))
            if len(gids) > len(arr):
                self.free[g.gpu] = np.concatenate([arr, np.zeros(len(arr))])
        free, at = self.free[g.gpu], self.pos[g.gid]
        free[at] = g.free
        top = self.top.setdefault(g.gpu, np.zeros(len(free) // BLOCK))
        if len(top) < len(free) // BLOCK:
            top = self.top[g.gpu] = np.concatenate([top, np.zeros(len(free) // BLOCK - len(top))])
        block = at // BLOCK
        top[block] = free[block * BLOCK : (block + 1) * BLOCK].max()


def _first_fit(fleet: GpuPool, order: Sequence[Task]) -> list[Unplaced]:
    ff = FirstFit(fleet)
    lost = []
    for task in order:
        g = ff.find(task)
        if g is None:
            g = open_for(fleet, task)
            if g is None:
                lost.append(capacity_reason(task))
                continue
            ff.sync(g)
        else:
            ff.add(g, task)
    return lost


def _repredict(fleet: GpuPool) -> None:
    """What the model says about each GPU with its final neighbours (violations stay visible)."""
    for g in fleet.open_gpus():
        fleet.set(g, g.tasks, g.sizes, g.shares, predict(fleet.models[g.gpu], g.sizes, g.shares), g.pinned)


def _setup(
    demands: Sequence[Demand],
    options: Sequence[InstanceOption],
    models: Mapping[str, PerfModel],
    max_colocated: int = UNBOUNDED,
) -> tuple[GpuPool, list[Task], list[Unplaced]]:
    fleet = GpuPool({o.gpu: models[o.gpu] for o in options}, options, max_colocated)
    tasks, unplaced = plan_tasks(fleet, demands, Config())
    return fleet, tasks, unplaced


def ffd(
    demands: Sequence[Demand],
    options: Sequence[InstanceOption],
    models: Mapping[str, PerfModel],
    current: Plan | None = None,
) -> Plan:
    """First-fit decreasing on the resource lower bounds, interference ignored."""
    fleet, tasks, unplaced = _setup(demands, options, models)
    unplaced += _first_fit(fleet, sorted(tasks, key=lambda t: (-t.lower, t.tid)))
    _repredict(fleet)
    return build("ffd", fleet, unplaced, {"tasks": len(tasks)})


def gslice(
    demands: Sequence[Demand],
    options: Sequence[InstanceOption],
    models: Mapping[str, PerfModel],
    current: Plan | None = None,
) -> Plan:
    """GSLICE+: first fit in arrival order, then reactive unit-by-unit tuning within each GPU."""
    fleet, tasks, unplaced = _setup(demands, options, models)
    unplaced += _first_fit(fleet, tasks)
    for g in fleet.open_gpus():
        _tune(fleet, g)
    return build("gslice", fleet, unplaced, {"tasks": len(tasks)})


def _tune(fleet: GpuPool, g: Gpu) -> None:
    """Add a unit to each violating placement while the GPU has room; no moves, no give-up."""
    model = fleet.models[g.gpu]
    shares = list(g.shares)
    while True:
        preds = predict(model, g.sizes, shares)
        bad = [i for i, (s, p) in enumerate(zip(g.sizes, preds)) if violated(s, p)]
        room = [i for i in bad if sum(shares) + model.unit <= 100.0 + EPS and shares[i] + model.unit <= 100 + EPS]
        if not room:
            fleet.set(g, g.tasks, g.sizes, shares, preds, g.pinned)
            return
        for i in room:
            if sum(shares) + model.unit <= 100.0 + EPS:
                shares[i] += model.unit


def gpulet_size(lower: float) -> float | None:
    return next((s for s in GPULETS if s >= lower - EPS), None)


def gpulets(
    demands: Sequence[Demand],
    options: Sequence[InstanceOption],
    models: Mapping[str, PerfModel],
    current: Plan | None = None,
) -> Plan:
    """gpu-lets+: at most two gpu-lets per GPU from a fixed menu, best fit, pairwise check."""
    fleet, tasks, unplaced = _setup(demands, options, models, max_colocated=2)
    for task in sorted(tasks, key=lambda t: (-t.lower, t.tid)):
        if not _pair(fleet, task) and not _alone(fleet, task):
            unplaced.append(capacity_reason(task))
    return build("gpulets", fleet, unplaced, {"tasks": len(tasks)})


def _pair(fleet: GpuPool, task: Task) -> bool:
    """Best fit onto a GPU holding one gpu-let: the least room left after, both within budget."""
    best: tuple[float, Gpu, list[float], list[Prediction]] | None = None
    for _gtype, size in task.sizes.items():
        want = gpulet_size(size.lower)
        if want is None or want >= 100:
            continue
        for g in fleet.candidates(replace(size, lower=want)):
            if len(g.tasks) != 1:
                continue
            found = _fit_pair(fleet, g, size, want)
            if found is not None and (best is None or found[0] < best[0]):
                best = (found[0], g, found[1], found[2])
    if best is None:
        return False
    _, g, shares, preds = best
    fleet.set(g, [*g.tasks, task], [*g.sizes, task.sizes[g.gpu]], shares, preds, [*g.pinned, False])
    return True


def _fit_pair(fleet: GpuPool, g: Gpu, size: Size, want: float) -> tuple[float, list[float], list[Prediction]] | None:
    """The smallest gpu-let from the menu, at least `want`, that keeps the pair within budget."""
    model = fleet.models[g.gpu]
    for s in GPULETS:
        if s < want - EPS or g.total + s > 100.0 + EPS:
            continue
        shares = [*g.shares, s]
        preds = predict(model, [*g.sizes, size], shares)
        if not any(violated(z, p) for z, p in zip([*g.sizes, size], preds)):
            return 100.0 - g.total - s, shares, preds
    return None


def _alone(fleet: GpuPool, task: Task) -> bool:
    """A new GPU with the task's gpu-let; the type choice is iGniter's (cheapest demand)."""
    g = open_for(fleet, task)
    if g is None:
        return False
    want = gpulet_size(g.sizes[0].lower) or 100.0
    fleet.set(g, g.tasks, g.sizes, [want], predict(fleet.models[g.gpu], g.sizes, [want]), g.pinned)
    return True
