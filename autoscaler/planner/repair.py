"""The repair pass: empty the least-loaded GPUs and instances into the others, or undo.

A greedy first pass leaves a tail of lightly loaded GPUs (the last ones opened, for the smallest
tasks). Each group (a floating GPU, or a kept instance with all its GPUs) is tried in increasing
order of load: every task on it is re-placed on the other open GPUs with the same Algorithm 1 step
(shares re-derived by Algorithm 2 with the new neighbours). The move is kept only if every task
found a home, so the plan loses a GPU or an instance and never gains one: cost only goes down.
With several GPU types, a group that cannot be emptied that way is re-planned on the other types,
new GPUs allowed, and kept only if they cost less than the group (`try_replace`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from autoscaler.planner.igniter import Config, best_trial, commit, open_for
from autoscaler.planner.shares import Prediction
from autoscaler.planner.state import Gpu, GpuPool
from autoscaler.planner.tasks import Size, Task, decompose
from autoscaler.planner.types import Unplaced


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What ran on a GPU before a move touched it."""

    tasks: list[Task]
    sizes: list[Size]
    shares: list[float]
    preds: list[Prediction]
    pinned: list[bool]


def _snap(g: Gpu) -> Snapshot:
    return Snapshot(list(g.tasks), list(g.sizes), list(g.shares), list(g.preds), list(g.pinned))


def groups(fleet: GpuPool) -> list[tuple[float, list[Gpu]]]:
    """Units that can be closed, with their load: floating GPUs alone, kept instances whole."""
    out: list[tuple[float, list[Gpu]]] = []
    kept: dict[int, list[Gpu]] = {}
    for g in fleet.open_gpus():
        if g.kept is None:
            if g.tasks:
                out.append((g.total, [g]))
        else:
            kept.setdefault(g.kept[0], []).append(g)
    for members in kept.values():
        out.append((sum(g.total for g in members) / len(members), members))
    return sorted(out, key=lambda x: (x[0], x[1][0].gid))


class Move:
    """One attempt to empty a group: what it changed, so that it can be undone."""

    def __init__(self, fleet: GpuPool, members: list[Gpu]) -> None:
        self.fleet = fleet
        self.members = members
        self.exclude = frozenset(g.gid for g in members)
        self.saved: dict[int, Snapshot] = {}
        self.opened: list[Gpu] = []
        self.counters = (dict(fleet.used), dict(fleet.spare))

    def to_open_gpu(self, task: Task, cfg: Config) -> bool:
        trial = best_trial(self.fleet, task, cfg, self.exclude)
        if trial is None:
            return False
        self.saved.setdefault(trial.gpu.gid, _snap(trial.gpu))
        commit(self.fleet, trial)
        return True

    def to_new_gpu(self, task: Task) -> bool:
        g = open_for(self.fleet, task)
        if g is not None:
            self.opened.append(g)
        return g is not None

    def new_cost(self) -> float:
        return sum(self.fleet.prices[g.gpu] for g in self.opened)

    def close(self) -> None:
        for g in self.members:
            self.fleet.set(g, [], [], [], [], [])
            self.fleet.drop(g)

    def undo(self) -> None:
        for gid, snap in self.saved.items():
            self.fleet.set(self.fleet.gpus[gid], snap.tasks, snap.sizes, snap.shares, snap.preds, snap.pinned)
        for g in self.opened:
            self.fleet.set(g, [], [], [], [], [])
            self.fleet.drop(g)
        self.fleet.used, self.fleet.spare = self.counters


def _work(members: list[Gpu]) -> list[Task]:
    return sorted((t for g in members for t in g.tasks), key=lambda t: (-t.lower, t.tid))


def try_empty(fleet: GpuPool, members: list[Gpu], cfg: Config) -> bool:
    """Move every task of `members` onto the other open GPUs; commit and close them only if all
    moved, so the plan loses GPUs and gains none."""
    move = Move(fleet, members)
    if all(move.to_open_gpu(t, cfg) for t in _work(members)):
        move.close()
        return True
    move.undo()
    return False


def try_replace(fleet: GpuPool, members: list[Gpu], price: float, cfg: Config) -> bool:
    """Re-plan the workloads of `members` on the other GPU types (open GPUs first, new ones if
    needed); keep it only if the new GPUs cost less than the group. This undoes the greedy's
    one weakness across types: opening an expensive GPU for a task that then leaves it half empty."""
    gtype = members[0].gpu
    others = [g for g in fleet.prices if g != gtype]
    if _bound_to_fail(fleet, members, others, price):
        return False
    move = Move(fleet, members)
    for task in _work(members):
        pieces, unplaced = pieces_of(fleet, task, others)
        if unplaced or not all(_placed(move, p, cfg, price) for p in pieces) or move.new_cost() >= price - 1e-9:
            move.undo()
            return False
    move.close()
    return True


def _bound_to_fail(fleet: GpuPool, members: list[Gpu], others: list[str], price: float) -> bool:
    """Whether try_replace must fail, known without re-planning: no GPU of the other types is
    open, so the first piece of the first task that carries a rate finds no open GPU and opens a
    new one (or none may open), and none of them costs less than the group. The answer is the
    same as trying; only the work (re-cutting tasks on every type, the commonest miss of a plan
    on its cheapest type) is saved."""
    if not others or any(fleet.open_of(g) for g in others):
        return False
    if min(fleet.prices[g] for g in others) < price - 1e-9:
        return False
    return any(t.capacity > 0 for g in members for t in g.tasks)


def pieces_of(fleet: GpuPool, task: Task, gpu_types: list[str]) -> tuple[list[Task], list[Unplaced]]:
    """`task` re-cut on other GPU types: pieces that carry what it carries (its capacity, with
    redundancy) and share its routed rate in proportion; they keep its demand, so they stay out
    of the fault domains of the workload's other servers."""
    one = replace(task.demand, rate_rps=task.capacity, min_servers=1)
    pieces, unplaced = decompose([one], fleet.models, fleet.prices, gpu_types)
    for p in pieces if task.demand.redundant else ():
        p.demand, p.carries, p.rate = task.demand, p.rate, p.rate * task.rate / task.capacity
    return pieces, unplaced


def _placed(move: Move, piece: Task, cfg: Config, price: float) -> bool:
    """One piece of a re-planned task placed (open GPUs first), and the new GPUs still cheaper
    than the group. New GPUs only add cost, so the first piece that reaches the group's price
    ends the attempt: the rest could not bring it back under."""
    return (move.to_open_gpu(piece, cfg) or move.to_new_gpu(piece)) and move.new_cost() < price - 1e-9


def group_price(fleet: GpuPool, members: list[Gpu]) -> float:
    """What closing the group saves: a kept instance's price, or a floating GPU's share of one."""
    g = members[0]
    if g.kept is not None:
        return fleet.kept[g.kept[0]].option.price_per_hour
    return fleet.prices[g.gpu]


def repair(fleet: GpuPool, cfg: Config, patience: int = 24) -> int:
    """Close what can be closed, least loaded first; stop after `patience` failures in a row
    (loads only grow along the list, so later groups are ever less likely to empty). With
    several GPU types, a group that cannot be emptied into open GPUs may still be re-planned on
    cheaper types."""
    closed = misses = 0
    for _, members in groups(fleet):
        if misses >= patience:
            break
        if any(g.gid not in fleet.gpus for g in members):
            continue
        ok = try_empty(fleet, members, cfg) or (
            len(fleet.prices) > 1 and try_replace(fleet, members, group_price(fleet, members), cfg)
        )
        closed, misses = (closed + 1, 0) if ok else (closed, misses + 1)
    return closed
