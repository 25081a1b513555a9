"""Which blocked moves wait, and which need surge capacity to happen at all. Pure.

A planned server is blocked when its GPU cannot hold it beside the servers still there
(rollout.Tick). Those servers (its *blockers*) leave once their own workload's new capacity serves.
Where that capacity is itself coming (its instance is booting or launches now, it has started and
is not ready yet, or it is blocked behind servers that leave for the same reason), waiting is
enough. Otherwise waiting never ends: a resize on a full GPU (the old server waits for the new one,
which waits for the old one's room), two workloads exchanging GPUs, a cycle of moves, a shrink on a
full GPU. That is the deadlock the old reconcile broke by removing servers first.

`resolve` finds the workloads that make progress (a least fixed point: two moves that each wait
for the other never count), then picks blocked GPUs one at a time, the one with the fewest planned
servers waiting first, until every blocked GPU either waits for progress or is picked. A pick's
waiting servers start early on surge capacity as temporary copies (surge.py): once a copy serves,
its workload has the capacity it was planned to get, so its old servers may leave wherever they
stand in the way (this very GPU for a resize, the other one of a swap, the next one of a cycle),
the planned servers start where they were planned, and the copies leave once those serve. A pick
counts as progress for the next round: one pick per cycle of moves. When every blocked GPU waits or
is picked, every blocker belongs to a workload that progresses, so no move waits forever.

Never picked: a GPU whose blocker belongs to a workload whose new capacity cannot come (its
instance's launch is blocked by a limit), or that has nothing planned to wait for (it still needs
the server because its demand is above what its plan carries). That server never leaves, so
surge there would stay for good and removing it would leave the workload short with no end; the
move waits, noted.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from autoscaler.core.layout.layout_types import PlannedServer
from autoscaler.core.rollout.rollout import GpuKey


@dataclass(frozen=True, slots=True, kw_only=True)
class Blockage:
    """A GPU with planned servers that could not start, and the servers in their way."""

    key: GpuKey
    instance_type: str
    waiting: tuple[PlannedServer, ...]  # planned servers that could not start
    blockers: tuple[PlannedServer, ...]  # servers the layout does not want there, still carrying capacity


@dataclass(frozen=True, slots=True, kw_only=True)
class Progress:
    """Where each workload's planned servers stand."""

    pending: Mapping[str, frozenset[str]]  # workload -> planned server names not ready yet
    coming: frozenset[str]  # names that come up on their own: started, or on a booting or launching instance
    never: frozenset[str]  # names that cannot come: their instance's launch is blocked by a limit
    leaving: frozenset[str] = frozenset()  # blockers that may leave once their workload's coming servers serve


@dataclass(frozen=True, slots=True, kw_only=True)
class Pick:
    """A blocked GPU whose waiting planned servers need temporary copies on surge capacity."""

    blockage: Blockage

    @property
    def needs(self) -> tuple[PlannedServer, ...]:
        return self.blockage.waiting


@dataclass(frozen=True, slots=True, kw_only=True)
class Resolution:
    picks: tuple[Pick, ...]  # in the order chosen
    waiting: tuple[Blockage, ...]  # blocked GPUs that wait for progress elsewhere
    stuck: tuple[tuple[Blockage, str], ...]  # blocked GPUs no stand-in can help, and why


def resolve(blockages: Sequence[Blockage], progress: Progress) -> Resolution:
    """Picks and waits (see the module docstring)."""
    at = {t.name: b for b in blockages for t in b.waiting}
    picked: dict[GpuKey, Pick] = {}
    stuck: dict[GpuKey, str] = {}
    moving = _Moving(progress, at)
    while True:
        open_ = [b for b in blockages if b.key not in picked and not _waits(b, moving.workloads, progress.leaving)]
        for b in open_:
            if b.key not in stuck and (why := _hopeless(b, progress, moving.workloads)) is not None:
                stuck[b.key] = why
        candidates = [b for b in open_ if b.key not in stuck]
        if not candidates:
            break
        best = min(candidates, key=lambda b: (len(b.waiting), sum(s.mps_percent for s in b.waiting), b.key))
        picked[best.key] = Pick(blockage=best)
        moving.pick(best)
    waiting = tuple(b for b in blockages if b.key not in picked and b.key not in stuck)
    return Resolution(
        picks=tuple(picked.values()),
        waiting=waiting,
        stuck=tuple((b, stuck[b.key]) for b in blockages if b.key in stuck),
    )


