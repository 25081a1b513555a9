"""Per workload, the set of MIG segments (slice profile, batch, processes) that covers its rate
with the least GPU. Pure.

ParvaGPU picks segments greedily; here it is an exact small unbounded knapsack: each slice profile
contributes its best usable row (model/mig.py), weighted by what it takes from a GPU, and the
cheapest multiset whose summed throughput reaches the rate wins. The weight is the compute slices
(the GPU has 7, so their sum over 7 is the lower bound on GPUs), times 8, plus the memory units a
slice occupies beyond its compute: a 3g slice occupies 4 of the 8 units and strands one compute
slice when two are cut together, so 2g + 1g (same compute, 3 units) is preferred at equal
throughput. Workloads whose SLOs allow the same rows share one table, so 1,000 workloads over 11
models cost a few dozen tables.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

from autoscaler.config.measured import MeasuredRow
from autoscaler.model.mig import MigModel

MAX_WEIGHT = 8 * 7 * 4096  # ~4,000 GPUs for one workload: beyond it the workload is refused


@dataclass(frozen=True, slots=True)
class Segment:
    """One slice of one workload: its profile, the row it runs, and what it takes from a GPU."""

    slice: str
    compute: int
    units: int
    row: MeasuredRow
    throughput_rps: float  # slice throughput, already divided by the SLO-guard correction

    @property
    def weight(self) -> int:
        return 8 * self.compute + (self.units - self.compute)


def items(model: MigModel, name: str, slo_ms: float, correction: float) -> tuple[Segment, ...]:
    """The candidate segments: per slice profile, its best usable row."""
    geo = model.geometry
    out = []
    for row in model.best_rows(name, slo_ms, correction):
        p = geo.profile(row.slice)
        out.append(Segment(row.slice, p.compute_slices, p.memory_units, row, row.slice_throughput_rps / correction))
    return tuple(out)


class Table:
    """best[w]: the most throughput any multiset of weight <= w serves, with the last item picked
    (for the walk back); grown on demand, so a small rate costs a small table."""

    def __init__(self, segs: tuple[Segment, ...]) -> None:
        self.segs = segs
        self.best: list[float] = [0.0]
        self.pick: list[int] = [-1]

    def grow(self, rate: float) -> None:
        while self.best[-1] < rate and len(self.best) <= MAX_WEIGHT:
            w = len(self.best)
            top, arg = self.best[w - 1], -1
            for k, s in enumerate(self.segs):
                if s.weight <= w and self.best[w - s.weight] + s.throughput_rps > top + 1e-9:
                    top, arg = self.best[w - s.weight] + s.throughput_rps, k
            self.best.append(top)
            self.pick.append(arg)

    def cover(self, rate: float) -> list[Segment] | None:
        """The lightest multiset serving at least `rate` (None if none within MAX_WEIGHT)."""
        self.grow(rate)
        w = bisect.bisect_left(self.best, rate * (1 - 1e-12))
        if w >= len(self.best):
            return None
        out = []
        while w > 0:
            k = self.pick[w]
            if k < 0:
                w -= 1
                continue
            out.append(self.segs[k])
            w -= self.segs[k].weight
        return sorted(out, key=lambda s: (-s.compute, s.slice))


class Chooser:
    """Segment sets for many workloads, one knapsack table per set of candidate segments (SLOs that
    allow the same rows share one)."""

    def __init__(self) -> None:
        self.tables: dict[tuple[Segment, ...], Table] = {}

    def segments(
        self, model: MigModel, name: str, slo_ms: float, rate: float, correction: float = 1.0
    ) -> list[Segment] | None:
        if rate <= 0:
            return []
        segs = items(model, name, slo_ms, correction)
        if not segs:
            return None
        table = self.tables.get(segs)
        if table is None:
            table = self.tables[segs] = Table(segs)
        return table.cover(rate)


def compute_slices(segs: list[Segment]) -> int:
    return sum(s.compute for s in segs)


def why_none(model: MigModel, name: str, slo_ms: float, correction: float) -> str:
    """Why no segment serves: no such model, or the SLO below the fastest measured row."""
    fastest = model.fastest_ms(name)
    if math.isinf(fastest):
        return f"model {name!r} has no measured rows on {model.profile.gpu}"
    return (
        f"SLO {slo_ms:g} ms gives a budget of {model.budget_ms(slo_ms) / correction:.2f} ms "
        f"((1 - margin) x SLO / 2), below the fastest measured latency {fastest:.2f} ms on {model.profile.gpu}"
    )
