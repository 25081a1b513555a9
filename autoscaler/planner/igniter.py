"""The iGniter planner: the paper's Algorithm 1 on many instance types, and its extensions.

Algorithm 1: each task (a workload or a replica) gets the batch rule and its resource lower bound;
tasks go in decreasing order of lower bound; each tries the open GPUs, raising co-located shares
(Algorithm 2, shares.py) until every budget holds, and goes where the GPU's total share grows
least; if no open GPU can take it, a new GPU opens. `Config` switches between the paper as
published ("igniter-plain": the rule's batch, every open GPU, one GPU type, unit steps, no
repair) and the default, which also tries batches below the rule, tries a bounded number of the
tightest-fitting GPUs per type (found through the free-share index in state.py), opens capacity
on the type with the lowest price per unit of the task's demand, then runs the repair pass and
hands half of each GPU's unneeded share to its new placements (free capacity above the planned rate).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import islice

from autoscaler.config.offerings import SPOT_SUFFIX
from autoscaler.model.perfmodel import PerfModel
from autoscaler.planner.shares import Prediction, predict, predicted, settle, spend_idle, violated
from autoscaler.planner.state import Gpu, GpuPool, price_per_gpu
from autoscaler.planner.tasks import Size, Task, decompose, option_on
from autoscaler.planner.types import Demand, InstanceOption, Unplaced


@dataclass(frozen=True, slots=True)
class Config:
    """How faithful to the paper, and how much beyond it."""

    candidates: int | None = 16  # feasible GPUs compared per type, tightest fit first; None: all (the paper)
    tries: int | None = 96  # GPUs tried per type at most (feasible or not); None: all
    per_level: int | None = 4  # GPUs tried per distinct free share; None: all
    repair: bool = True  # try to empty the least-loaded GPUs and instances afterwards
    hetero: bool = True  # use every instance type; False: the cheapest single type (the prototype)
    unit_steps: bool = False  # raise shares one unit per round as the prototype (same result, slower)
    max_colocated: int = 8  # servers per GPU; the scheduling-delay fit covers 1..5, so stay near it
    batch_search: bool = True  # try batches below the paper's rule for a smaller lower bound
    move_penalty: float = 0.05  # cost of changing a kept placement, as a fraction of a GPU's price
    spend_idle: bool = True  # hand half of each GPU's unneeded share to its new placements (free capacity)


PLAIN = Config(
    candidates=None,
    tries=None,
    per_level=None,
    repair=False,
    hetero=False,
    unit_steps=True,
    batch_search=False,
    spend_idle=False,
)


@dataclass(slots=True)
class Trial:
    """A task tried on a GPU: the shares every placement there would need, and the score."""

    gpu: Gpu
    task: Task
    shares: list[float]
    preds: list[Prediction]
    score: tuple[float, float]


def _trial(
    g: Gpu,
    task: Task,
    size: Size,
    model: PerfModel,
    step: float | None,
    new: tuple[str, int],
    price: float,
    penalty: float,
) -> Trial | None:
    """Add `task` (`size`: its size on g's type) to `g` at its lower bound and raise shares until
    every budget holds (or give up). The score is the growth of the GPU's total share in dollars,
    plus `penalty` of a GPU's price for each kept placement (from the current plan) whose share
    would have to change. What is the same for every GPU of a type (model, unit step, `new` =
    (size.model, size.batch), price) the caller works out once: best_trial tries ~7,000 GPUs a
    plan at 1,000 workloads."""
    res = settle(model, [*g.sizes, size], [*g.shares, size.lower], step, mix=(*g.mix, new))
    if res is None:
        return None
    shares, preds = res
    total = sum(shares)
    changed = sum(p and a != b for p, a, b in zip(g.pinned, g.shares, shares))
    return Trial(g, task, shares, preds, ((total - g.total) * price / 100.0 + changed * penalty * price, 100.0 - total))


def best_trial(fleet: GpuPool, task: Task, cfg: Config, exclude: frozenset[int] = frozenset()) -> Trial | None:
    """The open GPU whose total share (in dollars) grows least when `task` joins it."""
    best: Trial | None = None
    redundant = task.demand.redundant  # shares_domain is False for all others
    penalty = cfg.move_penalty
    for size in task.sizes.values():
        found = 0
        model, price = fleet.models[size.gpu], fleet.prices[size.gpu]  # candidates are GPUs of size.gpu
        step = model.unit if cfg.unit_steps else None
        new = (size.model, size.batch)
        floor = size.lower * price / 100.0  # growth if no neighbour needs more
        for g in islice(fleet.candidates(size, exclude, cfg.per_level), cfg.tries):
            t = (
                None
                if redundant and fleet.shares_domain(g, task)
                else _trial(g, task, size, model, step, new, price, penalty)
            )
            if t is None:
                continue
            found += 1
            if best is None or t.score < best.score:
                best = t
            if t.score[0] <= floor * (1 + 1e-12) or (cfg.candidates is not None and found >= cfg.candidates):
                break  # nothing roomier can grow less, and it would leave more share unused
    return best


def commit(fleet: GpuPool, t: Trial) -> None:
    """Apply a trial; a kept placement whose share changed is no longer kept as it was."""
    g = t.gpu
    pinned = [p and a == b for p, a, b in zip(g.pinned, g.shares, t.shares)]
    fleet.set(g, [*g.tasks, t.task], [*g.sizes, t.task.sizes[g.gpu]], t.shares, t.preds, [*pinned, False])


def open_for(fleet: GpuPool, task: Task) -> Gpu | None:
    """A new GPU for `task`: a spare slot of an open instance first, else the type where the
    task's demand is cheapest (lower bound x price per GPU) that max_instances still allows."""
    types = [g for g in task.sizes if fleet.can_open(g)]
    if not types:
        return None
    spare = [g for g in types if fleet.spare.get(g, 0) > 0]
    pick = min(spare or types, key=lambda g: (task.sizes[g].lower * fleet.prices[g], g))
    g = fleet.open_floating(pick)
    size = task.sizes[pick]
    fleet.set(g, [task], [size], [size.lower], predict(fleet.models[pick], [size], [size.lower]), [False])
    return g


def place(fleet: GpuPool, task: Task, cfg: Config) -> bool:
    """Algorithm 1's inner step for one task; False when no GPU may be opened for it."""
    t = best_trial(fleet, task, cfg)
    if t is not None:
        commit(fleet, t)
        return True
    return open_for(fleet, task) is not None


def place_all(fleet: GpuPool, tasks: Sequence[Task], cfg: Config) -> list[Task]:
    """Tasks in decreasing order of lower bound (the paper's order); returns those left over.
    Tasks limited to some GPU types (on-demand parts, planner/offerings.py) go first, so the room
    they leave on their GPUs is there for the unrestricted tasks to fill."""
    left = []
    for task in sorted(tasks, key=lambda t: (t.demand.gpus is None, -t.lower, t.tid)):
        if not place(fleet, task, cfg):
            left.append(task)
    return left


def final_check(fleet: GpuPool) -> tuple[int, list[Task]]:
    """Re-predict every GPU with its final neighbours; re-settle any that fail. Returns how many
    GPUs needed it (0 unless a model edge case slipped past the incremental checks) and any task
    that then found no GPU at all."""
    fixed, lost = 0, []
    for g in fleet.open_gpus():
        preds = list(predicted(fleet.models[g.gpu], g.mix, tuple(g.shares)))  # predict(): g.mix is mix_of(g.sizes)
        if not any(violated(s, p) for s, p in zip(g.sizes, preds)):
            g.preds = preds
            continue
        fixed += 1
        lost += _resettle(fleet, g)
    return fixed, lost


def _resettle(fleet: GpuPool, g: Gpu) -> list[Task]:
    """Raise shares in place; while the GPU cannot hold them all, move the newest to a new GPU."""
    lost = []
    while g.tasks:
        res = settle(fleet.models[g.gpu], g.sizes, g.shares)
        if res is not None:
            fleet.set(g, g.tasks, g.sizes, res[0], res[1], [False] * len(g.tasks))
            break
        task = g.tasks[-1]
        fleet.set(g, g.tasks[:-1], g.sizes[:-1], g.shares[:-1], g.preds[:-1], g.pinned[:-1])
        if open_for(fleet, task) is None:
            lost.append(task)
    return lost


def spend_idle_share(fleet: GpuPool) -> float:
    """After the final check: half of every GPU's unneeded share goes to its placements that are
    not kept as they were (a kept placement whose share changed would restart for nothing; see
    shares.spend_idle). Returns the share handed out, in percentage points summed over GPUs."""
    spent = 0.0
    for g in fleet.open_gpus():
        res = spend_idle(fleet.models[g.gpu], g.sizes, g.shares, [not p for p in g.pinned])
        if res is not None:
            spent += sum(res[0]) - g.total
            fleet.set(g, g.tasks, g.sizes, res[0], res[1], g.pinned)
    return spent


def single_type(
    demands: Sequence[Demand], options: Sequence[InstanceOption], models: Mapping[str, PerfModel]
) -> list[str]:
    """The prototype's one GPU type: the cheapest per GPU among those that can serve the most
    demands (every one, when a type can); with spot offered, both offerings of that GPU type."""
    prices = price_per_gpu(options)
    served = {
        g: sum(d.rate_rps <= 0 or option_on(models[g], g, d, 1.0, False) is not None for d in demands) for g in prices
    }
    if not prices:
        return []
    pick = min(prices, key=lambda g: (-served[g], prices[g], g)).removesuffix(SPOT_SUFFIX)
    return [g for g in prices if g.removesuffix(SPOT_SUFFIX) == pick]


def capacity_reason(task: Task) -> Unplaced:
    return Unplaced(task.workload, "no capacity: every instance type that can serve it is at max_instances")


def plan_tasks(fleet: GpuPool, demands: Sequence[Demand], cfg: Config) -> tuple[list[Task], list[Unplaced]]:
    """Decompose demands on the allowed GPU types (all, or the prototype's single type)."""
    types = None if cfg.hetero else single_type(demands, fleet.options, fleet.models)
    return decompose(demands, fleet.models, fleet.prices, types, cfg.batch_search)
