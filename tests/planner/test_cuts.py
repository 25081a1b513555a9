"""Where the planner cuts each workload between on-demand and spot (planner/cuts.py): the cut sets
are planned side by side and the cheapest plan wins, so a floor that shares an on-demand GPU pays
for that GPU's room once instead of opening more spot GPUs."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import autoscaler.planner.offerings as offerings
from autoscaler.planner import Demand, make_plan
from autoscaler.planner.cuts import packed
from tests.kit.examples import examples
from tests.planner.conftest import G4, P3, assert_sound, demand_sets
from tests.planner.test_offerings import od_rate, spot_of

# A row of the ServeGen trace (x 1.4 headroom): three workloads on four T4s on-demand only.
SERVEGEN_ROW = [
    Demand("m-large", "vgg19", 60, 298.0, on_demand_floor=0.3),
    Demand("m-mid", "resnet50", 40, 1381.0, on_demand_floor=0.3),
    Demand("m-small", "alexnet", 20, 1134.0, on_demand_floor=0.3),
]
OPTIONS = [G4, spot_of(G4)]


@contextmanager
def own_cuts_only() -> Iterator[None]:
    """Plan with the workloads' own cuts alone (the first cut set): the planner before cut sets."""
    original = offerings.fresh_cuts
    offerings.fresh_cuts = lambda *a: original(*a)[:1]
    try:
        yield
    finally:
        offerings.fresh_cuts = original


@pytest.mark.unit
def test_floors_that_share_an_on_demand_gpu_fill_its_room_instead_of_opening_spot(models):
    """The floors (0.3 of each rate) need two on-demand T4s whatever the cut; cut alone, each
    workload keeps its exact floor there and its rest needs three spot GPUs (5 in all, for the 4
    of the on-demand-only plan). Cut together, the small workload's whole rate fits the room the
    floors leave on those two GPUs, and two spot GPUs take the rest."""
    alone = make_plan([replace(d, on_demand_floor=0.0) for d in SERVEGEN_ROW], [G4], models)
    plan = make_plan(SERVEGEN_ROW, OPTIONS, models)
    assert_sound(plan, SERVEGEN_ROW, models, OPTIONS)
    capacity = [i.capacity_type for i in plan.instances]
    assert capacity.count("on-demand") == 2 and capacity.count("spot") == 2
    assert plan.gpu_count <= alone.gpu_count
    assert plan.cost_per_hour <= 2 * G4.price_per_hour + 2 * spot_of(G4).price_per_hour + 1e-6
    for d in SERVEGEN_ROW:
        assert od_rate(plan, d.workload) >= d.on_demand_floor * d.rate_rps * (1 - 1e-9)


@pytest.mark.unit
def test_replanning_the_fleet_wide_cut_moves_nothing(models):
    """The winning cut set differs from the workloads' own cuts; the current plan's on-demand
    rates (`sticky`) and the ranking's ties (fewest moves) keep it as it is."""
    first = make_plan(SERVEGEN_ROW, OPTIONS, models)
    again = make_plan(SERVEGEN_ROW, OPTIONS, models, current=first)
    assert again.moved == 0 and again.cost_per_hour == first.cost_per_hour
    assert [i.capacity_type for i in again.instances] == [i.capacity_type for i in first.instances]


@pytest.mark.property
@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(demands=demand_sets(max_size=8, big=False), floor=st.sampled_from([0.2, 0.3, 0.5]))
def test_the_chosen_plan_is_never_worse_than_the_workloads_own_cuts(models, demands, floor):
    """Property: planning the other cut sets only ever adds choices (placed first, then cost)."""
    demands = [replace(d, on_demand_floor=floor) for d in demands]
    options = [P3, G4, spot_of(P3), spot_of(G4)]
    plan = make_plan(demands, options, models)
    with own_cuts_only():
        own = make_plan(demands, options, models)
    assert (len(plan.unplaced), plan.cost_per_hour) <= (len(own.unplaced), own.cost_per_hour + 1e-9)
    unplaced = {u.workload for u in plan.unplaced}
    for d in demands:
        if d.rate_rps > 0 and d.workload not in unplaced:
            assert od_rate(plan, d.workload) >= floor * d.rate_rps * (1 - 1e-9) - 1e-6


@pytest.mark.unit
def test_first_fit_decreasing_counts_whole_gpus():
    assert packed([]) == 0
    assert packed([0.6, 0.4, 0.6, 0.4]) == 2
    assert packed([0.8, 0.8, 0.45]) == 3  # 2.05 GPUs of lower bounds, and no two fit together
    assert packed([0.5, 0.5, 0.5]) == 2
