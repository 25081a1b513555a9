"""The MIG planner's shortcuts at fleet scale (issue 50), each against the code it replaced, on
random inputs: the index of kept GPUs without room (plan.py `_room`) picks the same GPU and start
as a scan of every kept GPU; `_open` under max_instances drops the same workloads and opens the
same instances as packing again after each drop."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.config.measured import MeasuredRow
from autoscaler.config.mig import BUNDLED, MigGeometry
from autoscaler.planner.mig.gpus import Gpu, Inst, Slice
from autoscaler.planner.mig.packing import fewest_gpus, free_start
from autoscaler.planner.mig.plan import _fill, _held, _open, _room
from autoscaler.planner.mig.segments import Segment
from autoscaler.planner.mig.spread import fits, spares
from autoscaler.planner.types import Demand, InstanceOption, Unplaced
from tests.kit.examples import examples

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


@settings(max_examples=examples(50), deadline=None)
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


def _open_by_packing(where, segs, insts, options, model) -> list[Unplaced]:  # type: ignore[no-untyped-def]
    """The code before issue 50: pack, and while the caps cannot hold it drop the workload with
    the most compute (ties: by name) and pack again."""
    gpu = where[0]
    opts = [o for o in options if o.gpu == gpu]
    used = Counter(i.option.key for i in insts)
    limits = [None if o.max_instances is None else max(0, o.max_instances - used[o.key]) for o in opts]
    dropped = []
    while segs:
        got = _held(model, fewest_gpus(model.geometry, Counter(s.slice for _, s in segs)), segs, where, (opts, limits))
        if got is None:
            need: Counter[str] = Counter()
            for d, s in segs:
                need[d.workload] += s.compute
            gone = max(sorted(need), key=lambda w: need[w])
            segs = [(d, s) for d, s in segs if d.workload != gone]
            dropped.append(Unplaced(gone, f"no capacity: the {gpu} instance types are at max_instances"))
            continue
        _fill(got[0], got[1], insts)
        break
    return dropped


def _shape(insts: list[Inst]) -> list[tuple[str, list[list[tuple[str, tuple[str, int]]]]]]:
    return [(i.option.name, [[(s.workload, s.slot) for s in g.slices] for g in i.gpus]) for i in insts]


caps = st.one_of(st.none(), st.integers(0, 6))
# whole-GPU and 1g slices pack to the compute bound exactly: the caps then fall on the bound's edge
tight = st.tuples(st.sampled_from(WORKLOADS), st.sampled_from(["7g.80gb", "1g.10gb", "4g.40gb"]), st.integers(1, 40))


@settings(max_examples=examples(40), deadline=None)
@given(
    todo=st.lists(st.one_of(slices, tight, tight), min_size=1, max_size=14),
    apart=st.sets(st.sampled_from(WORKLOADS)),
    small=caps,
    big=st.one_of(st.none(), st.integers(0, 3)),
    held=st.integers(0, 2),
)
def test_open_under_caps_drops_what_packing_after_each_drop_drops(
    todo: list[tuple[str, str, int]], apart: set[str], small: int | None, big: int | None, held: int
) -> None:
    options = [InstanceOption("one", "a100-80gb", 1, 5.0, small), InstanceOption("two", "a100-80gb", 2, 9.0, big)]
    segs = [(Demand(w, "m", 100.0, 10.0, min_servers=2 if w in apart else 1), _seg(n, r)) for w, n, r in todo]
    where = ("a100-80gb", spares(segs, {}))
    model = SimpleNamespace(geometry=GEO)
    kept = [Inst(options[0], [Gpu("a100-80gb")]) for _ in range(held)]
    mine, theirs = list(kept), list(kept)
    assert _open(where, list(segs), mine, options, model) == _open_by_packing(where, list(segs), theirs, options, model)  # type: ignore[arg-type]
    assert _shape(mine) == _shape(theirs)
