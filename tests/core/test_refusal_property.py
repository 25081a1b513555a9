"""Refusals without a judgement change no move (issue 50): random MIG fleets on paper, stepped with
a judge that says what it refuses (rollout_types.Refusals: a slice whose units are taken) and with
the same judge without that, give the same diffs step by step. The MPS side is checked against the
scanning reference in tests/core/test_indexed_property.py (its refusing judge)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.core.layout.layout_types import PlannedServer, SlotSpec
from autoscaler.core.rollout.reconcile import Limits
from autoscaler.core.rollout.rollout import Judge
from tests.core.test_rollout_mig import A100, GEO, mig_judge, sl
from tests.kit.examples import examples
from tests.kit.paperfleet import PaperFleet, fleet

pytestmark = pytest.mark.property


class RefusingMig:
    """mig_judge, refusing without a judgement a slice whose units a slice beside it holds, or one
    at a start its profile does not allow (it misses alone; neighbours never help a slice)."""

    def __call__(self, instance_type: str, servers: Sequence[PlannedServer]) -> list[tuple[bool, float]]:
        return mig_judge(instance_type, servers)

    def misses_alone(self, instance_type: str, s: PlannedServer) -> bool:
        return s.mig_profile is None or s.mig_start is None or not GEO.valid([(s.mig_profile, s.mig_start)])

    def only_slow(self, instance_type: str, beside: Sequence[PlannedServer], room: float) -> bool:
        return True

    def refuses(self, instance_type: str, s: PlannedServer, beside: Sequence[PlannedServer]) -> bool:
        if self.misses_alone(instance_type, s):
            return True
        assert s.mig_profile is not None and s.mig_start is not None
        lo, hi = s.mig_start, s.mig_start + GEO.profile(s.mig_profile).memory_units
        return any(
            b.mig_profile is not None
            and b.mig_start is not None
            and b.mig_start < hi
            and lo < b.mig_start + GEO.profile(b.mig_profile).memory_units
            for b in beside
        )


def _cut(rng: random.Random, workloads: int, names: list[str]) -> tuple[PlannedServer, ...]:
    """Up to three slices of distinct workloads that form a valid cut, often with units free."""
    out: list[PlannedServer] = []
    for w in rng.sample(range(workloads), min(workloads, rng.randint(0, 3))):
        p = rng.choice(GEO.profiles[:4])
        start = rng.choice(p.starts)
        if not GEO.valid([*((s.mig_profile or "", s.mig_start or 0) for s in out), (p.name, start)]):
            continue
        names.append(f"w{w}-{len(names)}")
        out.append(replace(sl(names[-1], f"w{w}", p.name, start, index=len(out)), rate_rps=60.0))
    return tuple(out)


def mig_paper_fleet(rng: random.Random, n: int, judge: Judge) -> PaperFleet:
    """n ready A100s, most at rest, some re-cut (another GPU's slices, or a new cut), new instances
    booting, rates around what the layout carries: moves, stand-ins and bursts into free units."""
    workloads = max(2, n // 2)
    names: list[str] = []
    applied = {f"s{i}": _cut(rng, workloads, names) for i in range(n)}
    layout = []
    for i in range(n):
        have, roll = applied[f"s{i}"], rng.random()
        if roll < 0.6:
            want = have
        elif roll < 0.8:
            want = tuple(replace(v, name=f"{v.name}-m{i}") for v in applied[f"s{rng.randrange(n)}"])
        else:
            want = _cut(rng, workloads, names)
        layout.append(SlotSpec(f"s{i}", "p3", 3.0, ("a100-80gb",), want))
    for i in range(n, n + rng.randint(1, max(1, n // 4))):
        layout.append(SlotSpec(f"s{i}", "p3", 3.0, ("a100-80gb",), _cut(rng, workloads, names)))
    planned: dict[str, float] = {}
    for spec in layout:
        for v in spec.servers:
            planned[v.workload] = planned.get(v.workload, 0.0) + v.predicted_throughput_rps
    rates = {w: c * rng.uniform(0.6, 1.6) for w, c in planned.items()}
    limits = Limits(types=A100, judge=judge, max_surge=rng.choice((0, 1, 2, None)))
    return fleet(layout, applied, limits=limits, rates=rates, judge=judge, drained=frozenset())


def same_steps(with_: PaperFleet, without: PaperFleet) -> None:
    """Step both fleets until at rest (10 steps at most): every step's diff is the same."""
    for _ in range(10):
        d = with_.step()
        assert without.step() == d
        with_.drained = without.drained = frozenset(d.step.draining) if d.step is not None else frozenset()
        if not d.actions and d.converged:
            break


@settings(max_examples=examples(40), deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(2, 16))
def test_refusals_change_no_mig_move(seed: int, n: int) -> None:
    with_, without = (mig_paper_fleet(random.Random(seed), n, j) for j in (RefusingMig(), mig_judge))
    same_steps(with_, without)


class RoomedMig(RefusingMig):
    """RefusingMig that also names a GPU's kind of room (rollout_types.Rooms): the slices it holds,
    all its `refuses` reads of the GPU. Counts the refusals it was asked."""

    def __init__(self) -> None:
        self.asked = 0

    def room_of(self, instance_type: str, beside: Sequence[PlannedServer]) -> frozenset[tuple[str, int]]:
        return frozenset((b.mig_profile, b.mig_start) for b in beside if b.mig_profile and b.mig_start is not None)

    def refuses(self, instance_type: str, s: PlannedServer, beside: Sequence[PlannedServer]) -> bool:
        self.asked += 1
        return super().refuses(instance_type, s, beside)


@settings(max_examples=examples(40), deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(2, 16))
def test_a_refusal_read_by_kind_of_room_changes_no_mig_move(seed: int, n: int) -> None:
    """judged.py refuses_all: a refusal found on one GPU read for every GPU with the same slices
    (the answer found again once a GPU's slices change) gives the diffs of asking each GPU."""
    roomed = RoomedMig()
    with_, without = (mig_paper_fleet(random.Random(seed), n, j) for j in (roomed, RefusingMig()))
    same_steps(with_, without)


def test_a_gpus_room_is_found_again_once_its_slices_change() -> None:
    """A refusal read by kind of room follows a GPU's change within the tick: the 3g slice at
    start 0 is refused while a slice holds those units, and not once the GPU's slices were freed
    (Tick version), though the probes are the same list object."""
    from autoscaler.core.rollout.rollout import Gpu, RolloutInput, Tick

    judge = RoomedMig()
    held = sl("a-0", "a", "4g.40gb", 0)
    gpu = Gpu(key=("s0", 0), instance_type="p3", running=(held,), wanted=(held,))
    tick = Tick(RolloutInput(gpus=(gpu,), ready=frozenset({"a-0"}), demand={}, judge=judge))
    probes = [sl("b-0-s0", "b", "3g.40gb", 0)]
    assert tick.refuses_all(("s0", 0), probes)
    asked = judge.asked
    assert tick.refuses_all(("s0", 0), probes) and judge.asked == asked  # read, not asked again
    tick._commit(("s0", 0), [], tick._judge(("s0", 0), []))
    assert not tick.refuses_all(("s0", 0), probes)
