"""A judge's most hopeful verdict (rollout_types.Bounds, crowding.at_best) prunes no stand-in
(issue 50): each server alone at the share MPS's split leaves it is never judged worse than beside
the others, and random fleets on paper, with the V100 model, stepped with the bound and with the
same judge without it, give the same diffs step by step (the stand-ins' search on ready GPUs,
borrowing.py, skips a GPU only where the bound says the trial fails)."""

from __future__ import annotations

import random
from collections.abc import Hashable, Sequence
from dataclasses import replace

import pytest

from autoscaler.config.policy import InstanceType, Policy, Workload
from autoscaler.core.layout.layout_types import PlannedServer, SlotSpec
from autoscaler.core.rollout.colocation import ModelJudge
from autoscaler.core.rollout.reconcile import Limits
from autoscaler.core.rollout.rollout_types import bounds_of
from autoscaler.core.rollout.surge import TypeInfo
from tests.core.test_burst_memo import POLICY
from tests.kit.paperfleet import PaperFleet, fleet

pytestmark = pytest.mark.property

SLOS = (6.0, 8.0, 10.0, 15.0, 25.0, 40.0)


def slo_policy() -> Policy:
    """The burst tests' policy with one workload per budget of SLOS (w0 to w5), all on alexnet."""
    workloads = [Workload(name=f"w{i}", model="alexnet", slo_ms=slo, rate_rps=100.0) for i, slo in enumerate(SLOS)]
    return POLICY.model_copy(update={"workloads": workloads})


MODELS = ("alexnet", "resnet50")
P3 = {"p3": TypeInfo(name="p3", gpu="v100", gpus=1, price_per_hour=3.0)}


def v100_judge(workloads: int = 12) -> ModelJudge:
    """The V100 model for the paper fleet's "p3" instances, workloads w0.. of tight to loose SLOs."""
    types = [InstanceType(name="p3", gpu="v100", gpus=1, price_per_hour=3.0)]
    ws = [
        Workload(name=f"w{i}", model=MODELS[i % 2], slo_ms=SLOS[i % len(SLOS)], rate_rps=100.0)
        for i in range(workloads)
    ]
    return Counting(POLICY.model_copy(update={"workloads": ws, "instance_types": types}))


class Unbounded:
    """The same judge, saying what it refuses and its shapes, but not its most hopeful verdict:
    the search tries every GPU the bound would skip."""

    def __init__(self, judge: ModelJudge) -> None:
        self.judge = judge

    def __call__(self, instance_type: str, servers: Sequence[PlannedServer]) -> Sequence[tuple[bool, float]]:
        return self.judge(instance_type, servers)

    def shape(self, instance_type: str, s: PlannedServer) -> Hashable | None:
        return self.judge.shape(instance_type, s)

    def refuses(self, instance_type: str, s: PlannedServer, beside: Sequence[PlannedServer]) -> bool:
        return self.judge.refuses(instance_type, s, beside)

    def misses_alone(self, instance_type: str, s: PlannedServer) -> bool:
        return self.judge.misses_alone(instance_type, s)

    def only_slow(self, instance_type: str, beside: Sequence[PlannedServer], room: float) -> bool:
        return self.judge.only_slow(instance_type, beside, room)


class Counting(ModelJudge):
    """ModelJudge counting the hopeful verdicts that rule a trial out somewhere (a server missing)."""

    decisive = 0

    def hopeful(self, instance_type: str, servers: Sequence[PlannedServer]) -> Sequence[tuple[bool, float]] | None:
        out = super().hopeful(instance_type, servers)
        Counting.decisive += out is not None and not all(ok for ok, _ in out)
        return out


def _server(rng: random.Random, judge: ModelJudge, name: str, w: int, mps: float) -> PlannedServer:
    """A server whose planned throughput is what the model gives it alone, give or take 20 %."""
    s = PlannedServer(
        name=name,
        workload=f"w{w}",
        model=MODELS[w % 2],
        gpu_index=0,
        index=0,
        batch=rng.choice((1, 2, 4, 8)),
        mps_percent=mps,
    )
    thr = judge("p3", [s])[0][1] * rng.uniform(0.8, 1.2)
    return replace(s, predicted_throughput_rps=thr, rate_rps=thr * rng.uniform(0.5, 1.0))


