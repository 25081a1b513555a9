"""`exact`: the model's optimum for small inputs, as a MILP over candidate GPU configurations.

A configuration is a set of tasks (the same tasks and replicas as iGniter) that fits one GPU of a
type, with Algorithm 2's shares: the least feasible ones, so a set is feasible exactly when those
exist. Adding a task never helps the others (interference is monotone), so the feasible sets are
closed under taking subsets and a depth-first enumeration can stop at the first infeasible set.
Identical tasks form one class with a count (a cutting-stock formulation), and the MILP picks how
many GPUs run each configuration, covering every class exactly, and instance counts holding them:

    min  sum_t price_t y_t
    s.t. sum_c mult_k(c) x_c = n_k                          for every task class k
         sum_{c on GPU type g} x_c <= sum_{t with g} gpus_t y_t   for every GPU type g
         x, y integer >= 0, y_t <= max_instances_t

(plus a slack per class, priced above any plan, for tasks that max_instances cannot hold). HiGHS
solves it in well under a second for typical inputs of up to 16 workloads. The optimum is over the same task
decomposition and lower-bound batches as iGniter, so it bounds what iGniter's packing could gain.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from autoscaler.model.perfmodel import PerfModel
from autoscaler.planner.build import build
from autoscaler.planner.igniter import Config, capacity_reason, plan_tasks
from autoscaler.planner.shares import Prediction, settle
from autoscaler.planner.state import GpuPool
from autoscaler.planner.tasks import Task
from autoscaler.planner.types import Demand, InstanceOption, Plan

if TYPE_CHECKING:
    from scipy.sparse import coo_array

MAX_WORKLOADS = 16
MAX_TASKS = 24
TIME_LIMIT_S = 30.0


class TooLarge(ValueError):
    """The input is beyond what `exact` enumerates; callers fall back to `igniter`."""


@dataclass(frozen=True, slots=True)
class Column:
    """One GPU configuration: task classes (repeated for identical tasks) and their shares."""

    gpu: str
    members: tuple[int, ...]  # class indices, non-decreasing
    shares: tuple[float, ...]
    preds: tuple[Prediction, ...]


def classes(tasks: Sequence[Task]) -> list[list[int]]:
    """Tasks grouped by identical sizes on every type: identical workloads (and a workload's
    identical full replicas) become one class with a count, which removes the symmetry that
    would otherwise leave HiGHS permuting interchangeable tasks."""
    groups: dict[tuple[object, ...], list[int]] = {}
    for i, t in enumerate(tasks):
        groups.setdefault(tuple(sorted(t.sizes.items())), []).append(i)
    return list(groups.values())


def configurations(fleet: GpuPool, tasks: Sequence[Task], groups: list[list[int]], cfg: Config) -> list[Column]:
    """Every feasible multiset of task classes on one GPU of each type, with Algorithm 2's shares."""
    cols: list[Column] = []
    reps = [tasks[g[0]] for g in groups]
    for gtype, model in fleet.models.items():
        ok = [k for k, t in enumerate(reps) if gtype in t.sizes]
        counts = [len(g) for g in groups]
        _extend(model, gtype, reps, counts, ok, (), (), 0, cols, cfg.max_colocated)
    return cols


def _extend(
    model: PerfModel,
    gtype: str,
    reps: Sequence[Task],
    counts: list[int],
    ok: list[int],
    members: tuple[int, ...],
    shares: tuple[float, ...],
    start: int,
    cols: list[Column],
    limit: int,
) -> None:
    if len(members) >= limit:
        return
    for pos in range(start, len(ok)):
        k = ok[pos]
        size = reps[k].sizes[gtype]
        if members.count(k) >= counts[k] or sum(shares) + size.lower > 100.0 + 1e-9:
            continue
        sizes = [reps[i].sizes[gtype] for i in members] + [size]
        if model.memory_mb is not None and sum(s.memory_mb for s in sizes) > model.memory_mb:
            continue
        res = settle(model, sizes, [*shares, size.lower])
        if res is None:
            continue
        cols.append(Column(gtype, (*members, k), tuple(res[0]), tuple(res[1])))
        _extend(model, gtype, reps, counts, ok, (*members, k), tuple(res[0]), pos, cols, limit)


UNPLACED_COST = 1e6  # a task left out (no capacity under max_instances) costs more than any plan


