"""The planner's entry points: `make_plan`, `planning_inputs` and the registry of planners."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from autoscaler.config.offerings import SPOT, offering_key
from autoscaler.config.policy import Policy
from autoscaler.model.mig import GpuModel, MigModel, load_gpu_model
from autoscaler.model.perfmodel import PerfModel
from autoscaler.planner import baselines, exact, limits, shares, tasks
from autoscaler.planner.build import build, count_moved
from autoscaler.planner.igniter import (
    PLAIN,
    Config,
    capacity_reason,
    final_check,
    place_all,
    plan_tasks,
    spend_idle_share,
)
from autoscaler.planner.kept import Kept
from autoscaler.planner.limits import check_bound, check_plan_size
from autoscaler.planner.mig import joint, packing
from autoscaler.planner.mixed import plan_mixed
from autoscaler.planner.offerings import plan_offerings
from autoscaler.planner.redundancy import redundancy_faults
from autoscaler.planner.repair import repair
from autoscaler.planner.stability import remaining_demands, seed
from autoscaler.planner.state import GpuPool
from autoscaler.planner.types import Demand, InstanceOption, Plan, Unplaced

PlannerFn = Callable[[Sequence[Demand], Sequence[InstanceOption], Mapping[str, PerfModel], Plan | None], Plan]


STABILITY_TOLERANCE = 0.03  # a plan that keeps placements may cost this much more than a fresh one
FRESH_KEPT = 1024  # fresh plans remembered (_fresh) ...
FRESH_DEMANDS_KEPT = 1 << 16  # ... with this many demands among them at most (planner/kept.py)
_fresh_plans: Kept[tuple[Any, ...], Plan] = Kept(FRESH_KEPT, FRESH_DEMANDS_KEPT, lambda key: len(key[0]))
_last_kept: dict[str, tuple[tuple[Any, ...], Plan, Plan]] = {}  # `_kept`: the last plan that keeps placements


def forget_memos(models: Iterable[GpuModel] = ()) -> None:
    """Forget every answer the planner remembers, so that the next plan is computed cold, as a
    tick with rates it has never seen is: fresh plans (here), decompositions, sizes and batch limits
    (tasks.py), whole-GPU rates (limits.py), GPUs' predictions (shares.py), MIG packings and choices
    (mig/), and each of `models`' solo predictions. For a benchmark that times the planner itself
    (benchmarks/plan_scale.py): without it, the runs after the first answer from the memos."""
    _fresh_plans.clear()
    _last_kept.clear()
    tasks.forget_sizes()
    limits.gpu_rps.cache_clear()
    shares.forget_predictions()
    packing.forget_packings()
    joint.forget_choices()
    for m in models:
        if isinstance(m, PerfModel):
            m.forget_solo()


def igniter(
    demands: Sequence[Demand],
    options: Sequence[InstanceOption],
    models: Mapping[str, PerfModel],
    current: Plan | None = None,
    cfg: Config = Config(),
    name: str = "igniter",
) -> Plan:
    """Algorithm 1 (+ what `cfg` enables). With `current`: keep what still works, unless that
    costs more than STABILITY_TOLERANCE over a fresh plan (kept placements block better packings
    as rates drift); then the fresh plan, with `moved` counted against `current`."""
    fresh = _fresh(demands, options, models, cfg, name)
    if current is None:
        return fresh
    kept = _kept(demands, options, models, current, cfg, name)
    if (
        kept.cost_per_hour <= fresh.cost_per_hour * (1 + STABILITY_TOLERANCE) + 1e-9
        and len(kept.unplaced) <= len(fresh.unplaced)
        and not redundancy_faults(kept, demands)
    ):
        return kept
    note = f"fresh plan: keeping placements would cost {kept.cost_per_hour:.2f} $/h"
    return Plan(name, fresh.instances, fresh.unplaced, count_moved(fresh, current), {**fresh.stats, "stability": note})


def _fresh(
    demands: Sequence[Demand],
    options: Sequence[InstanceOption],
    models: Mapping[str, PerfModel],
    cfg: Config,
    name: str,
) -> Plan:
    """The plan from scratch, remembered per exact inputs (FRESH_KEPT of them and
    FRESH_DEMANDS_KEPT demands at most, oldest forgotten first): every re-plan needs it beside the
    one that keeps placements, and while rates hold the same inputs come back tick after tick with
    another current plan. The planner is deterministic and its inputs are frozen, so the
    remembered plan is the one it would make."""
    key = (tuple(demands), tuple(options), tuple(models.items()), cfg, name)
    plan = _fresh_plans.get(key)
    if plan is None:
        plan = _igniter(demands, options, models, None, cfg, name)
        _fresh_plans.put(key, plan)
    return plan


def _kept(
    demands: Sequence[Demand],
    options: Sequence[InstanceOption],
    models: Mapping[str, PerfModel],
    current: Plan,
    cfg: Config,
    name: str,
) -> Plan:
    """The plan that keeps placements, the last one remembered: a tick that finds a cost_ceiling
    of no use (no cheaper plan than the hold plan) plans the target next, with this plan in it."""
    key = (tuple(demands), tuple(options), tuple(models.items()), cfg, name)
    last = _last_kept.get("plan")  # one read: another thread's plan replaces the entry, never changes it
    if last is not None and last[1] is current and last[0] == key:
        return last[2]
    plan = _igniter(demands, options, models, current, cfg, name)
    _last_kept["plan"] = (key, current, plan)
    return plan


def _igniter(
    demands: Sequence[Demand],
    options: Sequence[InstanceOption],
    models: Mapping[str, PerfModel],
    current: Plan | None,
    cfg: Config,
    name: str,
) -> Plan:
    fleet = GpuPool(_usable(models, options), options, cfg.max_colocated)
    todo = demands
    if current is not None:
        todo = remaining_demands(demands, seed(fleet, current, demands))
    tasks, unplaced = plan_tasks(fleet, todo, cfg)
    unplaced += [capacity_reason(t) for t in place_all(fleet, tasks, cfg)]
    closed = repair(fleet, cfg) if cfg.repair else 0
    fixed, lost = final_check(fleet)
    unplaced += [capacity_reason(t) for t in lost]
    spent = spend_idle_share(fleet) if cfg.spend_idle else 0.0
    plan = build(
        name,
        fleet,
        unplaced,
        {"tasks": len(tasks), "repair_closed": closed, "final_check_fixed": fixed, "idle_share_spent": round(spent, 3)},
    )
    return plan if current is not None else _no_moves(plan)


def igniter_plain(
    demands: Sequence[Demand],
    options: Sequence[InstanceOption],
    models: Mapping[str, PerfModel],
    current: Plan | None = None,
) -> Plan:
    """The paper's algorithm as published (and as the prototype runs it), for comparison."""
    return igniter(demands, options, models, None, PLAIN, "igniter-plain")


