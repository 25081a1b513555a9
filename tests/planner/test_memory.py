"""GPU memory as a constraint where the profile declares it (hardware.memory_mb, models.*.memory_mb)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from agents.profiler.schema import MemorySpec
from autoscaler.config.profile import load_profile
from autoscaler.model.perfmodel import PerfModel, fit
from autoscaler.planner import Demand, InstanceOption, check_plan, make_plan
from tests.conftest import PROFILES
from tests.kit.examples import examples
from tests.planner.conftest import assert_sound, demand_sets, placements

OPT = [InstanceOption("p3.2xlarge", "v100-mem", 1, 3.06)]


def _with_memory(gpu_mb: float, base: float, per_item: float) -> PerfModel:
    profile = load_profile(PROFILES / "v100.yaml")
    models = {
        k: m.model_copy(update={"memory_mb": MemorySpec(base=base, per_batch_item=per_item)})
        for k, m in profile.models.items()
    }
    hw = profile.hardware.model_copy(update={"memory_mb": gpu_mb})
    return fit(profile.model_copy(update={"models": models, "hardware": hw}), "v100-mem")


@pytest.fixture(scope="module")
def tight() -> dict[str, PerfModel]:
    return {"v100-mem": _with_memory(4000, 1500, 10)}


@pytest.mark.unit
def test_memory_limits_how_many_servers_share_a_gpu(tight, models):
    d = [Demand(f"a{i}", "alexnet", 25, 300) for i in range(4)]  # small shares: only memory stops them
    free = make_plan(d, [InstanceOption("p3.2xlarge", "v100", 1, 3.06)], models)
    assert free.gpu_count == 1
    plan = make_plan(d, OPT, tight)
    assert plan.gpu_count == 2
    for inst in plan.instances:
        for g in inst.gpus:
            assert sum(tight["v100-mem"].memory(p.model, p.batch) for p in g.placements) <= 4000


@pytest.mark.unit
def test_the_recheck_reports_memory_overcommit(tight):
    d = [Demand(f"a{i}", "alexnet", 25, 300) for i in range(3)]
    plan = make_plan(d, OPT, {"v100-mem": _with_memory(1e9, 1500, 10)})  # planned without the limit
    assert plan.gpu_count == 1
    assert any("memory" in p for p in check_plan(plan, d, tight))


@pytest.mark.unit
def test_a_model_too_big_for_the_gpu_is_unplaced_with_a_reason():
    huge = {"v100-mem": _with_memory(1000, 1500, 10)}
    plan = make_plan([Demand("a", "alexnet", 25, 300)], OPT, huge)
    assert [u.workload for u in plan.unplaced] == ["a"] and "memory" in plan.unplaced[0].reason


@pytest.mark.property
@settings(max_examples=examples(15), deadline=None)
@given(demand_sets(max_size=15))
def test_random_workloads_respect_memory(tight, demands):
    plan = make_plan(demands, OPT, tight)
    assert_sound(plan, demands, tight, OPT)
    assert len(placements(plan)) >= sum(d.rate_rps > 0 for d in demands) - len(plan.unplaced)
