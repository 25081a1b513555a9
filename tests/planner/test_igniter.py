"""The igniter planner: the paper's worked example, the scenarios, and properties of random inputs."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings

from autoscaler.planner import Demand, InstanceOption, check_plan, make_plan
from autoscaler.planner.api import igniter
from autoscaler.planner.igniter import Config
from tests.kit.examples import examples
from tests.planner.conftest import G4, P3, P3X4, assert_sound, demand_sets, placements, scenario

LEAN = Config(spend_idle=False)  # Algorithm 2's least shares, nothing handed out afterwards
MOTIVATION = [
    Demand("alexnet-a", "alexnet", 15, 500),
    Demand("resnet50-a", "resnet50", 40, 400),
    Demand("vgg19-a", "vgg19", 60, 200),
]


@pytest.mark.unit
def test_plain_algorithm_reproduces_the_papers_motivation_example(models):
    plan = make_plan(MOTIVATION, [P3], models, planner="igniter-plain")
    assert plan.gpu_count == 1
    got = {p.workload: (p.batch, p.mps_percent) for p in placements(plan)}
    assert got == {"alexnet-a": (4, 10.0), "resnet50-a": (8, 30.0), "vgg19-a": (6, 37.5)}
    assert check_plan(plan, MOTIVATION, models) == []


@pytest.mark.unit
def test_plain_raises_shares_above_the_lower_bounds_because_of_interference(v100):
    bounds = [
        v100.lower_bound(d.model, v100.batch_size(d.model, d.slo_ms, d.rate_rps), d.slo_ms, d.rate_rps)
        for d in MOTIVATION
    ]
    assert bounds == [10.0, 27.5, 35.0]
    alone = [
        v100.solo(d.model, v100.batch_size(d.model, d.slo_ms, d.rate_rps), b)[0] for d, b in zip(MOTIVATION, bounds)
    ]
    together = v100.predict_raw(
        [(d.model, v100.batch_size(d.model, d.slo_ms, d.rate_rps), b) for d, b in zip(MOTIVATION, bounds)]
    )
    assert all(t[0] > a for t, a in zip(together, alone))
    assert any(t[0] > d.slo_ms / 2 for t, d in zip(together, MOTIVATION))


@pytest.mark.unit
def test_default_planner_fits_the_motivation_example_on_one_gpu(models):
    plan = make_plan(MOTIVATION, [P3], models)
    assert plan.gpu_count == 1 and plan.cost_per_hour == pytest.approx(3.06)
    assert_sound(plan, MOTIVATION, models, [P3])


@pytest.mark.unit
def test_twelve_workloads_need_at_most_six_gpus():
    demands, options, models = scenario("twelve-workloads.yaml")
    for name in ("igniter", "igniter-plain"):
        plan = make_plan(demands, options, models, planner=name)
        assert plan.gpu_count <= 6, name
        assert_sound(plan, demands, models, options)


@pytest.mark.unit
def test_random_50_is_cheaper_than_the_prototype_and_feasible():
    demands, options, models = scenario("random-50.yaml")
    plain = make_plan(demands, options, models, planner="igniter-plain")
    plan = make_plan(demands, options, models)
    assert plain.cost_per_hour == pytest.approx(64.26)  # the prototype's figure (README)
    assert plan.cost_per_hour < plain.cost_per_hour
    assert_sound(plan, demands, models, options)


@pytest.mark.slow
@pytest.mark.property
@settings(max_examples=examples(40), deadline=None)
@given(demand_sets())
def test_random_workloads_give_sound_plans(models, demands):
    options = [P3, P3X4, G4]
    plan = make_plan(demands, options, models)
    assert_sound(plan, demands, models, options)
    assert not plan.unplaced  # every generated SLO is reachable on a V100


@pytest.mark.property
@settings(max_examples=examples(25), deadline=None)
@given(demand_sets(max_size=12))
def test_plain_algorithm_is_sound_too(models, demands):
    plan = make_plan(demands, [P3], models, planner="igniter-plain")
    assert_sound(plan, demands, models, [P3])


@pytest.mark.unit
def test_a_workload_above_one_gpu_becomes_full_replicas_plus_a_remainder(models):
    d = [Demand("big", "resnet50", 40, 5000)]
    plan = make_plan(d, [P3], models)
    kinds = Counter((p.batch, round(p.rate_rps, 6)) for p in placements(plan))
    (batch, _), replicas = kinds.most_common(1)[0]
    assert plan.gpu_count >= 2 and replicas >= len(placements(plan)) - 1  # identical replicas + a remainder
    assert all(p.mps_percent == 100 for p in placements(plan) if p.batch == batch)
    assert_sound(plan, d, models, [P3])


@pytest.mark.unit
def test_rate_zero_needs_no_placement_and_is_not_unplaced(models):
    d = [Demand("idle", "vgg19", 60, 0), Demand("busy", "vgg19", 60, 100)]
    plan = make_plan(d, [P3], models)
    assert {p.workload for p in placements(plan)} == {"busy"} and not plan.unplaced


@pytest.mark.unit
def test_impossible_slo_is_unplaced_with_a_reason_and_nothing_else_suffers(models):
    d = [Demand("fast", "resnet50", 0.5, 100), Demand("ok", "alexnet", 15, 500)]
    plan = make_plan(d, [P3, G4], models)
    assert [u.workload for u in plan.unplaced] == ["fast"]
    assert "below the fastest possible latency" in plan.unplaced[0].reason
    assert {p.workload for p in placements(plan)} == {"ok"}


@pytest.mark.unit
def test_slo_guard_correction_plans_for_inflated_latency(models):
    base = [Demand("r", "resnet50", 40, 400)]
    guarded = [Demand("r", "resnet50", 40, 400, correction=1.4)]
    p0, p1 = (igniter(d, [P3], models, cfg=LEAN) for d in (base, guarded))  # the shares it needs
    (a,), (b,) = placements(p0), placements(p1)
    assert b.mps_percent > a.mps_percent
    p1 = make_plan(guarded, [P3], models)
    assert b.predicted_latency_ms * 1.4 <= 20.0 + 1e-9
    assert check_plan(p1, guarded, models) == []


@pytest.mark.unit
def test_heterogeneous_types_use_the_cheaper_gpu_per_unit_of_demand(models):
    d = [Demand(f"v{i}", "vgg19", 60, 150) for i in range(4)]
    plan = make_plan(d, [P3, G4], models)
    assert {i.instance_type for i in plan.instances} == {"g4dn.xlarge"}
    v100_only = make_plan(d, [P3], models)
    assert plan.cost_per_hour < v100_only.cost_per_hour


@pytest.mark.unit
def test_multi_gpu_instances_are_filled_before_new_ones_open(models):
    d = [Demand(f"v{i}", "vgg19", 60, 380) for i in range(7)]
    plan = make_plan(d, [P3X4], models)
    assert plan.gpu_count == 4 * len(plan.instances)
    used = sum(1 for i in plan.instances for g in i.gpus if g.placements)
    assert len(plan.instances) == -(-used // 4)
    assert_sound(plan, d, models, [P3X4])


@pytest.mark.unit
def test_max_instances_is_respected_and_the_rest_goes_elsewhere_or_unplaced(models):
    capped = InstanceOption("g4dn.xlarge", "t4-synthetic", 1, 0.526, max_instances=2)
    d = [Demand(f"v{i}", "vgg19", 60, 150) for i in range(6)]
    plan = make_plan(d, [capped, P3], models)
    assert sum(i.instance_type == "g4dn.xlarge" for i in plan.instances) <= 2
    assert not plan.unplaced
    assert_sound(plan, d, models, [capped, P3])
    alone = make_plan(d, [capped], models)
    assert alone.unplaced and all("max_instances" in u.reason for u in alone.unplaced)
    assert check_plan(alone, d, models, [capped]) == []


@pytest.mark.unit
def test_repair_pass_never_costs_more(models):
    demands, options, models = scenario("random-50.yaml")
    from autoscaler.planner.api import igniter
    from autoscaler.planner.igniter import Config

    with_repair = igniter(demands, options, models, None, Config())
    without = igniter(demands, options, models, None, Config(repair=False))
    assert with_repair.cost_per_hour <= without.cost_per_hour


@pytest.mark.unit
def test_unknown_planner_is_a_value_error(models):
    with pytest.raises(ValueError, match="unknown planner"):
        make_plan(MOTIVATION, [P3], models, planner="nope")


@pytest.mark.unit
def test_mixed_types_serve_what_the_cheap_type_cannot_and_the_rest_cheaply(models):
    demands, options, _ = scenario("twelve-workloads.yaml")
    more = [*options, G4]
    plain = make_plan(demands, more, models, planner="igniter-plain")
    plan = make_plan(demands, more, models)
    assert not plain.unplaced and {i.instance_type for i in plain.instances} == {"p3.2xlarge"}
    w4 = [i.instance_type for i in plan.instances for g in i.gpus for p in g.placements if p.workload == "W4"]
    assert w4 == ["p3.2xlarge"]  # resnet50 at a 10 ms SLO is too fast for the T4
    assert plan.cost_per_hour < 0.6 * plain.cost_per_hour
    assert_sound(plan, demands, models, more)


@pytest.mark.unit
def test_repair_replans_a_half_empty_expensive_gpu_on_a_cheaper_type(models):
    from autoscaler.planner.api import igniter
    from autoscaler.planner.igniter import Config

    t4 = InstanceOption("g4dn.xlarge", "t4-synthetic", 1, 1.8)  # dearer per unit of demand than a V100 here
    d = [Demand("a", "alexnet", 15, 500)]
    greedy = igniter(d, [P3, t4], models, None, Config(repair=False))
    repaired = igniter(d, [P3, t4], models, None, Config())
    assert [i.instance_type for i in greedy.instances] == ["p3.2xlarge"]
    assert [i.instance_type for i in repaired.instances] == ["g4dn.xlarge"]
    assert_sound(repaired, d, models, [P3, t4])


@pytest.mark.property
@settings(max_examples=examples(25), deadline=None)
@given(demand_sets(max_size=12))
def test_spending_idle_share_costs_nothing_and_only_raises_shares(models, demands):
    lean, plan = igniter(demands, [G4, P3], models, cfg=LEAN), make_plan(demands, [G4, P3], models)
    assert plan.cost_per_hour == pytest.approx(lean.cost_per_hour)
    assert_sound(plan, demands, models, [G4, P3])
    before, after = placements(lean), placements(plan)
    assert [(p.workload, p.batch, p.rate_rps) for p in after] == [(p.workload, p.batch, p.rate_rps) for p in before]
    assert all(a.mps_percent >= b.mps_percent for a, b in zip(after, before))


@pytest.mark.unit
def test_igniter_lean_is_the_default_without_the_idle_share_step(models):
    d = [Demand("r", "resnet50", 40, 400)]
    lean, plan = make_plan(d, [P3], models, planner="igniter-lean"), igniter(d, [P3], models, cfg=LEAN)
    assert lean.planner == "igniter-lean"
    assert [p.mps_percent for p in placements(lean)] == [p.mps_percent for p in placements(plan)]
    assert placements(lean)[0].mps_percent < placements(make_plan(d, [P3], models))[0].mps_percent
