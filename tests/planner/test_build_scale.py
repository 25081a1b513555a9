"""Packing floating GPUs into instances (build.py) on plans of tens of thousands of GPUs.

The minimised input the plan property test drew (tests/config/test_plan_property.py, 152 s in a
CI run): one workload at limits.MAX_RATE_RPS cut into 29,095 whole-GPU replicas. take_apart
scanned every waiting GPU for each instance, so build took minutes; these tests pin the plans it
makes (an unbounded run of them would show as the slow test, not as a failure: no timing here).
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.planner import Demand, InstanceOption, make_plan
from autoscaler.planner.build import Waiting, spread_workloads
from autoscaler.planner.redundancy import redundancy_faults
from autoscaler.planner.state import Gpu
from autoscaler.planner.tasks import Task
from tests.kit.examples import examples
from tests.planner.conftest import placements

FOUR = InstanceOption("type-0", "v100", 4, 0.08)


@pytest.mark.unit
def test_a_rate_at_the_ceiling_packs_every_replica_in_gpu_order(models):
    demand = Demand("w0", "ssd", 100_000.0, 10_000_000.0)
    plan = make_plan([demand], [FOUR], models)
    assert plan.unplaced == ()
    assert len(plan.instances) == 7274 and plan.cost_per_hour == pytest.approx(7274 * 0.08)
    servers = placements(plan)
    assert len(servers) == 29_095 and sum(p.rate_rps for p in servers) == pytest.approx(10_000_000.0)
    full = [g for inst in plan.instances[:-1] for g in inst.gpus]
    assert all(len(g.placements) == 1 and g.placements[0].mps_percent == 100.0 for g in full)
    assert [g.index for g in plan.instances[0].gpus] == [0, 1, 2, 3]
    assert [len(g.placements) for g in plan.instances[-1].gpus] == [1, 1, 1, 0]  # the remainder ends the plan
    rest = plan.instances[-1].gpus[2].placements[0]
    assert rest.mps_percent < 100.0 and rest.rate_rps < servers[0].rate_rps


@pytest.mark.unit
def test_a_spread_instance_workload_of_thousands_of_servers_takes_an_instance_each(models):
    demand = Demand("w0", "ssd", 100_000.0, 3_000_000.0, min_servers=2, spread="instance")
    plan = make_plan([demand], [FOUR], models)
    assert plan.unplaced == () and redundancy_faults(plan, [demand]) == []
    assert len(plan.instances) == len(placements(plan)) == 8730
    assert all(sum(len(g.placements) for g in inst.gpus) == 1 for inst in plan.instances)


def _one_pass(queue: list[Gpu], n: int) -> list[Gpu]:
    """The specification: what one pass over the waiting GPUs in order takes for an instance of
    `n` GPUs (build.py before Waiting): a GPU joins unless it shares a spread-instance workload
    with one taken already."""
    taken: list[Gpu] = []
    for g in queue:
        if len(taken) < n and not any(spread_workloads(g) & spread_workloads(t) for t in taken):
            taken.append(g)
    return taken


def _gpu(gid: int, workloads: list[tuple[str, str]]) -> Gpu:
    tasks = [
        Task(i, Demand(w, "ssd", 100.0, 1.0, min_servers=2 if spread else 1, spread=spread or "gpu"), 1.0, {}, "v100")
        for i, (w, spread) in enumerate(workloads)
    ]
    return Gpu(gid, "v100", tasks=tasks)


@pytest.mark.property
@settings(max_examples=examples(200), deadline=None)
@given(
    st.lists(st.lists(st.tuples(st.sampled_from("abcd"), st.sampled_from(["", "gpu", "instance"])), max_size=3)),
    st.lists(st.integers(1, 5), min_size=1, max_size=40),
    st.randoms(use_true_random=False),
)
def test_waiting_takes_the_gpus_a_full_scan_takes(shapes, sizes, rnd: random.Random):
    gpus = [_gpu(gid, shape) for gid, shape in enumerate(shapes)]
    rnd.shuffle(gpus)  # Waiting orders by gid, as build.py's scan did
    waiting, queue = Waiting(gpus), sorted(gpus, key=lambda g: g.gid)
    for n in sizes * (len(gpus) + 1):
        if not queue:
            break
        want = _one_pass(queue, n)
        queue = [g for g in queue if g not in want]
        assert [g.gid for g in waiting.take_apart(n)] == [g.gid for g in want]
        assert len(waiting) == len(queue)
    assert not queue and not waiting
