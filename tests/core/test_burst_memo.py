"""Burst trials shared by shape (core/rollout/burst_memo.py, issue 50): a judge that says what it
reads of a server lets equal-shaped candidates of different workloads share one trial, and the
model's shape is all its verdict reads. The moves with the memo against the unmemoised reference
are checked in tests/core/test_indexed_property.py (its shaped judge)."""

from __future__ import annotations

import random
from collections.abc import Hashable, Sequence
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.config.policy import Workload, load_policy
from autoscaler.core.layout.layout_types import PlannedServer
from autoscaler.core.rollout.burst_memo import passing_batches
from autoscaler.core.rollout.colocation import ModelJudge
from autoscaler.core.rollout.rollout import Gpu, RolloutInput, Tick
from tests.kit.control import REPO
from tests.kit.examples import examples


class Counting:
    """A model-like judge (a server within budget at a batch of at most its share / 10) that
    counts its calls and reads only a server's share and batch."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, instance_type: str, servers: Sequence[PlannedServer]) -> list[tuple[bool, float]]:
        self.calls += 1
        total = sum(s.mps_percent for s in servers)
        return [(total <= 100.0 and s.batch <= s.mps_percent / 10, s.mps_percent * s.batch) for s in servers]

    def shape(self, instance_type: str, s: PlannedServer) -> Hashable:
        return (s.mps_percent, s.batch)


def server(name: str, workload: str, mps: float, batch: int, replaces: str = "") -> PlannedServer:
    return PlannedServer(
        name=name,
        workload=workload,
        model="alexnet",
        gpu_index=0,
        index=0,
        batch=batch,
        mps_percent=mps,
        predicted_throughput_rps=mps,
        replaces=replaces,
    )


def tick(judge: Counting, *running: PlannedServer) -> Tick:
    gpu = Gpu(key=("s0", 0), instance_type="p3", running=running, wanted=running)
    return Tick(RolloutInput(gpus=(gpu,), ready=frozenset(s.name for s in running), demand={}, judge=judge))


def trial(t: Tick, name: str, workload: str, mps: float, top: int) -> tuple[int, ...]:
    def make(batch: int) -> PlannedServer:
        return server(name, workload, mps, batch)

    return passing_batches(t, ("s0", 0), make, top, sig=(workload, name, mps), family=(workload, mps), name=name)


@pytest.mark.unit
def test_equal_shaped_candidates_of_other_workloads_share_one_trial() -> None:
    judge = Counting()
    t = tick(judge, server("n-0", "n", 40.0, 2))
    first = trial(t, "a-0-s0", "a", 30.0, 8)
    assert first == (3, 2, 1) and judge.calls > 0
    later = tick(judge, server("n-0", "n", 40.0, 2))  # the next tick, the GPU as it was
    calls = judge.calls
    assert trial(later, "b-0-s0", "b", 30.0, 8) == first
    assert judge.calls == calls
    assert trial(t, "c-0-s0", "c", 20.0, 8) == (2, 1)  # another share: another shape, tried
    assert judge.calls > calls


@pytest.mark.unit
def test_a_candidate_named_by_a_server_on_the_gpu_is_tried_again() -> None:
    """A ready server there that replaces the candidate's name took over its load (rollout.loading):
    the name is part of the judgement, so the shape's answer is not taken for it."""
    judge = Counting()
    t = tick(judge, server("n-0", "n", 40.0, 2, replaces="b-0-s0"))
    assert trial(t, "a-0-s0", "a", 30.0, 8) == (3, 2, 1)
    calls = judge.calls
    assert trial(t, "b-0-s0", "b", 30.0, 8) == ()
    assert judge.calls > calls


class Crowd(Counting):
    """Counting, and a GPU filled past 90 % slows every server on it: a neighbour's verdict too
    moves with the candidate's share."""

    def __call__(self, instance_type: str, servers: Sequence[PlannedServer]) -> list[tuple[bool, float]]:
        self.calls += 1
        total = sum(s.mps_percent for s in servers)
        slow = 0.5 if total > 90.0 else 1.0
        return [(total <= 100.0 and s.batch <= s.mps_percent * slow / 10, s.mps_percent * s.batch) for s in servers]


CROWD = Crowd()  # one memo over all examples: answers remembered from other GPUs and ticks are reused


@pytest.mark.property
@settings(max_examples=examples(100), deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_remembered_trials_are_the_trials(seed: int) -> None:
    """On a random GPU (neighbours ready or starting, one perhaps replacing a candidate's name),
    random candidates of random workloads get from the memo the batches judged_ok passes."""
    rng = random.Random(seed)
    running = [
        server(f"n{i}", f"w{i}", float(rng.choice((10, 20, 30))), rng.randint(1, 4), rng.choice(("", "", "w9-s0")))
        for i in range(rng.randint(0, 3))
    ]
    gpu = Gpu(key=("s0", 0), instance_type="p3", running=tuple(running), wanted=tuple(running[:1]))
    ready = frozenset(s.name for s in running if rng.random() < 0.7)
    t = Tick(RolloutInput(gpus=(gpu,), ready=ready, demand={}, judge=CROWD))
    for _ in range(12):
        w, mps, top = f"w{rng.randrange(10)}", float(rng.choice((20, 30, 40, 50))), rng.randint(1, 6)

        def make(batch: int, w: str = w, mps: float = mps) -> PlannedServer:
            return server(f"{w}-s0", w, mps, batch)

        want = tuple(b for b in range(top, 0, -1) if t.judged_ok(("s0", 0), make(b)))
        assert passing_batches(t, ("s0", 0), make, top, sig=(w, mps), family=(w, mps), name=f"{w}-s0") == want


POLICY = load_policy(REPO / "policies" / "servegen-sim.yaml")
SLOS = (20.0, 20.0, 40.0, 60.0)  # two workloads of one SLO: one shape for their servers
MODELS = ("alexnet", "resnet50", "vgg19")


def model_judge() -> ModelJudge:
    workloads = [Workload(name=f"w{i}", model="alexnet", slo_ms=slo, rate_rps=100.0) for i, slo in enumerate(SLOS)]
    return ModelJudge(POLICY.model_copy(update={"workloads": workloads}))


JUDGE = model_judge()


def _random_server(rng: random.Random, name: str) -> PlannedServer:
    return replace(
        server(name, f"w{rng.randrange(len(SLOS))}", float(rng.choice((10, 20, 30, 40, 50))), rng.randint(1, 16)),
        model=rng.choice(MODELS),
    )


@pytest.mark.property
@settings(max_examples=examples(150), deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(("p3.2xlarge", "g4dn.xlarge")))
def test_the_model_judges_equal_shapes_alike(seed: int, itype: str) -> None:
    """Beside random neighbours, a candidate and its twin of another workload (same SLO, model,
    batch and share: one shape) get the same verdicts, theirs and their neighbours'."""
    rng = random.Random(seed)
    neighbours = [_random_server(rng, f"n{i}") for i in range(rng.randint(0, 3))]
    cand = replace(_random_server(rng, "c"), workload=rng.choice(("w0", "w1")))
    twin = replace(cand, workload="w1" if cand.workload == "w0" else "w0", name="t", rate_rps=7.0)
    assert JUDGE.shape(itype, cand) == JUDGE.shape(itype, twin)
    assert JUDGE(itype, [*neighbours, cand]) == JUDGE(itype, [*neighbours, twin])
    assert JUDGE.shape(itype, replace(cand, workload="w2")) != JUDGE.shape(itype, cand)  # another SLO
    assert JUDGE.shape("unlisted", cand) is None
