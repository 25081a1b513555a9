"""The records rollout.py takes and gives (what each GPU runs and wants, the tick's input, its
step with the capacity accounting), the judge's signature, the model-free judge, stand-in names
and req/s amounts per workload. Pure; the invariant and the tick are rollout.py's."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from autoscaler.core.layout.layout_types import STAND_IN, PlannedServer
from autoscaler.model.perfmodel import PerfModel

Judge = Callable[[str, Sequence[PlannedServer]], Sequence[tuple[bool, float]]]  # per server: (meets budget, req/s)
GpuKey = tuple[str, int]  # (slot, GPU index)
EPS = 1e-6
Shape = Callable[[str, PlannedServer], Hashable | None]  # (instance type, server) -> what a judge reads of it


def shape_of(judge: Judge) -> Shape | None:
    """A judge's `shape` method, where it has one: all that the judge reads of one server on an
    instance type, as a projection of the server's fields (each field as the judge reads it), or
    None where it cannot say. A shape never reads a server's name, GPU index or port index: they
    place a server, the judge judges what runs. Two servers of one shape are judged alike beside the same neighbours,
    so burst_memo.py lets equal-shaped candidates of different workloads share one trial."""
    shape = getattr(judge, "shape", None)
    return shape if callable(shape) else None


@runtime_checkable
class Refusals(Protocol):
    """What a judge may say without a judgement (colocation.ModelJudge, crowding.py): a burst or
    a stand-in tries every GPU with room (borrowing.py, bursting.py), and most refuse it. Each answer is True only
    where it is sure; False where it cannot say. None of them reads a server's name, GPU index,
    port index or predecessor (`replaces`), like `shape_of`. `misses_alone(s)` and
    `only_slow(beside, s's share)` together say `refuses(s, beside)`: the first is found once for
    every GPU with the same room, the second once per GPU (borrowing.py, bursting.py)."""

    def refuses(self, instance_type: str, s: PlannedServer, beside: Sequence[PlannedServer]) -> bool:
        """s misses its budget judged with any of `beside` (the rest of its GPU) loading it too,
        and every MIG slice of `beside` there (a slice holds its units, loaded or not: Tick._verdict)."""

    def misses_alone(self, instance_type: str, s: PlannedServer) -> bool:
        """s misses its budget alone, and can only fare worse beside servers `only_slow` accepts."""

    def only_slow(self, instance_type: str, beside: Sequence[PlannedServer], room: float) -> bool:
        """Each of `beside` can only slow down a newcomer of at most `room` MPS share."""


@runtime_checkable
class Rooms(Protocol):
    """A judge that says what its refusals read of a GPU (colocation.ModelJudge): on MIG, only the
    memory units its slices hold. A burst tries every GPU of its type, thousands at fleet scale,
    and they fall into few kinds of room: a refusal found for one kind holds for every GPU of it
    (judged.py `refuses_all`), so a late server costs a lookup per GPU, not a judgement."""

    def room_of(self, instance_type: str, beside: Sequence[PlannedServer]) -> Hashable | None:
        """A key such that `refuses(instance_type, s, a) == refuses(instance_type, s, b)` for every
        s wherever `room_of(instance_type, a) == room_of(instance_type, b)`; None where the judge
        cannot say (then each GPU is asked itself)."""


@runtime_checkable
class Bounds(Protocol):
    """A judge's verdict at its most hopeful, said without a judgement (colocation.ModelJudge,
    crowding.at_best): a stand-in tries every ready GPU of its type (borrowing.py), and on a full
    one nearly every trial fails (MPS splits the shares: the newcomer, or a server already there,
    then misses its budget, or the newcomer carries less than it must). Like `Refusals`, it reads
    no server's name, GPU index, port index or predecessor (`replaces`)."""

    def hopeful(self, instance_type: str, servers: Sequence[PlannedServer]) -> Sequence[tuple[bool, float]] | None:
        """Per server, what `judge(instance_type, servers)` says of it at best: False only where
        that verdict surely misses the budget, and a throughput it never exceeds; None where the
        judge cannot say."""


@runtime_checkable
class Modelled(Protocol):
    """A judge whose verdict on an MPS GPU is the performance model's own (colocation.ModelJudge):
    bursting reasons on that model directly (burst_memo.py, crowding.presses_on)."""

    def mps_model(self, instance_type: str) -> PerfModel | None:
        """The MPS model this judge's verdict on `instance_type` comes from; None where it judges
        otherwise (a MIG GPU, an unknown type, a judge that changed the verdict)."""


def modelled_of(judge: Judge) -> Modelled | None:
    """The judge itself where its verdict is the MPS model's own (`Modelled`), else None."""
    return judge if isinstance(judge, Modelled) else None


