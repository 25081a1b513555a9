"""Spot and on-demand: two offerings of one instance type, with different prices. Pure.

Every planner (igniter, the baselines, exact) plans on GPU types with prices; spot adds no new
algorithm, only a translation around it:

- A spot offering becomes a GPU type of its own, `<gpu>@spot` (same performance model, the spot
  price), on an option named `<type>@spot`, so the planner's price-per-capacity choice is what
  draws capacity to spot, and an unavailable spot offering simply is not there.
- Each demand is split in two parts (SkyPilot's base_ondemand_fallback_replicas, as a share of
  the rate): at least `on_demand_floor` of its rate under the workload's own name, allowed on
  on-demand GPU types only, and the rest as `<workload>@spot`, allowed anywhere (spot when it is
  cheaper, on-demand when spot is unavailable). Parts of different workloads share GPUs freely.
  Where the cut falls is chosen two ways (planner/cuts.py); both are planned, the better plan
  wins (`_rank`).
- The current plan is translated the same way, so stability keeps what runs: a workload's
  on-demand placements are labelled as its on-demand part until they carry its cut, the rest
  as its flexible part.
- The plan comes back under the real names: spot instances carry `capacity_type: spot` and the
  spot price, placements and unplaced entries the workload's own name.

A spot plan that costs more than the on-demand-only one (a fleet of a GPU or two, where each
floor takes a whole on-demand GPU) gives way to it: that plan meets every floor.

When on-demand capacity cannot take a floor (every on-demand offering unavailable or at
max_instances), that workload is planned once more without its floor (spot rather than nothing);
`stats["on_demand_floor"]` names the workloads. Without spot offerings nothing is translated.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace

from autoscaler.config.offerings import ON_DEMAND, SPOT, SPOT_SUFFIX
from autoscaler.model.perfmodel import PerfModel
from autoscaler.planner.cuts import cut_choices
from autoscaler.planner.state import price_per_gpu
from autoscaler.planner.types import Demand, GpuOut, InstanceOption, InstanceOut, PlacementOut, Plan, Unplaced

Run = Callable[[Sequence[Demand], Sequence[InstanceOption], Mapping[str, PerfModel], Plan | None], Plan]
EPS = 1e-9


def plan_offerings(
    run: Run,
    demands: Sequence[Demand],
    options: Sequence[InstanceOption],
    models: Mapping[str, PerfModel],
    current: Plan | None = None,
) -> Plan:
    """`run` on the translated inputs, the plan translated back; see the module docstring."""
    if not any(o.capacity_type == SPOT for o in options):
        return run(demands, options, models, current)
    virtual = [_virtual_option(o) for o in options]
    vmodels = {**models, **{o.gpu: models[_real(o.gpu)] for o in virtual}}
    plans = [
        _plan_parts(run, demands, virtual, vmodels, current, cuts) for cuts in fresh_cuts(demands, virtual, vmodels)
    ]
    return cheaper_on_demand_only(run, demands, options, models, current, to_real(min(plans, key=_rank)))


def _plan_parts(
    run: Run,
    demands: Sequence[Demand],
    virtual: Sequence[InstanceOption],
    vmodels: Mapping[str, PerfModel],
    current: Plan | None,
    cuts: Mapping[str, float],
) -> Plan:
    """`run` on the parts of one cut set (in the planner's terms); a workload whose on-demand part
    found no capacity is planned once more without its floor."""
    parts = split(demands, virtual, vmodels, cuts=cuts)
    vcurrent = to_virtual(current, parts) if current is not None else None
    plan = run(parts, virtual, vmodels, vcurrent)
    short = _floor_short(plan, demands)
    if short:
        plan = run(split(demands, virtual, vmodels, short, cuts), virtual, vmodels, vcurrent)
        plan = replace(plan, stats={**plan.stats, "on_demand_floor": f"not met for {', '.join(sorted(short))}"})
    return plan


def _rank(plan: Plan) -> tuple[int, float, int]:
    """Among the cut sets' plans: the most placed, then the cheapest (to the cent per hour, so a
    rounding difference decides nothing), then the fewest moves against the current plan."""
    return (len(plan.unplaced), round(plan.cost_per_hour, 2), plan.moved)


def fresh_cuts(
    demands: Sequence[Demand], options: Sequence[InstanceOption], models: Mapping[str, PerfModel]
) -> list[dict[str, float]]:
    """The cut sets to plan (planner/cuts.py), on the planner's options and models."""
    od_gpus = frozenset(o.gpu for o in options if o.capacity_type == ON_DEMAND)
    floors = {d.workload: min(max(d.on_demand_floor, 0.0), 1.0) for d in demands}
    return cut_choices(demands, floors, od_gpus, price_per_gpu(options), models)


