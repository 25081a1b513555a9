"""scaling.redundancy: with min_servers 2 every workload runs on two or more servers in different
fault domains (GPUs, or instances), each feasible, and the servers left after any one domain is
lost still carry the whole rate (N+1); re-plans keep it; min_servers 1 plans as before."""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import replace

import pytest

from autoscaler.planner import Demand, Plan, make_plan
from autoscaler.planner.redundancy import redundancy_faults
from tests.planner.conftest import G4, P3, P3X4, assert_sound, placements, scenario

pytestmark = pytest.mark.unit


def redundant(demands: list[Demand], spread: str = "gpu") -> list[Demand]:
    return [replace(d, min_servers=2, spread=spread) for d in demands]


def domains(plan: Plan, spread: str) -> dict[str, list[tuple[int, int]]]:
    """Per workload, the fault domain of each of its servers."""
    out: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for i, inst in enumerate(plan.instances):
        for g in inst.gpus:
            for p in g.placements:
                out[p.workload].append((i, g.index if spread == "gpu" else -1))
    return out


def survives_any_loss(plan: Plan, demands: list[Demand], spread: str) -> None:
    """Computed here, not by redundancy_faults: for each domain, the rest's predicted throughput."""
    for d in demands:
        if d.rate_rps <= 0:
            continue
        load: dict[tuple[int, int], float] = defaultdict(float)
        for i, inst in enumerate(plan.instances):
            for g in inst.gpus:
                for p in g.placements:
                    if p.workload == d.workload:
                        load[(i, g.index if spread == "gpu" else -1)] += p.predicted_throughput_rps
        for lost in load:
            left = sum(v for k, v in load.items() if k != lost)
            assert left >= d.rate_rps * d.correction * (1 - 1e-6), (d.workload, lost, left, d.rate_rps)


@pytest.mark.parametrize("name", ["motivation-3.yaml", "twelve-workloads.yaml", "random-50.yaml"])
def test_every_workload_gets_two_servers_on_different_gpus_each_feasible(name):
    demands, options, models = scenario(name)
    demands = redundant(demands)
    plan = make_plan(demands, options, models)
    assert_sound(plan, demands, models, options)  # every server meets its SLO with its neighbours
    assert not plan.unplaced and redundancy_faults(plan, demands) == []
    where = domains(plan, "gpu")
    for d in demands:
        if d.rate_rps > 0:
            assert len(where[d.workload]) >= 2 and len(set(where[d.workload])) == len(where[d.workload])
    survives_any_loss(plan, demands, "gpu")


def test_the_redundant_plan_costs_more_and_the_default_is_unchanged():
    demands, options, models = scenario("twelve-workloads.yaml")
    one = make_plan(demands, options, models)
    again = make_plan([replace(d, min_servers=1, spread="instance") for d in demands], options, models)
    two = make_plan(redundant(demands), options, models)
    assert again.to_json() == one.to_json()
    assert two.cost_per_hour > one.cost_per_hour


def test_spread_instance_puts_the_servers_on_different_instances(models):
    demands, _, _ = scenario("motivation-3.yaml")
    demands = redundant(demands, "instance")
    plan = make_plan(demands, [P3X4], models)  # four-GPU instances only: one instance would hold both
    assert_sound(plan, demands, models, [P3X4])
    assert redundancy_faults(plan, demands) == []
    where = domains(plan, "instance")
    for d in demands:
        assert len(where[d.workload]) >= 2 and len(set(where[d.workload])) == len(where[d.workload])
    survives_any_loss(plan, demands, "instance")
    gpu_only = make_plan(redundant(demands, "gpu"), [P3X4], models)
    assert len(gpu_only.instances) == 1 < len(plan.instances)  # GPUs of one instance are enough for gpu


def test_a_workload_too_big_for_one_gpu_gets_one_replica_more():
    demands, options, models = scenario("motivation-3.yaml")
    big = [replace(demands[1], rate_rps=3000.0)]
    one, two = make_plan(big, options, models), make_plan(redundant(big), options, models)
    assert len(placements(two)) == len(placements(one)) + 1
    assert sum(p.rate_rps for p in placements(two)) == pytest.approx(3000.0)
    survives_any_loss(two, redundant(big), "gpu")


def test_replans_keep_the_invariant_and_move_little():
    demands, options, models = scenario("random-50.yaml")
    demands = redundant(demands)
    current = make_plan(demands, options, models)
    again = make_plan(demands, options, models, current=current)
    assert again.moved == 0 and redundancy_faults(again, demands) == []
    rnd = random.Random(7)
    for _ in range(3):
        demands = [replace(d, rate_rps=round(d.rate_rps * rnd.uniform(0.8, 1.25), 1)) for d in demands]
        plan = make_plan(demands, options, models, current=current)
        assert_sound(plan, demands, models, options)
        assert redundancy_faults(plan, demands) == []
        survives_any_loss(plan, demands, "gpu")
        current = plan


def test_a_single_server_plan_is_not_kept_when_redundancy_is_turned_on(models):
    demands, _, _ = scenario("motivation-3.yaml")
    single = make_plan(demands, [P3, G4], models)
    plan = make_plan(redundant(demands), [P3, G4], models, current=single)
    assert redundancy_faults(plan, redundant(demands)) == []
    assert redundancy_faults(single, redundant(demands))  # the check sees what was wrong before


def test_the_check_names_a_workload_whose_two_servers_share_a_gpu(models):
    demands, _, _ = scenario("motivation-3.yaml")
    plan = make_plan(demands[:1], [P3], models)
    inst = plan.instances[0]
    p = inst.gpus[0].placements[0]
    half = replace(p, rate_rps=p.rate_rps / 2)
    shared = replace(plan, instances=(replace(inst, gpus=(replace(inst.gpus[0], placements=(half, half)),)),))
    assert redundancy_faults(shared, redundant(demands[:1])) == [f"{p.workload}: 2 server(s) in 1 gpu(s), 2 needed"]


def test_replans_on_four_gpu_instances_keep_servers_on_different_instances(models):
    demands, _, _ = scenario("twelve-workloads.yaml")
    demands = redundant(demands, "instance")
    current = make_plan(demands, [P3X4], models)
    rnd = random.Random(3)
    for _ in range(4):
        demands = [replace(d, rate_rps=round(d.rate_rps * rnd.uniform(0.7, 1.4), 1)) for d in demands]
        plan = make_plan(demands, [P3X4], models, current=current)
        assert_sound(plan, demands, models, [P3X4])
        assert redundancy_faults(plan, demands) == []
        survives_any_loss(plan, demands, "instance")
        current = plan