def bounds_of(judge: Judge) -> Bounds | None:
    """The judge itself where it says its most hopeful verdict without a judgement (`Bounds`)."""
    return judge if isinstance(judge, Bounds) else None


def refusal_of(judge: Judge) -> Refusals | None:
    """The judge itself where it says what it refuses without a judgement (`Refusals`), else None."""
    return judge if isinstance(judge, Refusals) else None


def rooms_of(judge: Judge) -> Rooms | None:
    """The judge itself where it says what its refusals read of a GPU (`Rooms`), else None."""
    return judge if isinstance(judge, Rooms) else None


def original_of(name: str) -> str | None:
    """The server a stand-in stands in for (None for any other server)."""
    m = STAND_IN.search(name)
    return name[: m.start()] if m else None


def shares_judge(instance_type: str, servers: Sequence[PlannedServer]) -> Sequence[tuple[bool, float]]:
    """The model-free judge: every server carries its planned throughput while the GPU's MPS shares
    sum to 100 % at most, and none does beyond (without a model, over-subscription is never safe)."""
    ok = sum(s.mps_percent for s in servers) <= 100.0 + EPS
    return [(ok, s.predicted_throughput_rps if ok else 0.0) for s in servers]


@dataclass(frozen=True, slots=True, kw_only=True)
class Gpu:
    """One GPU of a ready instance: what its agent runs there and what the layout wants there."""

    key: GpuKey
    instance_type: str
    running: tuple[PlannedServer, ...]
    wanted: tuple[PlannedServer, ...] = ()  # () on surplus and surge instances
    # MIG slices (profile, start) its agent reports still holding that no server assigned there
    # runs in: an old slice whose server is still stopping, or one the agent did not create.
    # Their units are not free: a planned slice on them waits until the agent reports them gone.
    held: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class RolloutInput:
    gpus: tuple[Gpu, ...]
    ready: frozenset[str]  # server names that report ready
    demand: Mapping[str, float]  # per workload (module docstring); a workload missing here keeps all it has
    judge: Judge = shares_judge
    baseline: Mapping[str, float] | None = None  # capacity when the current change began; None: it begins now
    drained: frozenset[str] | None = None  # None: no gateway, a server may leave at once
    draining: frozenset[str] = frozenset()  # servers the gateway began draining in an earlier tick
    pending: frozenset[str] = frozenset()  # workloads with planned servers not ready yet
    elsewhere: frozenset[str] = frozenset()  # planned servers on instances not ready yet (booting)
    planned: Mapping[str, float] | None = None  # per workload, what the layout's servers carry (None: unknown)


@dataclass(frozen=True, slots=True, kw_only=True)
class RolloutStep:
    """What the GPUs run after this tick, and the capacity accounting behind it."""

    assign: Mapping[GpuKey, tuple[PlannedServer, ...]]
    started: frozenset[str]
    stopped: frozenset[str]
    draining: frozenset[str]  # may leave, waiting for the gateway to report them drained
    blocked: Mapping[GpuKey, tuple[PlannedServer, ...]]  # planned servers that could not start
    before: Mapping[str, float]  # ready capacity at the start of the tick
    after: Mapping[str, float]  # ready capacity the assignment leaves (servers started now: once ready)
    floor: Mapping[str, float]
    baseline: Mapping[str, float]  # the capacity before the change, as used for the floors
    forced: frozenset[str] = frozenset()  # removed before their replacements serve (a limit made it impossible)

    def short(self) -> dict[str, float]:
        """Workloads this tick left below their floor (or below where they were, if lower), by how
        much: only forced removals do that."""
        gaps = {w: min(f, self.before.get(w, 0.0)) - self.after.get(w, 0.0) for w, f in self.floor.items()}
        return {w: g for w, g in gaps.items() if g > EPS * (1.0 + self.floor[w])}

    converged: bool = False  # every GPU runs exactly what the layout wants, all of it ready


class Amounts(dict[str, float]):
    """Req/s per workload; a workload not in it has 0."""

    def __missing__(self, key: str) -> float:
        return 0.0

    def plus(self, other: Mapping[str, float]) -> Amounts:
        out = Amounts(self)
        for k, v in other.items():
            out[k] = out[k] + v
        return out

    def minus(self, other: Mapping[str, float]) -> Amounts:
        """Less `other`, never below 0 (float rounding)."""
        out = Amounts(self)
        for k, v in other.items():
            out[k] = max(0.0, out[k] - v)
        return out

    @staticmethod
    def total(parts: Iterable[Mapping[str, float]]) -> Amounts:
        out = Amounts()
        for p in parts:
            for k, v in p.items():
                out[k] = out[k] + v
        return out
