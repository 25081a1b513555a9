"""Spot and on-demand as two offerings of one type (planner/offerings.py): the on-demand floor,
prices, unavailability, stability, and plans without spot unchanged."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autoscaler.config.offerings import SPOT
from autoscaler.planner import Demand, InstanceOption, make_plan
from autoscaler.planner.offerings import on_demand_share
from tests.kit.examples import examples
from tests.planner.conftest import G4, P3, P3X4, assert_sound, demand_sets, placements, scenario


def spot_of(o: InstanceOption, ratio: float = 0.35) -> InstanceOption:
    return replace(o, price_per_hour=round(o.price_per_hour * ratio, 4), capacity_type=SPOT)


OPTIONS = [P3, G4, spot_of(P3), spot_of(G4)]


def floored(demands: list[Demand], floor: float) -> list[Demand]:
    return [replace(d, on_demand_floor=floor) for d in demands]


def od_rate(plan, workload: str) -> float:
    return sum(
        p.rate_rps
        for i in plan.instances
        if i.capacity_type == "on-demand"
        for g in i.gpus
        for p in g.placements
        if p.workload == workload
    )


@pytest.mark.property
@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    demands=demand_sets(max_size=12, big=False),
    floors=st.lists(st.sampled_from([0.0, 0.3, 0.5, 1.0, 0.77]), min_size=12, max_size=12),
    ratio=st.floats(0.2, 1.2),
    planner=st.sampled_from(["igniter", "gpulets", "ffd"]),
)
def test_every_workload_keeps_its_on_demand_floor(models, demands, floors, ratio, planner):
    """Property: whatever the prices and planner, each workload's on-demand placements carry at
    least its floor of its rate, and the plan is sound (rates add up, shares within 100 %)."""
    demands = [replace(d, on_demand_floor=f) for d, f in zip(demands, floors)]
    options = [P3, G4, spot_of(P3, ratio), spot_of(G4, ratio)]
    plan = make_plan(demands, options, models, planner=planner)
    unplaced = {u.workload for u in plan.unplaced}
    for d in demands:
        if d.rate_rps > 0 and d.workload not in unplaced:
            assert od_rate(plan, d.workload) >= d.on_demand_floor * d.rate_rps * (1 - 1e-9) - 1e-6
    if planner != "ffd":  # ffd ignores interference by design: its latencies may break budgets
        assert_sound(plan, demands, models, options)
    assert "on_demand_floor" not in plan.stats  # on-demand capacity is unlimited here


@pytest.mark.unit
def test_spot_at_35_percent_costs_about_the_blend(models):
    demands, _, _ = scenario("random-50.yaml")
    od = make_plan(demands, [P3, G4], models)
    for floor in (0.0, 0.3, 0.5):
        plan = make_plan(floored(demands, floor), OPTIONS, models)
        assert_sound(plan, demands, models, OPTIONS)
        blend = floor + (1 - floor) * 0.35
        assert plan.cost_per_hour <= od.cost_per_hour * (blend + 0.08), floor
        assert min(on_demand_share(plan).values()) >= floor - 1e-9
    everything = make_plan(floored(demands, 1.0), OPTIONS, models)
    assert all(i.capacity_type == "on-demand" for i in everything.instances)
    assert everything.cost_per_hour == pytest.approx(od.cost_per_hour)


@pytest.mark.unit
def test_without_spot_offerings_the_plan_is_unchanged(models):
    """A floor on a demand means nothing without spot options: the plan is the plain one."""
    demands, options, _ = scenario("random-50.yaml")
    plain = make_plan(demands, options, models)
    assert make_plan(floored(demands, 0.3), options, models) == plain
    assert all(i.capacity_type == "on-demand" for i in plain.instances)


@pytest.mark.unit
def test_spot_instances_carry_their_capacity_type_and_price_in_the_json(models):
    plan = make_plan([Demand("a", "resnet50", 40, 2000, on_demand_floor=0.3)], OPTIONS, models)
    doc = plan.to_json()
    types = {(i["instance_type"], i["capacity_type"], i["price_per_hour"]) for i in doc["instances"]}
    assert ("g4dn.xlarge", "spot", round(0.526 * 0.35, 4)) in types
    assert ("g4dn.xlarge", "on-demand", 0.526) in types
    assert {p["workload"] for i in doc["instances"] for g in i["gpus"] for p in g["placements"]} == {"a"}
    assert all(g["gpu"] == "t4-synthetic" for i in doc["instances"] for g in i["gpus"])


@pytest.mark.unit
def test_an_unavailable_spot_offering_falls_back_to_on_demand(models):
    d = [Demand("a", "resnet50", 40, 2000, on_demand_floor=0.3)]
    plan = make_plan(d, [P3, G4, spot_of(P3)], models)  # g4dn spot unavailable
    by_type = {(i.instance_type, i.capacity_type) for i in plan.instances}
    assert ("g4dn.xlarge", "spot") not in by_type
    assert od_rate(plan, "a") >= 0.3 * 2000 - 1e-6


@pytest.mark.unit
def test_no_on_demand_capacity_waives_the_floor_rather_than_serving_nothing(models):
    d = [Demand("a", "resnet50", 40, 2000, on_demand_floor=0.5)]
    capped = [replace(G4, max_instances=0), spot_of(G4)]
    plan = make_plan(d, capped, models)
    assert not plan.unplaced and all(i.capacity_type == "spot" for i in plan.instances)
    assert "a" in plan.stats["on_demand_floor"]


@pytest.mark.unit
def test_replanning_the_same_inputs_keeps_every_placement(models):
    demands, _, _ = scenario("random-50.yaml")
    demands = floored(demands, 0.3)
    first = make_plan(demands, OPTIONS, models)
    again = make_plan(demands, OPTIONS, models, current=first)
    assert again.moved == 0 and again.cost_per_hour == pytest.approx(first.cost_per_hour)
    key = lambda p: (p.workload, p.batch, p.mps_percent)  # noqa: E731
    assert sorted(map(key, placements(again))) == sorted(map(key, placements(first)))
    assert [i.capacity_type for i in again.instances] == [i.capacity_type for i in first.instances]


@pytest.mark.unit
def test_max_instances_caps_each_offering(models):
    d = [Demand("a", "resnet50", 40, 5000, on_demand_floor=0.0)]
    spot = replace(spot_of(G4), max_instances=2)
    plan = make_plan(d, [G4, spot, P3X4], models)
    spots = [i for i in plan.instances if i.capacity_type == "spot"]
    assert len(spots) == 2 and not plan.unplaced
    assert_sound(plan, d, models, [G4, spot, P3X4])


@pytest.mark.unit
def test_a_floor_of_1_plans_exactly_as_without_spot_also_against_a_current_plan(models):
    """Every workload on on-demand: the spot offerings change nothing, re-planning included."""
    demands, options, _ = scenario("random-50.yaml")
    spot = [*options, *(spot_of(o) for o in options)]
    od_cur = spot_cur = None
    for step in range(4):
        scaled = [replace(d, rate_rps=d.rate_rps * (1 + 0.15 * ((i + step) % 3 - 1))) for i, d in enumerate(demands)]
        plain = make_plan(scaled, options, models, current=od_cur)
        with_spot = make_plan(floored(scaled, 1.0), spot, models, current=spot_cur)
        assert with_spot.instances == plain.instances and with_spot.moved == plain.moved, step
        od_cur, spot_cur = plain, with_spot


@pytest.mark.unit
@pytest.mark.parametrize("floor", [0.1, 0.2, 0.3])
def test_a_spot_plan_never_costs_more_than_on_demand_alone(floor):
    """motivation-3 fills one GPU: each floor on an on-demand GPU beside a spot one cost 1.35 x."""
    demands, options, models = scenario("motivation-3.yaml")
    spot = [*options, *(spot_of(o) for o in options)]
    mixed = make_plan(floored(demands, floor), spot, models)
    alone = make_plan(demands, options, models)
    assert not mixed.unplaced
    assert mixed.cost_per_hour <= alone.cost_per_hour + 1e-9
    for d in demands:
        assert od_rate(mixed, d.workload) >= floor * d.rate_rps - 1e-6
