"""The planner's working state: open GPUs, what runs on each, and an index by free share.

GPUs are either *kept* (a GPU of an instance in the current plan, which stays where it is) or
*floating* (opened by this planning run; packed into instances only at the end, see packing.py).
Floating GPUs are opened through a running count of instance slots so that `max_instances` is
respected and multi-GPU instances fill before new ones open.

The index keeps each GPU type's open GPUs sorted by free share, so finding the few GPUs that can
take a task at its lower bound is a bisection, not a scan: that is what keeps 10 000 workloads in
seconds instead of the prototype's quadratic sweep.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from autoscaler.model.perfmodel import PerfModel
from autoscaler.planner.shares import EPS, Mix, Prediction, mix_of
from autoscaler.planner.tasks import Size, Task
from autoscaler.planner.types import InstanceOption


@dataclass(slots=True, eq=False)
class Gpu:
    """One GPU and its placements (parallel lists); `pinned[i]`: kept from the current plan as is."""

    gid: int
    gpu: str
    kept: tuple[int, int] | None = None  # (kept instance number, GPU index) or None: floating
    tasks: list[Task] = field(default_factory=list)
    sizes: list[Size] = field(default_factory=list)
    shares: list[float] = field(default_factory=list)
    preds: list[Prediction] = field(default_factory=list)
    pinned: list[bool] = field(default_factory=list)
    total: float = 0.0
    memory: float = 0.0
    mix: Mix = ()  # shares.mix_of(sizes), kept in step by GpuPool.set: every trial here starts from it

    @property
    def free(self) -> float:
        return 100.0 - self.total


@dataclass(slots=True)
class Kept:
    """An instance of the current plan that the new plan keeps (with all its GPUs)."""

    option: InstanceOption
    gids: list[int]


def price_per_gpu(options: Sequence[InstanceOption]) -> dict[str, float]:
    """The cheapest price of one GPU of each type: what a unit of demand costs there."""
    out: dict[str, float] = {}
    for o in options:
        out[o.gpu] = min(out.get(o.gpu, float("inf")), o.price_per_hour / o.gpus)
    return out


class GpuPool:
    """Open GPUs, indexed by type and free share; instance slots for opening floating GPUs."""

    def __init__(
        self, models: Mapping[str, PerfModel], options: Sequence[InstanceOption], max_colocated: int = 8
    ) -> None:
        self.models = models
        self.options = list(options)
        self.prices = price_per_gpu(options)
        self.max_colocated = max_colocated
        self.gpus: dict[int, Gpu] = {}
        self.kept: list[Kept] = []
        self.used = {o.name: 0 for o in options}  # instances of each option counted so far
        self.spare = {g: 0 for g in self.prices}  # free slots in floating instances, per GPU type
        self._index: dict[str, list[tuple[float, int]]] = {g: [] for g in models}
        self._next = 0

    # -- GPUs ---------------------------------------------------------------------------------
    def new_gpu(self, gpu: str, kept: tuple[int, int] | None = None) -> Gpu:
        """Register an empty GPU (the caller has checked capacity)."""
        g = Gpu(self._next, gpu, kept)
        self._next += 1
        self.gpus[g.gid] = g
        insort(self._index.setdefault(gpu, []), (g.free, g.gid))
        return g

    def set(
        self,
        g: Gpu,
        tasks: list[Task],
        sizes: list[Size],
        shares: list[float],
        preds: list[Prediction],
        pinned: list[bool],
    ) -> None:
        """Replace what runs on a GPU, keeping the index in step."""
        self._unindex(g)
        g.tasks, g.sizes, g.shares, g.preds, g.pinned = tasks, sizes, shares, preds, pinned
        g.total = sum(shares)
        g.memory = sum(s.memory_mb for s in sizes)
        g.mix = mix_of(sizes)
        insort(self._index[g.gpu], (g.free, g.gid))

    def drop(self, g: Gpu) -> None:
        """Forget an empty floating GPU (its slot goes back to the instance pool)."""
        self._unindex(g)
        del self.gpus[g.gid]
        if g.kept is None:
            self.spare[g.gpu] += 1

    def _unindex(self, g: Gpu) -> None:
        lst = self._index[g.gpu]
        i = bisect_left(lst, (g.free, g.gid))
        if i < len(lst) and lst[i][1] == g.gid:
            del lst[i]

    def candidates(
        self, size: Size, exclude: frozenset[int] = frozenset(), per_level: int | None = None
    ) -> Iterator[Gpu]:
        """Open GPUs of `size`'s type with room for its lower bound, tightest first.

        `per_level` yields at most that many GPUs of each free share: GPUs with equal room tend
        to fail a task alike (interference needs more than the bound), so a bounded search
        moves on to roomier ones instead of trying hundreds of identical near-misses.
        """
        lst = self._index.get(size.gpu, [])
        cap = self.models[size.gpu].memory_mb
        i = bisect_left(lst, (size.lower - EPS, -1))
        level, seen = None, 0
        while i < len(lst):
            free, gid = lst[i]
            if free != level:
                level, seen = free, 0
            elif per_level is not None and seen >= per_level:
                i = bisect_left(lst, (free + EPS, -1), i)
                continue
            i += 1
            g = self.gpus[gid]
            if gid in exclude or len(g.tasks) >= self.max_colocated:
                continue
            if cap is not None and g.memory + size.memory_mb > cap:
                continue
            seen += 1
            yield g

    def shares_domain(self, g: Gpu, task: Task) -> bool:
        """Whether `task` on `g` would put two servers of a redundant workload (scaling.redundancy)
        in one fault domain: the GPU, or with spread instance a kept instance's GPUs (floating
        GPUs are kept apart when they are packed into instances, build.py)."""
        d = task.demand
        if not d.redundant:
            return False
        near = [g]
        if d.spread == "instance" and g.kept is not None:
            near = [self.gpus[i] for i in self.kept[g.kept[0]].gids if i in self.gpus]
        return any(t.workload == d.workload for h in near for t in h.tasks)

    def open_gpus(self) -> list[Gpu]:
        return list(self.gpus.values())

    def open_of(self, gpu: str) -> int:
        """How many GPUs of this type are open (empty ones too): what `candidates` searches."""
        return len(self._index.get(gpu, ()))

    # -- instance slots -----------------------------------------------------------------------
    def can_open(self, gpu: str) -> bool:
        """Whether one more floating GPU of this type fits under every max_instances."""
        return self.spare.get(gpu, 0) > 0 or self._best_option(gpu) is not None

    def open_floating(self, gpu: str) -> Gpu:
        """A new floating GPU: a spare slot of an already-counted instance first, else a new one."""
        if self.spare[gpu] == 0:
            opt = self._best_option(gpu)
            assert opt is not None, "can_open was not checked"
            self.used[opt.name] += 1
            self.spare[gpu] += opt.gpus
        self.spare[gpu] -= 1
        return self.new_gpu(gpu)

    def _best_option(self, gpu: str) -> InstanceOption | None:
        ok = [
            o for o in self.options if o.gpu == gpu and (o.max_instances is None or self.used[o.name] < o.max_instances)
        ]
        return min(ok, key=lambda o: (o.price_per_hour / o.gpus, o.gpus), default=None)

    def floating_counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for g in self.gpus.values():
            if g.kept is None and g.tasks:
                out[g.gpu] = out.get(g.gpu, 0) + 1
        return out

    def remaining(self) -> dict[str, int | None]:
        """Instances of each option still allowed beyond the kept ones (None: unlimited)."""
        kept = {o.name: 0 for o in self.options}
        for k in self.kept:
            kept[k.option.name] += 1
        return {o.name: None if o.max_instances is None else o.max_instances - kept[o.name] for o in self.options}
