"""Planner test fixtures: fitted models for the bundled profiles, instance types, scenario loading."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import strategies as st

from autoscaler.config.policy import load_policy
from autoscaler.model.perfmodel import PerfModel, load_perf_model
from autoscaler.planner import Demand, InstanceOption, Plan, check_plan, planning_inputs
from tests.conftest import DATA, PROFILES

SCENARIOS = DATA / "scenarios"
P3 = InstanceOption("p3.2xlarge", "v100", 1, 3.06)
P3X4 = InstanceOption("p3.8xlarge", "v100", 4, 12.24)
G4 = InstanceOption("g4dn.xlarge", "t4-synthetic", 1, 0.526)
MODELS = ("alexnet", "resnet50", "vgg19", "ssd")


@pytest.fixture(scope="session")
def v100() -> PerfModel:
    return load_perf_model(PROFILES / "v100.yaml")


@pytest.fixture(scope="session")
def models() -> dict[str, PerfModel]:
    return {
        "v100": load_perf_model(PROFILES / "v100.yaml"),
        "t4-synthetic": load_perf_model(PROFILES / "t4-synthetic.yaml"),
    }


def scenario(name: str) -> tuple[list[Demand], list[InstanceOption], dict[str, PerfModel]]:
    """A scenario copied from ../shared/scenarios (they use the bundled profiles)."""
    return planning_inputs(load_policy(SCENARIOS / name))


def placements(plan: Plan) -> list:
    return [p for inst in plan.instances for g in inst.gpus for p in g.placements]


def rate_sums(plan: Plan) -> Counter:
    out: Counter = Counter()
    for p in placements(plan):
        out[p.workload] += p.rate_rps
    return out


def assert_sound(
    plan: Plan, demands: list[Demand], models: dict[str, PerfModel], options: list[InstanceOption]
) -> None:
    """The properties every plan of a feasible planner must have, checked independently."""
    assert check_plan(plan, demands, models, options) == []
    unplaced = {u.workload for u in plan.unplaced}
    sums = rate_sums(plan)
    for d in demands:
        if d.rate_rps > 0 and d.workload not in unplaced:
            assert sums[d.workload] == pytest.approx(d.rate_rps, rel=1e-9)
        if d.rate_rps == 0:
            assert d.workload not in sums and d.workload not in unplaced
    by_name = {o.name: o for o in options}
    for inst in plan.instances:
        assert len(inst.gpus) <= by_name[inst.instance_type].gpus
        for g in inst.gpus:
            assert sum(p.mps_percent for p in g.placements) <= 100 + 1e-9
            assert all(0 < p.mps_percent <= 100 for p in g.placements)


RANGES = {
    "alexnet": ((10, 25), (300, 1500)),
    "resnet50": ((20, 50), (100, 800)),
    "vgg19": ((30, 70), (50, 400)),
    "ssd": ((30, 70), (30, 300)),
}


@st.composite
def demand_sets(draw: st.DrawFn, min_size: int = 1, max_size: int = 30, big: bool = True) -> list[Demand]:
    """Random workloads like the scenarios', sometimes with rate 0, a huge rate or an SLO guard."""
    n = draw(st.integers(min_size, max_size))
    out = []
    for i in range(n):
        model = draw(st.sampled_from(MODELS))
        (s0, s1), (r0, r1) = RANGES[model]
        rate = draw(st.one_of(st.integers(r0, r1), st.just(0), st.integers(r1, 6 * r1) if big else st.just(r0)))
        corr = draw(st.one_of(st.just(1.0), st.floats(1.0, 1.3)))
        out.append(Demand(f"w{i}", model, float(draw(st.integers(s0, s1))), float(rate), corr))
    return out
