"""`exact` (the MILP) bounds iGniter; the baselines behave as the paper describes them."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from autoscaler.planner import PLANNERS, Demand, InstanceOption, TooLarge, check_plan, make_plan
from autoscaler.planner.baselines import GPULETS
from autoscaler.planner.exact import exact
from tests.kit.examples import examples
from tests.planner.conftest import G4, P3, assert_sound, demand_sets, placements, scenario
from tests.planner.test_igniter import MOTIVATION


@pytest.mark.property
@settings(max_examples=examples(12), deadline=None)
@given(demand_sets(min_size=1, max_size=6, big=False))
def test_exact_is_never_worse_than_igniter_on_small_inputs(models, demands):
    options = [P3, G4]
    opt = make_plan(demands, options, models, planner="exact")
    greedy = make_plan(demands, options, models)
    assert opt.cost_per_hour <= greedy.cost_per_hour + 1e-9
    assert_sound(opt, demands, models, options)


@pytest.mark.unit
def test_igniter_is_within_two_percent_of_exact_on_twelve_workloads():
    demands, options, models = scenario("twelve-workloads.yaml")
    opt = make_plan(demands, options, models, planner="exact")
    assert opt.planner == "exact" and opt.stats["optimal"]
    assert make_plan(demands, options, models).cost_per_hour <= 1.02 * opt.cost_per_hour
    assert_sound(opt, demands, models, options)


@pytest.mark.unit
def test_exact_refuses_large_inputs_and_make_plan_falls_back(models):
    demands = [Demand(f"w{i}", "alexnet", 20, 400) for i in range(17)]
    with pytest.raises(TooLarge):
        exact(demands, [P3], models)
    plan = make_plan(demands, [P3], models, planner="exact")
    assert plan.planner == "igniter" and "16 workloads" in plan.stats["fallback"]


@pytest.mark.unit
def test_exact_uses_multi_gpu_instances_when_cheaper(models):
    four = [InstanceOption("p3.8xlarge", "v100", 4, 10.0)]  # cheaper per GPU than four p3.2xlarge
    demands = [Demand(f"v{i}", "vgg19", 60, 380) for i in range(5)]
    plan = make_plan(demands, [P3, *four], models, planner="exact")
    assert plan.cost_per_hour <= make_plan(demands, [P3, *four], models).cost_per_hour + 1e-9
    assert_sound(plan, demands, models, [P3, *four])


@pytest.mark.unit
def test_ffd_ignores_interference_and_the_recheck_sees_it(models):
    plan = make_plan(MOTIVATION, [P3], models, planner="ffd")
    assert plan.gpu_count == 1
    assert sorted(p.mps_percent for p in placements(plan)) == [10.0, 27.5, 35.0]
    assert any("predicted latency" in v for v in check_plan(plan, MOTIVATION, models))


@pytest.mark.unit
def test_gpulets_uses_at_most_two_gpulets_from_its_menu(models):
    demands, options, models = scenario("random-50.yaml")
    plan = make_plan(demands, options, models, planner="gpulets")
    for inst in plan.instances:
        for g in inst.gpus:
            assert len(g.placements) <= 2
            assert all(p.mps_percent in GPULETS for p in g.placements)
    assert_sound(plan, demands, models, options)


@pytest.mark.unit
def test_gslice_tunes_within_each_gpu_and_never_exceeds_it():
    demands, options, models = scenario("random-50.yaml")
    plan = make_plan(demands, options, models, planner="gslice")
    ffd = make_plan(demands, options, models, planner="ffd")
    assert all(sum(p.mps_percent for p in g.placements) <= 100 for i in plan.instances for g in i.gpus)
    assert len(check_plan(plan, demands, models)) < len(check_plan(ffd, demands, models))


@pytest.mark.unit
@pytest.mark.parametrize("name", sorted(PLANNERS))
def test_every_planner_places_every_rate_share(name):
    demands, options, models = scenario("twelve-workloads.yaml")
    plan = make_plan(demands, options, models, planner=name)
    problems = check_plan(plan, demands, models, options)
    assert not [p for p in problems if "carry" in p or ("instances[" in p and "GPUs listed" in p)]
    assert plan.to_json()["planner"] == name


@pytest.mark.unit
@pytest.mark.parametrize("name", sorted(PLANNERS))
def test_capacity_caps_leave_workloads_unplaced_not_overcommitted(models, name):
    capped = InstanceOption("p3.2xlarge", "v100", 1, 3.06, max_instances=1)
    demands = [Demand(f"v{i}", "vgg19", 60, 380) for i in range(3)]  # ~75 % of a V100 each
    plan = make_plan(demands, [capped], models, planner=name)
    assert len(plan.instances) <= 1
    assert len(plan.unplaced) >= 2 and all("max_instances" in u.reason for u in plan.unplaced)


@pytest.mark.unit
def test_a_gpu_type_without_a_model_is_a_value_error(models):
    with pytest.raises(ValueError, match="no performance model"):
        make_plan([Demand("a", "alexnet", 15, 100)], [InstanceOption("x", "a100", 1, 1.0)], models, planner="ffd")


@pytest.mark.unit
def test_exact_handles_many_identical_workloads_as_one_class(models):
    demands = [Demand(f"a{i}", "alexnet", 25, 300) for i in range(16)]
    plan = make_plan(demands, [P3], models, planner="exact")
    assert plan.planner == "exact" and plan.stats["optimal"] and plan.stats["columns"] <= 16
    assert plan.cost_per_hour <= make_plan(demands, [P3], models).cost_per_hour
    assert_sound(plan, demands, models, [P3])