def igniter_lean(
    demands: Sequence[Demand],
    options: Sequence[InstanceOption],
    models: Mapping[str, PerfModel],
    current: Plan | None = None,
) -> Plan:
    """The default without the idle-share step (Algorithm 2's least shares), to measure that step."""
    return igniter(demands, options, models, current, replace(Config(), spend_idle=False), "igniter-lean")


def _usable(models: Mapping[str, PerfModel], options: Sequence[InstanceOption]) -> dict[str, PerfModel]:
    _check_known(models, options)
    return {o.gpu: models[o.gpu] for o in options}


def _check_known(models: Mapping[str, GpuModel], options: Sequence[InstanceOption]) -> None:
    missing = sorted({o.gpu for o in options} - set(models))
    if missing:
        raise ValueError(f"no performance model for GPU type(s) {', '.join(missing)}")


def _no_moves(plan: Plan) -> Plan:
    return Plan(plan.planner, plan.instances, plan.unplaced, 0, plan.stats)


def exact_plan(
    demands: Sequence[Demand],
    options: Sequence[InstanceOption],
    models: Mapping[str, PerfModel],
    current: Plan | None = None,
) -> Plan:
    """The MILP's plan; should HiGHS stop at its time limit short of a proof of optimality with
    something worse than iGniter's plan, iGniter's plan (so `exact` is never the worse one)."""
    plan = exact.exact(demands, options, models)
    if plan.stats.get("optimal", True):
        return plan
    greedy = igniter(demands, options, models)
    if greedy.cost_per_hour < plan.cost_per_hour:
        return Plan("exact", greedy.instances, greedy.unplaced, 0, {**plan.stats, "used": "igniter's plan"})
    return plan


