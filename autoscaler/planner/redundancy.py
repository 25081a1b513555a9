"""Fault domains (scaling.redundancy): the check that a plan keeps every redundant workload
serving through the loss of any one GPU (spread gpu) or instance (spread instance). Pure.

The planner builds N+1 plans (tasks.redundant_pieces, anti-affinity in state.GpuPool.shares_domain
and build.take_apart, all-or-nothing stability in stability.hold_redundant); this module states
the invariant they must meet, so a plan kept from the current one is checked against it and
tests can assert it on any plan.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence

from autoscaler.planner.types import Demand, Plan

TOLERANCE = 1e-6  # relative: predictions are rounded in the plan JSON


def domain_loads(plan: Plan, spread: str) -> dict[str, dict[tuple[int, int], float]]:
    """Per workload, the predicted throughput it has in each fault domain: (instance, GPU index),
    or (instance, -1) when the domain is the whole instance."""
    out: dict[str, dict[tuple[int, int], float]] = defaultdict(lambda: defaultdict(float))
    for i, inst in enumerate(plan.instances):
        for g in inst.gpus:
            for p in g.placements:
                out[p.workload][(i, g.index if spread == "gpu" else -1)] += p.predicted_throughput_rps
    return out


def redundancy_faults(plan: Plan, demands: Sequence[Demand]) -> list[str]:
    """Why a redundant workload of `plan` does not survive the loss of one fault domain: fewer
    servers than min_servers, or a domain whose loss leaves less predicted throughput than its
    rate needs (rate x SLO-guard factor). Empty when every one does; unplaced workloads are the
    plan's `unplaced` list's business."""
    faults = []
    missing = {u.workload for u in plan.unplaced}
    # one pass over the plan per spread and for the server counts, not one per workload (issue 50:
    # thousands of redundant MIG workloads made this the re-plan's quadratic part)
    by_spread: dict[str, dict[str, dict[tuple[int, int], float]]] = {}
    count = Counter(p.workload for i in plan.instances for g in i.gpus for p in g.placements)
    for d in demands:
        if not d.redundant or d.rate_rps <= 0 or d.workload in missing:
            continue
        if d.spread not in by_spread:
            by_spread[d.spread] = domain_loads(plan, d.spread)
        loads = by_spread[d.spread].get(d.workload, {})
        servers = count[d.workload]
        need = d.rate_rps * d.correction * (1 - TOLERANCE)
        if servers < d.min_servers or len(loads) < d.min_servers:
            faults.append(f"{d.workload}: {servers} server(s) in {len(loads)} {d.spread}(s), {d.min_servers} needed")
        elif (left := sum(loads.values()) - max(loads.values())) < need:
            faults.append(f"{d.workload}: losing one {d.spread} leaves {left:.1f} rps of {need:.1f} needed")
    return faults
