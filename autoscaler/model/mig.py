"""The planner's view of a MIG GPU: its valid cuts and its usable measured rows. Pure.

`cuts` enumerates the maximal valid cuts of one GPU (the geometry is autoscaler/config/mig.py): on
an A100 with the five ParvaGPU profiles there are a dozen or so, so packing can choose among all of
them exactly. `MigModel` holds a measured profile and the policy's latency margin: the rows a
workload may use under ParvaGPU's rule (latency at most (1 - margin) x SLO / 2; margin 0.1 by
default, `scaling.mig_latency_margin` in a policy) and, per slice profile, the one usable row that
serves most (a slice's throughput is processes x one process's). Any other usable row of the same
slice serves less in the same space, so only these are planned.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache, lru_cache
from pathlib import Path

from autoscaler.config.measured import MeasuredProfile, MeasuredRow
from autoscaler.config.mig import MigGeometry, SliceProfile, Slot
from autoscaler.config.profile import load_any_profile
from autoscaler.model.perfmodel import PerfModel, load_perf_model

DEFAULT_MARGIN = 0.1


def cuts(geometry: MigGeometry, names: frozenset[str] | None = None) -> tuple[tuple[Slot, ...], ...]:
    """Every maximal valid cut of one GPU using only the profiles in `names` (None: all): a cut
    to which no further allowed slice can be added. Every valid cut is a subset of one of these."""
    allowed = tuple(p for p in geometry.profiles if names is None or p.name in names)
    return _cuts(geometry, allowed)


@cache
def _cuts(geometry: MigGeometry, allowed: tuple[SliceProfile, ...]) -> tuple[tuple[Slot, ...], ...]:
    found: set[tuple[Slot, ...]] = set()
    for cut in _grow(geometry, allowed, ()):
        if not any(geometry.valid((*cut, (p.name, s))) for p in allowed for s in p.starts):
            found.add(cut)
    return tuple(sorted(found))


def _grow(
    geometry: MigGeometry, allowed: tuple[SliceProfile, ...], cut: tuple[Slot, ...]
) -> Iterator[tuple[Slot, ...]]:
    """Cuts built in increasing (start, name) order, so each set is produced once."""
    yield cut
    last = cut[-1] if cut else (None, -1)
    for p in allowed:
        for s in p.starts:
            if (s, p.name) <= (last[1], last[0] or ""):
                continue
            if geometry.valid((*cut, (p.name, s))):
                yield from _grow(geometry, allowed, (*cut, (p.name, s)))


@dataclass(frozen=True)
class MigModel:
    """The planner's view of a measured profile, with the policy's latency margin."""

    profile: MeasuredProfile
    margin: float = DEFAULT_MARGIN
    _best: dict[tuple[str, float], tuple[MeasuredRow, ...]] = field(default_factory=dict, compare=False, repr=False)

    @property
    def geometry(self) -> MigGeometry:
        return self.profile.mig

    @property
    def models(self) -> frozenset[str]:
        return frozenset(self.profile.models)

    def budget_ms(self, slo_ms: float) -> float:
        """The latency a row may have: (1 - margin) x SLO / 2 (the other half fills the batch)."""
        return (1.0 - self.margin) * slo_ms / 2.0

    def usable(self, row: MeasuredRow, slo_ms: float, correction: float = 1.0) -> bool:
        return row.latency_ms * correction <= self.budget_ms(slo_ms) * (1 + 1e-9)

    def best_rows(self, model: str, slo_ms: float, correction: float = 1.0) -> tuple[MeasuredRow, ...]:
        """Per slice profile, the usable row with the most slice throughput (ties: fewer processes,
        then smaller batch: fewer copies in memory, shorter batches); ordered by compute slices."""
        key = (model, slo_ms * correction)
        if key not in self._best:
            self._best[key] = self._pick(model, slo_ms, correction)
        return self._best[key]

    def _pick(self, model: str, slo_ms: float, correction: float) -> tuple[MeasuredRow, ...]:
        best: dict[str, MeasuredRow] = {}
        for r in self.profile.models.get(model, ()):
            if not self.usable(r, slo_ms, correction):
                continue
            old = best.get(r.slice)
            if old is None or _rank(r) > _rank(old):
                best[r.slice] = r
        geo = self.geometry
        return tuple(sorted(best.values(), key=lambda r: (geo.profile(r.slice).compute_slices, r.slice)))

    def row(self, model: str, slice_name: str, batch: int, processes: int) -> MeasuredRow | None:
        """The measured row for exactly this (slice, batch, processes), if there is one."""
        for r in self.profile.models.get(model, ()):
            if (r.slice, r.batch, r.processes) == (slice_name, batch, processes):
                return r
        return None

    def fastest_ms(self, model: str) -> float:
        return min((r.latency_ms for r in self.profile.models.get(model, ())), default=math.inf)


def _rank(r: MeasuredRow) -> tuple[float, int, int]:
    return (round(r.slice_throughput_rps, 9), -r.processes, -r.batch)


GpuModel = PerfModel | MigModel  # what a GPU type is planned from: the fitted model or measured rows


def load_gpu_model(path: str | Path, margin: float = DEFAULT_MARGIN) -> GpuModel:
    """A profile of either kind as the planner reads it: measured rows (with the policy's latency
    margin) or the fitted model; once per (file, modification time, margin). The file is told by
    one stat of the path (its device, inode and mtime, through symlinks: a re-pointed link is a
    new file), not by resolving it, which costs a system call per path component on every plan."""
    where = os.path.abspath(path)
    try:
        st = os.stat(where)
        stamp = (st.st_dev, st.st_ino, st.st_mtime_ns)
    except OSError:
        stamp = (0, 0, 0)
    return _load(where, stamp, margin)


def mig_starts(model: GpuModel) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """Each slice profile's allowed starts on a MIG GPU (surge.TypeInfo.mig_starts); () for a GPU
    with an MPS model."""
    if not isinstance(model, MigModel):
        return ()
    return tuple((p.name, tuple(p.starts)) for p in model.geometry.profiles)


@lru_cache(maxsize=32)
def _load(path: str, _stamp: tuple[int, int, int], margin: float) -> GpuModel:
    profile = load_any_profile(path)
    if isinstance(profile, MeasuredProfile):
        return MigModel(profile, margin)
    return load_perf_model(path)


def best_slice_rps_per_gpu(model: MigModel, name: str, slo_ms: float, correction: float = 1.0) -> float:
    """The most one whole GPU can serve of this model within the budget, if every compute slice ran
    the usable row that serves most per compute slice (an upper bound: limits.py)."""
    compute = model.geometry.compute_slices
    return max(
        (
            r.slice_throughput_rps / correction * compute / model.geometry.profile(r.slice).compute_slices
            for r in model.best_rows(name, slo_ms, correction)
        ),
        default=0.0,
    )