PLANNERS: dict[str, PlannerFn] = {
    "igniter": igniter,
    "ffd": baselines.ffd,
    "gslice": baselines.gslice,
    "gpulets": baselines.gpulets,
    "exact": exact_plan,
}
EXTRA: dict[str, PlannerFn] = {"igniter-plain": igniter_plain, "igniter-lean": igniter_lean}


def make_plan(
    demands: Sequence[Demand],
    options: Sequence[InstanceOption],
    models: Mapping[str, GpuModel],
    *,
    planner: str = "igniter",
    current: Plan | None = None,
    max_instances: int | None = None,
) -> Plan:
    """The cheapest plan the named planner finds; see docs/planner.md for the JSON it serialises to.

    With `current`, placements that are still feasible stay where they are and `Plan.moved`
    counts the placements that start or change. A positive-rate demand that no instance type can
    serve is listed in `unplaced` with a reason; rate-0 demands need (and get) no placement.
    A plan of more than `max_instances` raises TooManyInstances (limits.py), before planning
    where a lower bound already says so. Spot options (capacity_type spot) are planned as offerings
    of their own, each demand keeping its `on_demand_floor` of its rate on on-demand instances
    (planner/offerings.py). GPU types with measured MIG tables are planned by planner/mig, beside
    the MPS types, the workloads split between the two by cost (planner/mixed.py).
    """
    plan = _make_plan(demands, options, models, planner, current, max_instances)
    check_plan_size(plan, max_instances)
    faults = redundancy_faults(plan, demands)
    return replace(plan, stats={**plan.stats, "redundancy": faults}) if faults else plan


def cost_ceiling(
    demands: Sequence[Demand],
    options: Sequence[InstanceOption],
    models: Mapping[str, GpuModel],
    *,
    planner: str = "igniter",
    current: Plan | None = None,
    max_instances: int | None = None,
) -> float | None:
    """A cost that make_plan's plan for the same arguments surely does not exceed, found without
    planning afresh; None where none can be given that way.

    igniter keeps the plan that keeps placements unless a fresh plan is cheaper by more than
    STABILITY_TOLERANCE, or the kept one places less or breaks a fault domain. So when the kept
    plan places every demand and breaks none, the plan costs at most what it costs, and the fresh
    plan (most of a plan's CPU) need not be made to know that (the controller's scale-in wait,
    loop/tick/controller.py `_waiting`). Only igniter's own path says so: with MIG types, spot
    offerings or another planner, None. So too where the plan could be refused
    (TooManyInstances): for the kept plan's cost, the cheapest instance bounds the count only
    below `max_instances` + 1. Raises what make_plan raises before planning (check_bound)."""
    if planner != "igniter" or current is None or not options or any(o.capacity_type == SPOT for o in options):
        return None
    if any(isinstance(m, MigModel) for m in models.values()):
        return None
    _check_known(models, options)
    check_bound(demands, options, models, max_instances)
    perf = {g: m for g, m in models.items() if isinstance(m, PerfModel)}
    kept = _kept(demands, options, perf, current, Config(), "igniter")
    if kept.unplaced or redundancy_faults(kept, demands):
        return None
    cheapest = min(o.price_per_hour for o in options)
    if max_instances is not None and not (cheapest > 0 and kept.cost_per_hour + 1e-6 < (max_instances + 1) * cheapest):
        return None
    return kept.cost_per_hour