def _gpu(rng: random.Random, judge: ModelJudge, workloads: int, names: list[str]) -> tuple[PlannedServer, ...]:
    """Up to four servers of distinct workloads whose shares fit, often with little room left."""
    out, used = [], 0
    for w in rng.sample(range(workloads), min(workloads, rng.randint(0, 4))):
        mps = min(rng.choice((10, 20, 20, 30, 40, 50)), 100 - used)
        if mps <= 0:
            break
        used += mps
        names.append(f"w{w}-{len(names)}")
        out.append(replace(_server(rng, judge, names[-1], w, float(mps)), index=len(out)))
    return tuple(out)


def model_fleet(rng: random.Random, n: int, judge: object) -> PaperFleet:
    """n ready V100s, most at rest, some taking another GPU's servers (swaps and cycles: moves that
    need stand-ins), new instances to launch, rates around the plan (short workloads burst)."""
    model = judge.judge if isinstance(judge, Unbounded) else judge
    assert isinstance(model, ModelJudge)
    workloads = 12
    names: list[str] = []
    applied = {f"s{i}": _gpu(rng, model, workloads, names) for i in range(n)}
    layout = []
    for i in range(n):
        have, roll = applied[f"s{i}"], rng.random()
        if roll < 0.5:
            want = have
        elif roll < 0.8:
            want = tuple(replace(v, name=f"{v.name}-m{i}") for v in applied[f"s{rng.randrange(n)}"])
        else:
            want = _gpu(rng, model, workloads, names)
        layout.append(SlotSpec(f"s{i}", "p3", 3.0, ("v100",), want))
    for i in range(n, n + rng.randint(0, max(1, n // 5))):
        layout.append(SlotSpec(f"s{i}", "p3", 3.0, ("v100",), _gpu(rng, model, workloads, names)))
    planned: dict[str, float] = {}
    for spec in layout:
        for v in spec.servers:
            planned[v.workload] = planned.get(v.workload, 0.0) + v.predicted_throughput_rps
    rates = {w: c * rng.uniform(0.6, 1.4) for w, c in planned.items()}
    limits = Limits(types=P3, max_surge=rng.choice((0, 1, 2, None, n)), judge=judge)  # type: ignore[arg-type]
    return fleet(layout, applied, limits=limits, rates=rates, judge=judge)  # type: ignore[arg-type]


def test_a_hopeful_verdict_is_never_beaten() -> None:
    """Random servers on the V100 and T4 models, shares often over 100 % (MPS splits them): where
    the hopeful verdict says a server misses, the judgement says so, and no server carries more
    than it says; and it rules out most of the over-subscribed misses."""
    judge = Counting(slo_policy())
    rng = random.Random(58)
    said = missed = 0
    for k in range(500):
        itype = rng.choice(("p3.2xlarge", "g4dn.xlarge"))
        servers = [
            PlannedServer(
                name=f"s{k}-{i}",
                workload=f"w{rng.randrange(len(SLOS))}",
                model=rng.choice(("alexnet", "resnet50", "vgg19", "ssd")),
                gpu_index=0,
                index=i,
                batch=rng.randint(1, 16),
                mps_percent=rng.choice((5.0, 10.0, 20.0, 30.0, 45.0, 60.0)),
            )
            for i in range(rng.randint(1, 5))
        ]
        hope, verdict = judge.hopeful(itype, servers), judge(itype, servers)
        assert hope is not None and len(hope) == len(verdict)
        for (may, most), (ok, thr) in zip(hope, verdict):
            assert thr <= most and (may or not ok), (servers, hope, verdict)
            said += not may
            missed += not ok
    assert said > missed / 2 > 100  # not a test that passes by saying nothing
    assert bounds_of(judge) is judge and bounds_of(Unbounded(judge)) is None


def same_diffs(seed: int, n: int, steps: int) -> int:
    """A fleet stepped with the bound and without: the same diff at every step. Returns the
    stand-ins started."""
    bounded = model_fleet(random.Random(seed), n, v100_judge())
    unbounded = model_fleet(random.Random(seed), n, Unbounded(v100_judge()))
    stand_ins = 0
    for _ in range(steps):
        d = bounded.step()
        assert unbounded.step() == d
        stand_ins += len(d.step.started) if d.step else 0
        if not d.actions and d.converged:
            break
    return stand_ins


def test_the_bound_prunes_no_stand_in() -> None:
    """Random V100 fleets on paper: the same diffs with and without the bound, and the bound rules
    trials out (not a test that passes by pruning nothing)."""
    before = Counting.decisive
    started = 0
    for seed in range(12):
        started += same_diffs(seed, random.Random(seed).randint(4, 20), 8)
    assert started > 0 and Counting.decisive > before
