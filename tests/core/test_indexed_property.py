"""Issue 50: the indexed fleet-scale algorithms give the answers the all-pairs ones gave
(tests/kit/reference.py), on random fleets on paper, small ones in many shapes and one large."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import replace
from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.config.offerings import offering_key
from autoscaler.core.layout.layout_types import Layout, LayoutInput, PlannedServer, SlotSpec, WorkloadInfo
from autoscaler.core.layout.slots import match_slots
from autoscaler.core.rollout import blocking
from autoscaler.core.rollout.blocking import Blockage, Pick, Progress, resolve
from autoscaler.core.rollout.judged import Judged, Part
from autoscaler.core.rollout.reconcile import Limits
from autoscaler.core.rollout.rollout import GpuKey, Judge, shares_judge
from autoscaler.core.rollout.surge import TypeInfo
from autoscaler.planner.types import GpuOut, InstanceOut, PlacementOut, Plan
from tests.kit import reference
from tests.kit.examples import examples
from tests.kit.paperfleet import PaperFleet, fleet

pytestmark = pytest.mark.property

TYPES = (("p3", 1), ("g5", 2))
SHARES = (10.0, 20.0, 25.0, 30.0, 50.0)


def _server(rng: random.Random, w: str, gpu: int, k: int) -> PlannedServer:
    mps = rng.choice(SHARES)
    return PlannedServer(
        name=f"{w}-{k}",
        workload=w,
        model="m",
        gpu_index=gpu,
        index=k,
        batch=rng.choice((2, 4)),
        mps_percent=mps,
        predicted_throughput_rps=mps * 3,
    )


def _slot_name(rng: random.Random, itype: str, spot: bool, n: int) -> str:
    if rng.random() < 0.05:
        return f"f-{itype}-odd{n}"  # no ordinal
    return f"f-{itype}-{'spot-' if spot else ''}{rng.choice((n, n, n // 2))}"


def _servers(rng: random.Random, workloads: int, gpus: int, most: int) -> tuple[PlannedServer, ...]:
    out = []
    for gpu in range(gpus):
        for _ in range(rng.randint(0, most)):
            out.append(_server(rng, f"w{rng.randrange(workloads)}", gpu, len(out)))
    return tuple(out)


def paper_match(rng: random.Random, n: int) -> tuple[Plan, LayoutInput]:
    """A previous layout of about n slots, live slots it lacks (some running servers), and a plan
    of about n instances over the same workloads: many ties, both offerings of each type."""
    workloads = max(1, rng.randint(n // 3, 2 * n))
    slots, names = [], set()
    for k in range(rng.randint(0, n)):
        itype, gpus = rng.choice(TYPES)
        spot = rng.random() < 0.2
        name = _slot_name(rng, itype, spot, k)
        if name in names:
            continue
        names.add(name)
        servers = _servers(rng, workloads, gpus, 3)
        slots.append(
            SlotSpec(name, itype, 3.0, ("v100",) * gpus, servers, capacity_type="spot" if spot else "on-demand")
        )
    extra, running = {}, {}
    for k in range(rng.randint(0, max(1, n // 4))):
        itype, gpus = rng.choice(TYPES)
        name = _slot_name(rng, itype, False, 1000 + k)
        if name in names:
            continue
        names.add(name)
        extra[name] = offering_key(itype)
        if rng.random() < 0.6:
            running[name] = _servers(rng, workloads, gpus, 2)
    instances = []
    for _ in range(rng.randint(0, n)):
        itype, gpus = rng.choice(TYPES)
        spot = rng.random() < 0.2
        g = tuple(
            GpuOut(
                i,
                "v100",
                tuple(
                    PlacementOut(
                        f"w{rng.randrange(workloads)}", "m", rng.choice((2, 4)), rng.choice(SHARES), 100.0, 5.0, 90.0
                    )
                    for _ in range(rng.randint(0, 3))
                ),
            )
            for i in range(gpus)
        )
        instances.append(InstanceOut(itype, 3.0, g, capacity_type="spot" if spot else "on-demand"))
    booting = tuple(rng.sample(sorted(names), min(len(names), rng.randint(0, 3))))
    short = {f"w{rng.randrange(workloads)}": 50.0 for _ in range(rng.randint(0, 2))}
    inp = LayoutInput(
        fleet="f",
        previous=Layout("x", tuple(slots)) if slots or rng.random() < 0.5 else None,
        extra_slots=extra,
        taken_slots=frozenset(names),
        reserved_servers={},
        workloads={f"w{i}": WorkloadInfo("/m", 5.0) for i in range(workloads)},
        rates={},
        running=running,
        booting=booting,
        short=short,
    )
    return Plan("x", tuple(instances)), inp


@settings(max_examples=examples(300), deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 40))
def test_slot_matching_is_the_all_pairs_answer(seed: int, n: int) -> None:
    plan, inp = paper_match(random.Random(seed), n)
    assert match_slots(plan, inp) == reference.match_slots(plan, inp)


@pytest.mark.slow
def test_slot_matching_at_fleet_scale() -> None:
    """About 400 slots and planned instances (the all-pairs reference is quadratic: 2,000 would take
    it a minute), the same answer."""
    for seed in range(2):
        plan, inp = paper_match(random.Random(seed), 400)
        assert match_slots(plan, inp) == reference.match_slots(plan, inp)


def paper_blockages(rng: random.Random, n: int) -> tuple[list[Blockage], Progress]:
    """About n blocked GPUs whose blockers belong to workloads whose planned servers are coming,
    blocked elsewhere, or cannot come: chains and cycles of moves, some stuck."""
    workloads = max(1, n)
    pending: dict[str, set[str]] = {}
    blockages, names = [], []
    for k in range(n):
        waiting = []
        for j in range(rng.randint(1, 2)):
            w = f"w{rng.randrange(workloads)}"
            s = _server(rng, w, 0, 10 * k + j)
            waiting.append(s)
            pending.setdefault(w, set()).add(s.name)
            names.append(s.name)
        blockers = tuple(_server(rng, f"w{rng.randrange(workloads)}", 0, 900 + j) for j in range(rng.randint(0, 2)))
        blockages.append(Blockage(key=(f"f-p3-{k}", 0), instance_type="p3", waiting=tuple(waiting), blockers=blockers))
    for _ in range(rng.randint(0, n)):
        w, name = f"w{rng.randrange(workloads)}", f"c{rng.randrange(10**6)}"
        pending.setdefault(w, set()).add(name)
        names.append(name)
    coming = frozenset(x for x in names if rng.random() < 0.4)
    never = frozenset(x for x in names if x not in coming and rng.random() < 0.1)
    leaving = frozenset(s.name for b in blockages for s in b.blockers if rng.random() < 0.1)
    progress = Progress(
        pending={w: frozenset(v) for w, v in pending.items()}, coming=coming, never=never, leaving=leaving
    )
    return blockages, progress


@settings(max_examples=examples(300), deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 30))
def test_blocked_moves_resolve_as_before(seed: int, n: int) -> None:
    blockages, progress = paper_blockages(random.Random(seed), n)
    assert resolve(blockages, progress) == reference.resolve(blockages, progress)


@settings(max_examples=examples(300), deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 30))
def test_progress_is_the_iterated_fixed_point(seed: int, n: int) -> None:
    """blocking._Moving counts where the rule was iterated: the same workloads before any pick
    and after each pick, the counting going on from where it stood."""
    rng = random.Random(seed)
    blockages, progress = paper_blockages(rng, n)
    at = {t.name: b for b in blockages for t in b.waiting}
    moving = blocking._Moving(progress, at)
    picked: dict[GpuKey, Pick] = {}
    assert moving.workloads == reference.progressing(progress, at, picked)
    for b in rng.sample(blockages, len(blockages)):
        if rng.random() < 0.5:
            picked[b.key] = Pick(blockage=b)
            moving.pick(b)
            assert moving.workloads == reference.progressing(progress, at, picked)


def test_blocked_moves_resolve_as_before_at_fleet_scale() -> None:
    blockages, progress = paper_blockages(random.Random(7), 300)
    assert resolve(blockages, progress) == reference.resolve(blockages, progress)


P3 = {"p3": TypeInfo(name="p3", gpu="v100", gpus=1, price_per_hour=3.0)}


def crowd_judge(instance_type: str, servers: Sequence[PlannedServer]) -> list[tuple[bool, float]]:
    """Like a model: a server meets its budget only at a batch of at most its share / 10, and a
    GPU filled past 90 % slows every server on it to 3/4 of what it carries (so a burst's batch,
    its neighbours' rates and the floors all matter)."""
    total = sum(s.mps_percent for s in servers)
    slow = 0.75 if total > 90.0 + 1e-6 else 1.0
    return [
        (total <= 100.0 + 1e-6 and s.batch <= s.mps_percent / 10 + 1e-6, 0.6 * s.mps_percent * s.batch * slow)
        for s in servers
    ]


class ShapedCrowd:
    """crowd_judge, saying what it reads of a server (rollout_types.shape_of): its share and batch.
    Its burst trials are shared by shape (core/rollout/burst_memo.py), the reference's are not."""

    def __call__(self, instance_type: str, servers: Sequence[PlannedServer]) -> list[tuple[bool, float]]:
        return crowd_judge(instance_type, servers)

    def shape(self, instance_type: str, s: PlannedServer) -> Hashable:
        return (s.mps_percent, s.batch)


SHAPED_CROWD = ShapedCrowd()


class RefusingCrowd(ShapedCrowd):
    """ShapedCrowd, saying what it refuses without a judgement (rollout_types.Refusals): a batch
    above a tenth of the share misses alone, and neighbours only add to the shares. The indexed
    moves skip those trials (surge.py, Tick.refuses); the reference asks the judge each time."""

    def misses_alone(self, instance_type: str, s: PlannedServer) -> bool:
        return s.batch > s.mps_percent / 10 + 1e-6

    def only_slow(self, instance_type: str, beside: Sequence[PlannedServer], room: float) -> bool:
        return True

    def refuses(self, instance_type: str, s: PlannedServer, beside: Sequence[PlannedServer]) -> bool:
        return self.misses_alone(instance_type, s)


REFUSING_CROWD = RefusingCrowd()


def _gpu_servers(rng: random.Random, workloads: int, names: list[str]) -> tuple[PlannedServer, ...]:
    """Up to three servers of distinct workloads whose shares (multiples of 10 %) fit, often with
    room to spare."""
    out, used = [], 0
    for w in rng.sample(range(workloads), min(workloads, rng.randint(0, 3))):
        mps = min(rng.randint(1, 6), 10 - used) * 10
        if mps <= 0:
            break
        used += mps // 10
        names.append(f"w{w}-{len(names)}")
        out.append(
            PlannedServer(
                name=names[-1],
                workload=f"w{w}",
                model="alexnet",
                gpu_index=0,
                index=len(out),
                batch=rng.choice((2, 4)),
                mps_percent=float(mps),
                rate_rps=float(mps),
                predicted_throughput_rps=mps * 10.0,
            )
        )
    return tuple(out)


def paper_fleet(rng: random.Random, n: int, judge: Judge = shares_judge) -> PaperFleet:
    """n ready one-GPU instances, most at rest (running what the layout wants), the rest moving,
    and new instances to launch; rates around what the layout carries, so some workloads are
    short while their new servers boot (bursts) and moves need surge."""
    workloads = max(2, n // 2)
    names: list[str] = []
    applied, layout = {}, []
    for i in range(n):
        applied[f"s{i}"] = _gpu_servers(rng, workloads, names)
    for i in range(n):
        have, roll = applied[f"s{i}"], rng.random()
        if roll < 0.6:
            want = have
        elif roll < 0.8:  # another GPU's servers: swaps and cycles of moves, which need surge
            want = tuple(replace(v, name=f"{v.name}-m{i}") for v in applied[f"s{rng.randrange(n)}"])
        else:
            want = _gpu_servers(rng, workloads, names)
        layout.append(SlotSpec(f"s{i}", "p3", 3.0, ("v100",), want))
    for i in range(n, n + rng.randint(0, max(1, n // 5))):
        layout.append(SlotSpec(f"s{i}", "p3", 3.0, ("v100",), _gpu_servers(rng, workloads, names)))
    planned: dict[str, float] = {}
    for spec in layout:
        for v in spec.servers:
            planned[v.workload] = planned.get(v.workload, 0.0) + v.predicted_throughput_rps
    rates = {w: c * rng.uniform(0.6, 1.6) for w, c in planned.items()}
    limits = Limits(types=P3, max_surge=rng.choice((0, 1, 2, None, n)), judge=judge)
    return fleet(layout, applied, limits=limits, rates=rates, judge=judge)


def same_moves(seed: int, n: int, steps: int, judge: Judge = shares_judge) -> int:
    """Two copies of a fleet on paper stepped together, one by the indexed moves, one by the
    reference: every step's diff is the same. Returns how many stand-ins were started."""
    new, old = paper_fleet(random.Random(seed), n, judge), paper_fleet(random.Random(seed), n, judge)
    stand_ins = 0
    for _ in range(steps):
        d = new.step()
        with reference.old_moves():
            assert old.step() == d
        stand_ins += len(d.step.started) if d.step else 0
        if not d.actions and d.converged:
            break
    return stand_ins


@settings(max_examples=examples(40), deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(2, 16))
def test_the_running_index_follows_every_commit(seed: int, n: int) -> None:
    """Judged.runs (which servers run, by name and agent key: rollout.Tick._waiting_for asks it)
    is the count over every GPU after each change a paper fleet's steps make."""
    commit = Judged._commit

    def checked(self: Judged, key: GpuKey, servers: list[PlannedServer], part: Part) -> None:
        commit(self, key, servers, part)
        assert self.runs == Counter((s.name, s.agent_key()) for on in self.on.values() for s in on)

    fleet_ = paper_fleet(random.Random(seed), n, REFUSING_CROWD)
    with patch.object(Judged, "_commit", checked):
        for _ in range(4):
            fleet_.step()


@settings(max_examples=examples(60), deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.integers(2, 24),
    st.sampled_from((shares_judge, crowd_judge, SHAPED_CROWD, REFUSING_CROWD)),
)
def test_moves_are_the_scanning_answer(seed: int, n: int, judge: Judge) -> None:
    same_moves(seed, n, 12, judge)


@pytest.mark.slow
def test_moves_are_the_scanning_answer_at_fleet_scale() -> None:
    """1,200 instances on paper (the scanning reference takes some 5 s for one step at 2,000), and
    500 over several steps with burst trials shared by shape: the same diffs."""
    assert same_moves(5, 1200, 1) > 0
    assert same_moves(6, 500, 4, SHAPED_CROWD) > 0
