"""Planning against the current plan (the control loop's case) and policy -> planner inputs."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.config.policy import load_policy
from autoscaler.planner import Demand, InstanceOption, make_plan, planning_inputs
from tests.kit.examples import examples
from tests.planner.conftest import G4, P3, SCENARIOS, assert_sound, placements, scenario


def _key(p) -> tuple:
    return (p.workload, p.batch, p.mps_percent)


@pytest.mark.unit
def test_replanning_the_same_inputs_moves_nothing():
    demands, options, models = scenario("random-50.yaml")
    first = make_plan(demands, options, models)
    again = make_plan(demands, options, models, current=first)
    assert again.moved == 0 and again.cost_per_hour == first.cost_per_hour
    assert sorted(map(_key, placements(again))) == sorted(map(_key, placements(first)))


@pytest.mark.unit
def test_a_small_rate_change_moves_few_placements():
    demands, options, models = scenario("random-50.yaml")
    first = make_plan(demands, options, models)
    bumped = [replace(d, rate_rps=d.rate_rps * 1.08) if d.workload == "w3" else d for d in demands]
    plan = make_plan(bumped, options, models, current=first)
    assert plan.moved <= 3
    assert_sound(plan, bumped, models, options)
    kept = set(map(_key, placements(first))) & set(map(_key, placements(plan)))
    assert len(kept) >= len(placements(plan)) - plan.moved


@pytest.mark.unit
def test_a_removed_workload_leaves_the_others_in_place():
    demands, options, models = scenario("random-50.yaml")
    first = make_plan(demands, options, models)
    fewer = [replace(d, rate_rps=0.0) if d.workload == "w7" else d for d in demands]
    plan = make_plan(fewer, options, models, current=first)
    assert "w7" not in {p.workload for p in placements(plan)}
    assert plan.cost_per_hour <= first.cost_per_hour
    assert_sound(plan, fewer, models, options)


@pytest.mark.slow
@pytest.mark.property
@settings(max_examples=examples(10), deadline=None)
@given(st.integers(0, 10_000), st.floats(0.0, 0.3))
def test_drifting_rates_keep_plans_sound_and_close_to_fresh_ones(seed, spread):
    demands, options, models = scenario("random-50.yaml")
    rnd = random.Random(seed)
    current = make_plan(demands, options, models)
    for _ in range(3):
        demands = [replace(d, rate_rps=round(d.rate_rps * rnd.uniform(1 - spread, 1 + spread), 1)) for d in demands]
        plan = make_plan(demands, options, models, current=current)
        fresh = make_plan(demands, options, models)
        assert_sound(plan, demands, models, options)
        assert plan.cost_per_hour <= fresh.cost_per_hour * 1.03 + 1e-9
        assert 0 <= plan.moved <= len(placements(plan))
        current = plan


@pytest.mark.unit
def test_instances_of_a_type_no_longer_offered_are_replaced(models):
    d = [Demand(f"v{i}", "vgg19", 60, 150) for i in range(3)]
    on_t4 = make_plan(d, [P3, G4], models)
    assert {i.instance_type for i in on_t4.instances} == {"g4dn.xlarge"}
    plan = make_plan(d, [P3], models, current=on_t4)
    assert {i.instance_type for i in plan.instances} == {"p3.2xlarge"}
    assert plan.moved == len(placements(plan))
    assert_sound(plan, d, models, [P3])


@pytest.mark.unit
def test_baselines_report_moves_against_the_current_plan_too():
    demands, options, models = scenario("twelve-workloads.yaml")
    first = make_plan(demands, options, models, planner="ffd")
    assert make_plan(demands, options, models, planner="ffd", current=first).moved == 0


@pytest.mark.unit
def test_planning_inputs_apply_rates_corrections_and_unavailable_types(tmp_path):
    text = (
        (SCENARIOS / "motivation-3.yaml")
        .read_text()
        .replace(
            "instance_types:",
            "instance_types:\n- {name: g4dn.xlarge, gpu: t4-synthetic, gpus: 1, price_per_hour: 0.526}",
        )
    )
    path = tmp_path / "p.yaml"
    path.write_text(text)
    policy = load_policy(path)
    demands, options, models = planning_inputs(
        policy, rates={"alexnet-a": 42.0}, corrections={"vgg19-a": 1.5}, unavailable=frozenset({"g4dn.xlarge"})
    )
    by = {d.workload: d for d in demands}
    assert by["alexnet-a"].rate_rps == 42.0 and by["resnet50-a"].rate_rps == 400.0
    assert by["vgg19-a"].correction == 1.5 and by["alexnet-a"].correction == 1.0
    assert [o.name for o in options] == ["p3.2xlarge"]
    assert set(models) == {"v100", "t4-synthetic"}
    assert isinstance(options[0], InstanceOption)


def _floored_policy(tmp_path, floors: dict[str, float]):
    import yaml

    data = yaml.safe_load((SCENARIOS / "motivation-3.yaml").read_text())
    for w in data["workloads"]:
        if w["name"] in floors:
            w["min_rate_rps"] = floors[w["name"]]
    if "profiles_dir" in data:
        data["profiles_dir"] = str((SCENARIOS / data["profiles_dir"]).resolve())
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_policy(path)


@pytest.mark.unit
def test_min_rate_floor_raises_a_lower_or_zero_rate_and_keeps_a_server(tmp_path):
    policy = _floored_policy(tmp_path, {"alexnet-a": 150.0, "vgg19-a": 20.0})
    rates = {"alexnet-a": 0.0, "resnet50-a": 0.0, "vgg19-a": 35.0}
    demands, options, models = planning_inputs(policy, rates=rates)
    by = {d.workload: d.rate_rps for d in demands}
    assert by == {"alexnet-a": 150.0, "resnet50-a": 0.0, "vgg19-a": 35.0}  # floor, no floor, rate above floor
    plan = make_plan(demands, options, models)
    served = {p.workload for p in placements(plan)}
    assert "alexnet-a" in served and "resnet50-a" not in served and not plan.unplaced
    assert sum(p.rate_rps for p in placements(plan) if p.workload == "alexnet-a") >= 150.0 - 1e-6


@pytest.mark.unit
def test_zero_min_rate_keeps_todays_behaviour(tmp_path):
    floored = _floored_policy(tmp_path, {"alexnet-a": 0.0})
    assert all(w.min_rate_rps == 0.0 for w in floored.workloads)
    plain = load_policy(SCENARIOS / "motivation-3.yaml")
    rates = {"alexnet-a": 0.0, "resnet50-a": 123.0}
    assert planning_inputs(floored, rates=rates)[0] == planning_inputs(plain, rates=rates)[0]
    assert [d.rate_rps for d in planning_inputs(plain)[0]] == [w.rate_rps for w in plain.workloads]
