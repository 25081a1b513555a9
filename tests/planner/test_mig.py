"""The MIG planner on ParvaGPU's measured A100 80GB tables (imported from ../shared into tmp)."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autoscaler.model.mig import MigModel, load_gpu_model
from autoscaler.planner import Demand, InstanceOption, Plan, check_plan, make_plan
from autoscaler.planner.mig import lower_bound_gpus
from tests.kit.examples import examples
from tests.kit.mig import MODELS, import_a100, needs_shared, scenarios

pytestmark = [pytest.mark.unit, needs_shared]

A100 = InstanceOption("a2-ultragpu-1g", "a100-80gb", 1, 5.07)
P4DE = InstanceOption("p4de.24xlarge", "a100-80gb", 8, 40.97)
PARVAGPU = [2, 3, 5, 7, 13, 16]


@pytest.fixture(scope="module")
def a100(tmp_path_factory) -> MigModel:
    model = load_gpu_model(import_a100(tmp_path_factory.mktemp("profiles")))
    assert isinstance(model, MigModel)
    return model


def _mig_placements(plan: Plan):
    return [(i, g, p) for i in plan.instances for g in i.gpus for p in g.placements]


def assert_rows_and_geometry(plan: Plan, demands: list[Demand], model: MigModel) -> None:
    """Every slice a measured row within (1 - margin) x SLO / 2, at an allowed start, no overlap on a
    GPU, and the slices' throughput covering each rate (computed here, from the table)."""
    by = {d.workload: d for d in demands}
    capacity: Counter[str] = Counter()
    for _, _g, p in _mig_placements(plan):
        d = by[p.workload]
        row = model.row(p.model, p.mig_profile, p.batch, p.processes)
        assert row is not None, p
        assert row.latency_ms <= (1 - model.margin) * d.slo_ms / 2 + 1e-9
        assert p.mig_start in model.geometry.profile(p.mig_profile).starts
        capacity[p.workload] += row.processes * row.throughput_rps
    for i in plan.instances:
        for g in i.gpus:
            units = [
                u
                for p in g.placements
                for u in range(p.mig_start, p.mig_start + model.geometry.profile(p.mig_profile).memory_units)
            ]
            assert len(units) == len(set(units)), g
            assert sum(model.geometry.profile(p.mig_profile).compute_slices for p in g.placements) <= 7
    unplaced = {u.workload for u in plan.unplaced}
    for d in demands:
        if d.workload not in unplaced and d.rate_rps > 0:
            assert capacity[d.workload] >= d.rate_rps * (1 - 1e-9), d


@pytest.mark.parametrize(("index", "parvagpu"), list(enumerate(PARVAGPU)))
def test_parvagpu_scenarios_use_no_more_gpus_than_parvagpu(a100, index, parvagpu):
    _, scenario = scenarios()[index]
    demands = [Demand(m, m, slo, rate) for m, (rate, slo) in scenario.items()]
    plan = make_plan(demands, [A100], {"a100-80gb": a100})
    assert not plan.unplaced
    assert plan.gpu_count <= parvagpu
    assert plan.gpu_count >= lower_bound_gpus(demands, "a100-80gb", a100)[0]
    assert_rows_and_geometry(plan, demands, a100)
    assert check_plan(plan, demands, {"a100-80gb": a100}, [A100]) == []


workloads = st.lists(
    st.tuples(st.sampled_from(MODELS), st.floats(5, 3000), st.floats(20, 400)), min_size=1, max_size=14
)


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=workloads, margin=st.sampled_from([0.0, 0.1, 0.3]))
@pytest.mark.property
def test_every_slice_is_a_usable_row_at_an_allowed_start_and_rates_are_covered(a100, spec, margin):
    model = MigModel(a100.profile, margin)
    demands = [Demand(f"w{k}", m, slo, rate) for k, (m, rate, slo) in enumerate(spec)]
    plan = make_plan(demands, [A100, P4DE], {"a100-80gb": model})
    assert_rows_and_geometry(plan, demands, model)
    assert check_plan(plan, demands, {"a100-80gb": model}, [A100, P4DE]) == []
    for u in plan.unplaced:
        assert "below the fastest measured latency" in u.reason


def test_the_margin_is_the_policy_s(a100):
    tight = MigModel(a100.profile, 0.5)
    d = Demand("r", "resnet50", 60.0, 800.0)
    for model in (a100, tight):
        plan = make_plan([d], [A100], {"a100-80gb": model})
        for _, _, p in _mig_placements(plan):
            assert p.predicted_latency_ms <= (1 - model.margin) * 30.0
    assert check_plan(make_plan([d], [A100], {"a100-80gb": a100}), [d], {"a100-80gb": tight}) != []


def test_an_slo_below_every_row_is_unplaced_with_the_reason(a100):
    plan = make_plan([Demand("b", "bert", 5.0, 10.0)], [A100], {"a100-80gb": a100})
    assert [u.workload for u in plan.unplaced] == ["b"]
    assert "below the fastest measured latency" in plan.unplaced[0].reason


def test_max_instances_leaves_the_biggest_workload_unplaced(a100):
    capped = InstanceOption("a2-ultragpu-1g", "a100-80gb", 1, 5.07, max_instances=1)
    demands = [Demand("big", "vgg19", 400.0, 2000.0), Demand("small", "resnet50", 200.0, 100.0)]
    plan = make_plan(demands, [capped], {"a100-80gb": a100})
    assert [u.workload for u in plan.unplaced] == ["big"] and "max_instances" in plan.unplaced[0].reason
    assert plan.gpu_count == 1