def _make_plan(
    demands: Sequence[Demand],
    options: Sequence[InstanceOption],
    models: Mapping[str, GpuModel],
    planner: str,
    current: Plan | None,
    max_instances: int | None,
) -> Plan:
    fn = PLANNERS.get(planner) or EXTRA.get(planner)
    if fn is None:
        raise ValueError(f"unknown planner {planner!r} (known: {', '.join([*PLANNERS, *EXTRA])})")
    if not options:
        return Plan(
            planner, (), tuple(Unplaced(d.workload, "no instance type is available") for d in demands if d.rate_rps > 0)
        )
    _check_known(models, options)
    check_bound(demands, options, models, max_instances)
    _check_redundancy(demands, models, fn)

    def run_mps(d: Sequence[Demand], o: Sequence[InstanceOption], m: Mapping[str, PerfModel], c: Plan | None) -> Plan:
        return plan_offerings(lambda d2, o2, m2, c2: _run(fn, d2, o2, m2, c2), d, o, m, c)

    if any(isinstance(m, MigModel) for m in models.values()):
        return plan_mixed(run_mps, demands, options, models, current)
    return run_mps(demands, options, {g: m for g, m in models.items() if isinstance(m, PerfModel)}, current)


def _check_redundancy(demands: Sequence[Demand], models: Mapping[str, GpuModel], fn: PlannerFn) -> None:
    """Fault domains are planned by igniter, and on MIG GPU types by GPU only (planner/mig/spread.py;
    the policy refuses the rest)."""
    if not any(d.redundant for d in demands):
        return
    if fn not in (igniter, igniter_lean, igniter_plain):
        raise ValueError("scaling.redundancy min_servers 2 is planned by the igniter planners only")
    if any(isinstance(m, MigModel) for m in models.values()) and any(d.spread != "gpu" for d in demands):
        raise ValueError("scaling.redundancy spread instance is not supported with MIG GPU types (spread gpu is)")


def _run(
    fn: PlannerFn,
    demands: Sequence[Demand],
    options: Sequence[InstanceOption],
    models: Mapping[str, PerfModel],
    current: Plan | None,
) -> Plan:
    """One planner on (possibly spot-translated) inputs; igniter if `exact` finds it too large."""
    try:
        plan = fn(demands, options, models, current)
    except exact.TooLarge as exc:
        plan = igniter(demands, options, models, current)
        return Plan(plan.planner, plan.instances, plan.unplaced, plan.moved, {**plan.stats, "fallback": str(exc)})
    if current is not None and fn is not igniter:
        return Plan(plan.planner, plan.instances, plan.unplaced, count_moved(plan, current), plan.stats)
    return plan


def planning_inputs(
    policy: Policy,
    rates: Mapping[str, float] | None = None,
    corrections: Mapping[str, float] | None = None,
    unavailable: frozenset[str] = frozenset(),
) -> tuple[list[Demand], list[InstanceOption], dict[str, GpuModel]]:
    """A policy's workloads (rates and SLO-guard factors overridden where given; each rate raised to
    the workload's `min_rate_rps` floor; each with its on-demand floor), its offerings less the
    unavailable ones (`unavailable` holds offering keys: a type's name for on-demand, `<type>@spot`
    for spot), and the model of every GPU type the policy names (fitted, or measured MIG rows with the
    policy's `scaling.mig_latency_margin`). A type is offered as spot
    only when it has a spot price and scaling.spot is enabled."""
    rates, corrections = rates or {}, corrections or {}
    demands = [
        Demand(
            w.name,
            w.model,
            w.slo_ms,
            max(0.0, float(w.min_rate_rps), float(rates.get(w.name, w.rate_rps))),
            max(1.0, float(corrections.get(w.name, 1.0))),
            on_demand_floor=policy.on_demand_floor(w.name),
            min_servers=policy.scaling.redundancy.min_servers,
            spread=policy.scaling.redundancy.spread,
        )
        for w in policy.workloads
    ]
    options = [
        InstanceOption(t.name, t.gpu, t.gpus, t.price_per_hour, t.max_instances)
        for t in policy.instance_types
        if t.name not in unavailable
    ]
    options += [
        InstanceOption(t.name, t.gpu, t.gpus, t.spot_price_per_hour, t.max_instances, capacity_type=SPOT)
        for t in policy.instance_types
        if t.spot_price_per_hour is not None and policy.buys_spot() and offering_key(t.name, SPOT) not in unavailable
    ]
    margin = policy.scaling.mig_latency_margin
    models = {t.gpu: load_gpu_model(policy.profiles_dir / f"{t.gpu}.yaml", margin) for t in policy.instance_types}
    return demands, options, models
