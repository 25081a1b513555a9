"""Policies that mix MIG GPU types (measured tables) with MPS GPU types (the fitted model). Pure.

The two kinds share no GPU, so a plan is a split of the workloads: some on MIG types (planned by
planner/mig), the rest on MPS types (by the named planner), and the plan is the two side by side.
Which split is chosen by planning the candidates and keeping the best (most placed, then the
cheapest, then the fewest moves):

- everything on MIG, and everything on MPS, where each side can take it;
- each workload on the side where it costs less alone: on MIG its fewest compute slices / 7 x the
  cheapest price per GPU, on MPS the fewest (fractional) GPUs its best MPS type needs (limits.py)
  x that type's price per GPU. Both are lower bounds of the same kind (nothing rounded up);
- with a current plan, each workload where it runs now (stability), new ones by cost.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from autoscaler.config.offerings import SPOT_SUFFIX
from autoscaler.model.mig import GpuModel, MigModel
from autoscaler.model.perfmodel import PerfModel
from autoscaler.planner.limits import gpus_needed
from autoscaler.planner.mig.offerings import plan_mig_offerings
from autoscaler.planner.mig.segments import Chooser
from autoscaler.planner.mig.spread import n_plus_one
from autoscaler.planner.state import price_per_gpu
from autoscaler.planner.types import Demand, InstanceOption, Plan

MpsRun = Callable[[Sequence[Demand], Sequence[InstanceOption], Mapping[str, PerfModel], Plan | None], Plan]


def plan_mixed(
    run_mps: MpsRun,
    demands: Sequence[Demand],
    options: Sequence[InstanceOption],
    models: Mapping[str, GpuModel],
    current: Plan | None,
) -> Plan:
    """The best of the candidate splits (module docstring), planned on both sides."""
    mig = {g: m for g, m in models.items() if isinstance(m, MigModel)}
    mps = {g: m for g, m in models.items() if isinstance(m, PerfModel)}
    mig_opts = [o for o in options if o.gpu in mig]
    mps_opts = [o for o in options if o.gpu in mps]
    if not mps_opts:
        return plan_mig_offerings(demands, mig_opts, mig, current)
    if not mig_opts:
        return run_mps(demands, mps_opts, mps, current)
    names = [d.workload for d in demands]
    splits = {frozenset(names), frozenset(), _by_cost(demands, mig_opts, mig, mps_opts, mps)}
    if current is not None:
        splits.add(_as_now(demands, current, frozenset(mig), _by_cost(demands, mig_opts, mig, mps_opts, mps)))
    now_mig, now_mps = _part(current, frozenset(mig)), _part(current, frozenset(mps))
    plans = []
    for on_mig in sorted(splits, key=sorted):
        a = [d for d in demands if d.workload in on_mig]
        b = [d for d in demands if d.workload not in on_mig]
        left = plan_mig_offerings(a, mig_opts, mig, now_mig) if a else None
        right = run_mps(b, mps_opts, mps, now_mps) if b else None
        plans.append(_join(left, right))
    return min(plans, key=_rank)


def _part(current: Plan | None, gpus: frozenset[str]) -> Plan | None:
    """The current plan's instances on these GPU types (each side re-plans against its own)."""
    if current is None:
        return None
    kept = tuple(i for i in current.instances if all(g.gpu.removesuffix(SPOT_SUFFIX) in gpus for g in i.gpus))
    return Plan(current.planner, kept, current.unplaced, current.moved, current.stats)


def _rank(plan: Plan) -> tuple[int, float, int]:
    return (len(plan.unplaced), round(plan.cost_per_hour, 6), plan.moved)


def _join(left: Plan | None, right: Plan | None) -> Plan:
    parts = [p for p in (left, right) if p is not None]
    name = next((p.planner for p in reversed(parts)), "igniter")
    unplaced = {u.workload: u for p in parts for u in p.unplaced}
    stats = {k: v for p in parts for k, v in p.stats.items()}
    return Plan(
        name,
        tuple(i for p in parts for i in p.instances),
        tuple(unplaced[w] for w in sorted(unplaced)),
        sum(p.moved for p in parts),
        stats,
    )


def _by_cost(
    demands: Sequence[Demand],
    mig_opts: Sequence[InstanceOption],
    mig: Mapping[str, MigModel],
    mps_opts: Sequence[InstanceOption],
    mps: Mapping[str, PerfModel],
) -> frozenset[str]:
    chooser, mig_price, mps_price = Chooser(), price_per_gpu(mig_opts), price_per_gpu(mps_opts)
    out = set()
    for d in demands:
        on_mig = min((_mig_cost(chooser, d, mig[g], p) for g, p in mig_price.items()), default=float("inf"))
        on_mps = min((_mps_cost(d, g, mps[g], p) for g, p in mps_price.items()), default=float("inf"))
        if on_mig <= on_mps:
            out.add(d.workload)
    return frozenset(out)


def _mig_cost(chooser: Chooser, d: Demand, model: MigModel, price: float) -> float:
    segs = chooser.segments(model, d.model, d.slo_ms, d.rate_rps, d.correction)
    if segs is None:
        return float("inf")
    segs = n_plus_one(segs) if d.redundant else segs
    return sum(s.compute for s in segs) / model.geometry.compute_slices * price


def _mps_cost(d: Demand, gpu: str, model: PerfModel, price: float) -> float:
    if d.model not in model.coef:
        return float("inf")
    need = gpus_needed(d, {gpu: model})
    return need * price if need > 0 or d.rate_rps <= 0 else float("inf")


def _as_now(demands: Sequence[Demand], current: Plan, mig_gpus: frozenset[str], new: frozenset[str]) -> frozenset[str]:
    """Each workload on the side it runs on now; a new one where `new` puts it."""
    where: dict[str, bool] = {}
    for inst in current.instances:
        for g in inst.gpus:
            for p in g.placements:
                where[p.workload] = g.gpu.removesuffix(SPOT_SUFFIX) in mig_gpus
    return frozenset(d.workload for d in demands if where.get(d.workload, d.workload in new))