class _Moving:
    """The workloads that progress (`workloads`): the least fixed point of the rule that a
    workload progresses when each of its pending servers is coming, or blocked on a picked GPU, or
    blocked only by servers of workloads that progress (`_waits`). Found by counting (a worklist):
    each workload counts its servers not known to move, each blocked GPU its blockers that neither
    leave nor progress yet; a GPU whose count reaches 0 moves the servers waiting on it (it is
    released), a workload whose count reaches 0 progresses and lowers the count of each GPU it
    blocks. A pick releases its GPU, and the counting goes on from where it stood: the fixed point
    only grows with the picks, so `resolve` does not count every server again for each pick.
    (Iterating the rule from nothing took a pass over every server per round, and a round per
    link of the longest chain of waits.)"""

    def __init__(self, progress: Progress, at: Mapping[str, Blockage]) -> None:
        self.left: dict[str, int] = {}  # workload -> its pending servers not known to move
        self.waiting: dict[int, list[str]] = {}  # id(blocked GPU) -> the workload of each server waiting there
        self.need: dict[int, int] = {}  # id(blocked GPU) -> its blockers that neither leave nor progress yet
        self.held: dict[str, list[int]] = defaultdict(list)  # workload -> id(the GPU) each of its blockers holds
        self.released: set[int] = set()
        self.workloads: set[str] = set()
        for w, names in progress.pending.items():
            if names:  # nothing pending: not progress (`resolve` calls it still needing its servers)
                self._count(w, names, progress, at)
        self._run([w for w, k in self.left.items() if k == 0], [g for g, k in self.need.items() if k == 0])

    def _count(self, w: str, names: frozenset[str], progress: Progress, at: Mapping[str, Blockage]) -> None:
        self.left[w] = 0
        for n in names:
            if n in progress.coming:
                continue
            self.left[w] += 1
            b = at.get(n)
            if b is None:
                continue  # it never moves
            if id(b) not in self.waiting:
                self.waiting[id(b)] = []
                self._blocks(b, progress)
            self.waiting[id(b)].append(w)

    def _blocks(self, b: Blockage, progress: Progress) -> None:
        """Count b's blockers; one with none moves only once picked."""
        if not b.blockers:
            return
        self.need[id(b)] = 0
        for s in b.blockers:
            if s.name not in progress.leaving:
                self.need[id(b)] += 1
                self.held[s.workload].append(id(b))

    def pick(self, b: Blockage) -> None:
        """A picked GPU's waiting servers move: they start early on surge capacity."""
        if id(b) in self.waiting:
            self._run([], [id(b)])

    def _run(self, workloads: list[str], gpus: list[int]) -> None:
        while workloads or gpus:
            if gpus:
                self._release(gpus.pop(), workloads)
                continue
            w = workloads.pop()
            self.workloads.add(w)
            for g in self.held.get(w, ()):
                self.need[g] -= 1
                if self.need[g] == 0:
                    gpus.append(g)

    def _release(self, g: int, workloads: list[str]) -> None:
        if g in self.released:
            return
        self.released.add(g)
        for w in self.waiting[g]:
            self.left[w] -= 1
            if self.left[w] == 0:
                workloads.append(w)


def _waits(b: Blockage, moving: set[str], leaving: frozenset[str] = frozenset()) -> bool:
    """Every blocker leaves once capacity already on its way serves."""
    return bool(b.blockers) and all(s.workload in moving or s.name in leaving for s in b.blockers)


def _hopeless(b: Blockage, progress: Progress, moving: set[str]) -> str | None:
    """Why no stand-in can help this GPU, or None."""
    if not b.blockers:
        return "nothing in the way can leave: the judge or a floor rejects the planned servers here"
    for s in b.blockers:
        if s.workload in moving or s.name in progress.leaving:
            continue
        pending = progress.pending.get(s.workload, frozenset())
        if pending & progress.never:
            return f"{s.name} stays: {s.workload}'s new capacity cannot launch ({', '.join(sorted(pending & progress.never))})"
        if not pending:
            return f"{s.name} stays: {s.workload} still needs it (its demand is above what its plan carries)"
    return None
