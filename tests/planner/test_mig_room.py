"""The MIG planner's index of kept GPUs without room (plan.py `_room`, issue 50): placing slices
one after another, it picks the same GPU and start as scanning every kept GPU in order does (the
code before the index), for random kept GPUs, redundant workloads' spares and slice orders."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.config.measured import MeasuredRow
from autoscaler.config.mig import BUNDLED, MigGeometry
from autoscaler.planner.mig.gpus import Gpu, Slice
from autoscaler.planner.mig.packing import free_start
from autoscaler.planner.mig.plan import _room
from autoscaler.planner.mig.segments import Segment
from autoscaler.planner.mig.spread import fits
from autoscaler.planner.types import Demand

pytestmark = [pytest.mark.unit, pytest.mark.property]

GEO = BUNDLED["a100-80gb"]
NAMES = [p.name for p in GEO.profiles]
WORKLOADS = ["a", "b", "c", "d"]

# (workload, profile, throughput): a slice already on a kept GPU, or one to place
slices = st.tuples(st.sampled_from(WORKLOADS), st.sampled_from(NAMES), st.integers(1, 40))
kept = st.lists(st.lists(slices, max_size=6), max_size=12)


def _seg(name: str, rps: int) -> Segment:
    p = GEO.profile(name)
    row = MeasuredRow(slice=name, batch=1, processes=1, throughput_rps=float(rps), latency_ms=1.0)
    return Segment(name, p.compute_slices, p.memory_units, row, float(rps))


def _gpus(spec: list[list[tuple[str, str, int]]]) -> list[Gpu]:
    """Kept GPUs: each spec slice at its lowest free start, those without room left out."""
    out = []
    for gpu_spec in spec:
        g = Gpu("a100-80gb")
        for w, name, rps in gpu_spec:
            start = free_start(GEO, g.cut(), name)
            if start is not None:
                g.slices.append(Slice(w, "m", (name, start), _seg(name, rps), kept=True))
        out.append(g)
    return out


def _scan(geo: MigGeometry, gpus: list[Gpu], d: Demand, s: Segment, spare: dict[str, float]) -> tuple[Gpu, int] | None:
    """The unindexed reference: every kept GPU in order."""
    for g in gpus:
        if fits(g, d, s, spare) and (st_ := free_start(geo, g.cut(), s.slice)) is not None:
            return g, st_
    return None


@settings(max_examples=50, deadline=None)
@given(
    spec=kept,
    todo=st.lists(slices, max_size=40),
    apart=st.sets(st.sampled_from(WORKLOADS)),
    spares=st.dictionaries(st.sampled_from(WORKLOADS), st.integers(0, 80)),
)
def test_room_picks_what_a_scan_of_every_kept_gpu_picks(
    spec: list[list[tuple[str, str, int]]],
    todo: list[tuple[str, str, int]],
    apart: set[str],
    spares: dict[str, int],
) -> None:
    indexed, plain = _gpus(spec), _gpus(spec)
    spare = {w: float(v) for w, v in spares.items()}
    full: dict[str, int] = {}
    for w, name, rps in todo:
        d = Demand(w, "m", 100.0, 10.0, min_servers=2 if w in apart else 1)
        s = _seg(name, rps)
        got, want = _room(GEO, indexed, full, (d, s, spare)), _scan(GEO, plain, d, s, spare)
        assert (got is None) == (want is None)
        if got is None or want is None:
            continue
        assert (indexed.index(got[0]), got[1]) == (plain.index(want[0]), want[1])
        got[0].slices.append(Slice(w, "m", (name, got[1]), s))
        want[0].slices.append(Slice(w, "m", (name, want[1]), s))
