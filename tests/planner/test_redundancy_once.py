"""redundancy_faults reads the plan once per spread (issue 50), not once per workload: the same
faults, in the same order and words, as the per-workload scan it replaced, on random plans."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.planner.redundancy import TOLERANCE, domain_loads, redundancy_faults
from autoscaler.planner.types import Demand, GpuOut, InstanceOut, PlacementOut, Plan, Unplaced
from tests.kit.examples import examples

pytestmark = [pytest.mark.unit, pytest.mark.property]

WORKLOADS = ["a", "b", "c", "d", "e"]

placement = st.builds(
    lambda w, rps: PlacementOut(w, "m", 1, 10.0, rps / 2, 5.0, rps),
    st.sampled_from(WORKLOADS),
    st.floats(0.5, 100),
)
instance = st.lists(st.lists(placement, max_size=4), min_size=1, max_size=3).map(
    lambda gpus: InstanceOut("t", 1.0, tuple(GpuOut(k, "g", tuple(ps)) for k, ps in enumerate(gpus)))
)
demand = st.builds(
    lambda w, rate, corr, n, spread: Demand(w, "m", 100.0, rate, corr, min_servers=n, spread=spread),
    st.sampled_from(WORKLOADS),
    st.sampled_from([0.0, 1.0, 20.0, 60.0, 150.0]),
    st.sampled_from([1.0, 1.2]),
    st.integers(1, 3),
    st.sampled_from(["gpu", "instance"]),
)


def _per_workload(plan: Plan, demands: list[Demand]) -> list[str]:
    """The scan before issue 50: the whole plan read again for each redundant workload."""
    faults = []
    missing = {u.workload for u in plan.unplaced}
    for d in demands:
        if not d.redundant or d.rate_rps <= 0 or d.workload in missing:
            continue
        loads = domain_loads(plan, d.spread).get(d.workload, {})
        servers = sum(p.workload == d.workload for i in plan.instances for g in i.gpus for p in g.placements)
        need = d.rate_rps * d.correction * (1 - TOLERANCE)
        if servers < d.min_servers or len(loads) < d.min_servers:
            faults.append(f"{d.workload}: {servers} server(s) in {len(loads)} {d.spread}(s), {d.min_servers} needed")
        elif (left := sum(loads.values()) - max(loads.values())) < need:
            faults.append(f"{d.workload}: losing one {d.spread} leaves {left:.1f} rps of {need:.1f} needed")
    return faults


@settings(max_examples=examples(60), deadline=None)
@given(
    instances=st.lists(instance, max_size=6),
    demands=st.lists(demand, max_size=8),
    gone=st.sets(st.sampled_from(WORKLOADS), max_size=2),
)
def test_faults_are_those_of_the_per_workload_scan(
    instances: list[InstanceOut], demands: list[Demand], gone: set[str]
) -> None:
    plan = Plan("p", tuple(instances), tuple(Unplaced(w, "no capacity") for w in sorted(gone)))
    assert redundancy_faults(plan, demands) == _per_workload(plan, demands)