def _matrices(
    cols: Sequence[Column], counts: Sequence[int], options: Sequence[InstanceOption]
) -> tuple[coo_array, coo_array]:
    """Over the variables [x (columns) | y (instances) | u (tasks left out, per class)]: class
    coverage (one row per class) and GPU capacity (one row per GPU type)."""
    nc, no, nk = len(cols), len(options), len(counts)
    cover = [(k, j, float(c.members.count(k))) for j, c in enumerate(cols) for k in set(c.members)]
    cover += [(k, nc + no + k, 1.0) for k in range(nk)]
    gtypes = sorted({o.gpu for o in options})
    cap = [(gtypes.index(c.gpu), j, 1.0) for j, c in enumerate(cols)]
    cap += [(gtypes.index(o.gpu), nc + i, -float(o.gpus)) for i, o in enumerate(options)]
    return _coo(cover, (nk, nc + no + nk)), _coo(cap, (len(gtypes), nc + no + nk))


def _coo(entries: list[tuple[int, int, float]], shape: tuple[int, int]) -> coo_array:
    from scipy.sparse import coo_array  # as milp in solve: only the exact planner needs it

    r, c, v = zip(*entries)
    return coo_array((v, (r, c)), shape=shape)


def solve(
    cols: Sequence[Column], counts: Sequence[int], options: Sequence[InstanceOption]
) -> tuple[list[tuple[Column, int]], list[int], bool]:
    """How many GPUs of each configuration, how many tasks of each class are left out (only
    when max_instances cannot hold them all), and whether HiGHS proved it optimal. A tiny cost
    per percent of share breaks ties towards less total share."""
    nc, no, nk = len(cols), len(options), len(counts)
    cost = np.concatenate(
        [
            1e-7 * np.array([sum(c.shares) for c in cols]),
            [o.price_per_hour for o in options],
            np.full(nk, UNPLACED_COST),
        ]
    )
    upper = np.concatenate(
        [
            [min(counts[k] // c.members.count(k) for k in set(c.members)) for c in cols],
            [np.inf if o.max_instances is None else o.max_instances for o in options],
            counts,
        ]
    )
    # here, not at import: scipy.optimize costs every igniter process ~0.5 s of CPU
    from scipy.optimize import Bounds, LinearConstraint, milp

    cover, capacity = _matrices(cols, counts, options)
    res = milp(
        cost,
        integrality=np.ones(len(cost)),
        bounds=Bounds(0, upper),
        constraints=[LinearConstraint(cover.tocsr(), counts, counts), LinearConstraint(capacity.tocsr(), -np.inf, 0)],
        options={"time_limit": TIME_LIMIT_S},
    )
    if res.x is None:
        raise ValueError(f"exact: HiGHS found no plan ({res.message})")
    x = np.round(res.x).astype(int)
    return [(c, n) for c, n in zip(cols, x[:nc]) if n > 0], [int(n) for n in x[nc + no :]], res.status == 0


def exact(
    demands: Sequence[Demand],
    options: Sequence[InstanceOption],
    models: Mapping[str, PerfModel],
    current: Plan | None = None,
) -> Plan:
    """The model's cheapest plan (over iGniter's tasks), for up to 16 workloads; raises TooLarge."""
    active = [d for d in demands if d.rate_rps > 0]
    if len(active) > MAX_WORKLOADS:
        raise TooLarge(f"exact plans up to {MAX_WORKLOADS} workloads, not {len(active)}")
    cfg = Config()
    fleet = GpuPool({o.gpu: models[o.gpu] for o in options}, options, cfg.max_colocated)
    tasks, unplaced = plan_tasks(fleet, demands, cfg)
    if len(tasks) > MAX_TASKS:
        raise TooLarge(f"exact plans up to {MAX_TASKS} servers (replicas included), not {len(tasks)}")
    if not tasks:
        return build("exact", fleet, unplaced, {"columns": 0, "optimal": True})
    groups = classes(tasks)
    cols = configurations(fleet, tasks, groups, cfg)
    chosen, left, optimal = solve(cols, [len(g) for g in groups], options)
    queues = [list(g) for g in groups]
    for col, n in chosen:
        for _ in range(n):
            members = [tasks[queues[k].pop()] for k in col.members]
            fleet.set(
                fleet.new_gpu(col.gpu),
                members,
                [t.sizes[col.gpu] for t in members],
                list(col.shares),
                list(col.preds),
                [False] * len(members),
            )
    unplaced += [capacity_reason(tasks[i]) for q, n in zip(queues, left) for i in q[:n]]
    return build("exact", fleet, unplaced, {"columns": len(cols), "optimal": optimal})
