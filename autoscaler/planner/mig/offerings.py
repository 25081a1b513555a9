"""Spot and on-demand on MIG types: the translation planner/offerings.py makes for the MPS
planners, with the cut at each workload's floor. Pure.

A spot offering is a GPU type of its own (`<gpu>@spot`, the same measured table); each demand is
its on-demand part (floor x rate, on-demand types only) and its flexible part (`<workload>@spot`,
anywhere: spot where cheaper). MIG slices are bought in whole compute slices per workload, so the
cheapest cut is the floor itself: any more on-demand rate only costs more. A workload whose floor
finds no on-demand capacity is planned again without it (spot rather than nothing); the
on-demand-only plan wins where it places as much for no more.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from autoscaler.config.offerings import ON_DEMAND, SPOT, SPOT_SUFFIX
from autoscaler.model.mig import MigModel
from autoscaler.planner.mig.plan import plan_mig
from autoscaler.planner.offerings import _floor_short, _virtual_option, to_real, to_virtual
from autoscaler.planner.types import Demand, InstanceOption, Plan

EPS = 1e-9


def plan_mig_offerings(
    demands: Sequence[Demand],
    options: Sequence[InstanceOption],
    models: Mapping[str, MigModel],
    current: Plan | None = None,
) -> Plan:
    """plan_mig on the spot-translated inputs, under the real names."""
    if not any(o.capacity_type == SPOT for o in options):
        return plan_mig(demands, options, models, current)
    virtual = [_virtual_option(o) for o in options]
    vmodels = {**models, **{o.gpu: models[o.gpu.removesuffix(SPOT_SUFFIX)] for o in virtual}}
    parts = _split(demands, virtual, frozenset())
    vcurrent = to_virtual(current, parts) if current is not None else None
    plan = plan_mig(parts, virtual, vmodels, vcurrent)
    short = _floor_short(plan, demands)
    if short:
        plan = plan_mig(_split(demands, virtual, short), virtual, vmodels, vcurrent)
        plan = replace(plan, stats={**plan.stats, "on_demand_floor": f"not met for {', '.join(sorted(short))}"})
    mixed = to_real(plan)
    on_demand = [o for o in options if o.capacity_type != SPOT]
    if not on_demand:
        return mixed
    alone = plan_mig(demands, on_demand, models, current)
    if {u.workload for u in alone.unplaced} <= {u.workload for u in mixed.unplaced} and (
        alone.cost_per_hour <= mixed.cost_per_hour + EPS
    ):
        return replace(alone, stats={**alone.stats, "spot": "on-demand alone costs no more"})
    return mixed


def _split(demands: Sequence[Demand], options: Sequence[InstanceOption], waived: frozenset[str]) -> list[Demand]:
    od_gpus = frozenset(o.gpu for o in options if o.capacity_type == ON_DEMAND)
    out: list[Demand] = []
    for d in demands:
        floor = 0.0 if d.workload in waived else min(max(d.on_demand_floor, 0.0), 1.0)
        od = floor * d.rate_rps
        if od > 0 or d.rate_rps <= 0:
            out.append(replace(d, rate_rps=od, gpus=od_gpus))
        if d.rate_rps - od > EPS * max(d.rate_rps, 1.0):
            out.append(replace(d, workload=d.workload + SPOT_SUFFIX, rate_rps=d.rate_rps - od, gpus=None))
    return out