def cheaper_on_demand_only(
    run: Run,
    demands: Sequence[Demand],
    options: Sequence[InstanceOption],
    models: Mapping[str, PerfModel],
    current: Plan | None,
    mixed: Plan,
) -> Plan:
    """Spot is bought to save money, so the on-demand-only plan wins when it places as much for no
    more: on a fleet of a GPU or two each floor takes a whole on-demand GPU beside the spot ones
    (three floors of 0.1 and the rest on spot cost 1.35 x one on-demand GPU). It meets every floor
    and runs no interruption risk."""
    on_demand = [o for o in options if o.capacity_type != SPOT]
    if not on_demand:
        return mixed
    alone = run(demands, on_demand, models, current)
    unplaced = {u.workload for u in mixed.unplaced}
    if {u.workload for u in alone.unplaced} <= unplaced and alone.cost_per_hour <= mixed.cost_per_hour + EPS:
        return replace(alone, stats={**alone.stats, "spot": "on-demand alone costs no more"})
    return mixed


def split(
    demands: Iterable[Demand],
    options: Sequence[InstanceOption],
    models: Mapping[str, PerfModel],
    waived: frozenset[str] = frozenset(),
    cuts: Mapping[str, float] | None = None,
) -> list[Demand]:
    """Each demand as its on-demand part (its cut from `cuts`, by default its own cheapest,
    planner/cuts.py) and its flexible part (`<workload>@spot`, anywhere); empty parts are left
    out. The parts follow the rates: nothing holds an on-demand part at what it carried before,
    since the planner keeps the current placements that still fit either part (`to_virtual`),
    and the cut sets' plans are ranked by cost and then by moves."""
    demands = list(demands)
    od_gpus = frozenset(o.gpu for o in options if o.capacity_type == ON_DEMAND)
    if cuts is None:
        cuts = fresh_cuts(demands, options, models)[0]
    out: list[Demand] = []
    for d in demands:
        floor = 0.0 if d.workload in waived else min(max(d.on_demand_floor, 0.0), 1.0)
        od = 0.0 if floor <= 0 else cuts[d.workload]
        if od > 0 or d.rate_rps <= 0:
            out.append(replace(d, rate_rps=od, gpus=od_gpus))
        if d.rate_rps - od > EPS * max(d.rate_rps, 1.0):
            out.append(replace(d, workload=d.workload + SPOT_SUFFIX, rate_rps=d.rate_rps - od, gpus=None))
    return out


def _virtual_option(o: InstanceOption) -> InstanceOption:
    if o.capacity_type == ON_DEMAND:
        return o
    return replace(o, name=o.name + SPOT_SUFFIX, gpu=o.gpu + SPOT_SUFFIX)


def _real(name: str) -> str:
    return name.removesuffix(SPOT_SUFFIX)


def _floor_short(plan: Plan, demands: Sequence[Demand]) -> frozenset[str]:
    """Workloads whose on-demand part found no capacity while their flexible part was placed."""
    placed = {p.workload for i in plan.instances for g in i.gpus for p in g.placements}
    names = {d.workload for d in demands if d.on_demand_floor > 0 and d.rate_rps > 0}
    return frozenset(
        u.workload
        for u in plan.unplaced
        if u.workload in names and u.workload + SPOT_SUFFIX in placed and u.reason.startswith("no capacity")
    )


def to_virtual(plan: Plan, parts: Sequence[Demand]) -> Plan:
    """A real plan in the planner's terms: spot instances on their `@spot` option and GPU type,
    their placements the flexible part's. A workload's on-demand placements go to its on-demand
    part (the one in `parts`, from `split`) if it has no flexible part, to the flexible part if it
    has no on-demand part, and otherwise to the on-demand part until they can carry its rate
    (largest share first, as stability holds them), the rest to the flexible part."""
    od_rate = {d.workload: d.rate_rps for d in parts if not d.workload.endswith(SPOT_SUFFIX)}
    flex = {_real(d.workload) for d in parts if d.workload.endswith(SPOT_SUFFIX)}
    to_od = _on_demand_labels(plan, {w: r if w in flex else math.inf for w, r in od_rate.items()})
    instances = []
    for i, inst in enumerate(plan.instances):
        spot = inst.capacity_type == SPOT
        gpus = tuple(
            GpuOut(
                g.index,
                g.gpu + SPOT_SUFFIX if spot else g.gpu,
                tuple(
                    _renamed(p, p.workload if not spot and to_od[(i, g.index, k)] else p.workload + SPOT_SUFFIX)
                    for k, p in enumerate(g.placements)
                ),
            )
            for g in inst.gpus
        )
        name = inst.instance_type + SPOT_SUFFIX if spot else inst.instance_type
        instances.append(InstanceOut(name, inst.price_per_hour, gpus, capacity_type=inst.capacity_type))
    return Plan(plan.planner, tuple(instances), plan.unplaced, plan.moved, plan.stats)


def _on_demand_labels(plan: Plan, floor: Mapping[str, float]) -> dict[tuple[int, int, int], bool]:
    """(instance, GPU, placement) -> whether an on-demand placement goes to its workload's
    on-demand part: while the ones before it (largest share first) carry less than `floor`."""
    rows = [
        (-p.mps_percent, i, g.index, k, p)
        for i, inst in enumerate(plan.instances)
        if inst.capacity_type == ON_DEMAND
        for g in inst.gpus
        for k, p in enumerate(g.placements)
    ]
    carried: dict[str, float] = {}
    out: dict[tuple[int, int, int], bool] = {}
    for _, i, gi, k, p in sorted(rows, key=lambda x: x[:4]):
        have = carried.get(p.workload, 0.0)
        out[(i, gi, k)] = have < floor.get(p.workload, 0.0) - EPS
        carried[p.workload] = have + p.predicted_throughput_rps
    return out


def to_real(plan: Plan) -> Plan:
    """The planner's plan under the real names (see the module docstring)."""
    instances = tuple(
        InstanceOut(
            _real(inst.instance_type),
            inst.price_per_hour,
            tuple(
                GpuOut(g.index, _real(g.gpu), tuple(_renamed(p, _real(p.workload)) for p in g.placements))
                for g in inst.gpus
            ),
            capacity_type=SPOT if inst.instance_type.endswith(SPOT_SUFFIX) else ON_DEMAND,
        )
        for inst in plan.instances
    )
    unplaced: dict[str, Unplaced] = {}
    for u in plan.unplaced:
        unplaced.setdefault(_real(u.workload), Unplaced(_real(u.workload), u.reason))
    return Plan(plan.planner, instances, tuple(unplaced[w] for w in sorted(unplaced)), plan.moved, plan.stats)


def _renamed(p: PlacementOut, workload: str) -> PlacementOut:
    return p if p.workload == workload else replace(p, workload=workload)


def on_demand_share(plan: Plan) -> dict[str, float]:
    """Per workload, the fraction of its planned rate on on-demand instances (1.0 with no rate)."""
    total: dict[str, float] = {}
    od: dict[str, float] = {}
    for inst in plan.instances:
        for g in inst.gpus:
            for p in g.placements:
                total[p.workload] = total.get(p.workload, 0.0) + p.rate_rps
                if inst.capacity_type == ON_DEMAND:
                    od[p.workload] = od.get(p.workload, 0.0) + p.rate_rps
    return {w: od.get(w, 0.0) / t if t > 0 else 1.0 for w, t in total.items()}
