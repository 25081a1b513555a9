"""An independent feasibility re-check of any Plan, by the performance model alone.

It trusts nothing the planner computed: every GPU's placements are re-predicted together with
`PerfModel.predict_raw`, and the plan is held to the contract (docs/planner.md): latency * correction
<= SLO / 2, throughput / correction >= the rate share (MIG GPUs: the measured table, mig/check.py), shares in (0, 100] summing to at most 100
per GPU, memory where the profile declares it, rate shares adding up to each workload's rate, and
(given the instance types) no instance with more GPUs than it has or more instances than allowed.
--compare and the simulator use it, which is how an infeasible baseline shows as infeasible.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from autoscaler.model.mig import GpuModel, MigModel
from autoscaler.model.perfmodel import PerfModel
from autoscaler.planner.mig.check import check_mig_gpu
from autoscaler.planner.types import Demand, GpuOut, InstanceOption, Plan

REL = 1e-6  # tolerance: the JSON rounds latencies to 1e-4 ms and rates to 1e-6 rps


def check_plan(
    plan: Plan,
    demands: Sequence[Demand],
    models: Mapping[str, GpuModel],
    options: Sequence[InstanceOption] | None = None,
) -> list[str]:
    """Every way `plan` breaks the model's feasibility or the contract; empty if feasible."""
    by_name = {d.workload: d for d in demands}
    problems: list[str] = []
    for i, inst in enumerate(plan.instances):
        for g in inst.gpus:
            problems += _check_gpu(f"instances[{i}].gpus[{g.index}]", g, by_name, models)
    problems += _check_rates(plan, demands)
    if options is not None:
        problems += _check_instances(plan, options)
    return problems


def _check_gpu(where: str, g: GpuOut, demands: Mapping[str, Demand], models: Mapping[str, GpuModel]) -> list[str]:
    model = models.get(g.gpu)
    if model is None:
        return [f"{where}: no model for GPU type {g.gpu!r}"]
    if isinstance(model, MigModel):
        return check_mig_gpu(where, g, demands, model)
    return _check_mps_gpu(where, g, demands, model)


def _check_mps_gpu(where: str, g: GpuOut, demands: Mapping[str, Demand], model: PerfModel) -> list[str]:
    out = []
    for p in g.placements:
        d = demands.get(p.workload)
        if d is None or d.model != p.model or p.model not in model.coef:
            out.append(f"{where}: {p.workload}: unknown workload or model {p.model!r} on {g.gpu}")
        if not 0 < p.mps_percent <= 100 or p.batch < 1:
            out.append(f"{where}: {p.workload}: share {p.mps_percent} % or batch {p.batch} out of range")
    total = sum(p.mps_percent for p in g.placements)
    if total > 100 * (1 + REL):
        out.append(f"{where}: shares add up to {total:g} % (> 100 %)")
    if model.memory_mb is not None and not out:
        used = sum(model.memory(p.model, p.batch) for p in g.placements)
        if used > model.memory_mb * (1 + REL):
            out.append(f"{where}: memory {used:.0f} MB > {model.memory_mb:.0f} MB")
    return out or _check_latencies(where, g, demands, model)


def _check_latencies(where: str, g: GpuOut, demands: Mapping[str, Demand], model: PerfModel) -> list[str]:
    if not g.placements:
        return []
    preds = model.predict_raw([(p.model, p.batch, p.mps_percent) for p in g.placements])
    out = []
    for p, (lat, thr) in zip(g.placements, preds):
        d = demands[p.workload]
        if lat * d.correction > d.slo_ms / 2.0 * (1 + REL):
            out.append(
                f"{where}: {p.workload}: predicted latency {lat * d.correction:.2f} ms > budget {d.slo_ms / 2:g} ms"
            )
        if thr / d.correction < p.rate_rps * (1 - REL) - 1e-6:
            out.append(
                f"{where}: {p.workload}: predicted throughput {thr / d.correction:.1f} rps < rate {p.rate_rps:.1f} rps"
            )
    return out


def _check_rates(plan: Plan, demands: Sequence[Demand]) -> list[str]:
    placed: dict[str, float] = {}
    for inst in plan.instances:
        for g in inst.gpus:
            for p in g.placements:
                placed[p.workload] = placed.get(p.workload, 0.0) + p.rate_rps
    unplaced = {u.workload for u in plan.unplaced}
    out = []
    for d in demands:
        if d.workload in unplaced:
            continue
        got = placed.get(d.workload, 0.0)
        if abs(got - d.rate_rps) > REL * max(d.rate_rps, 1.0) + 1e-6:
            out.append(f"{d.workload}: placements carry {got:.3f} rps of {d.rate_rps:.3f} rps")
    return out


def _check_instances(plan: Plan, options: Sequence[InstanceOption]) -> list[str]:
    by_name = {o.key: o for o in options}
    count: Counter[str] = Counter()
    out = []
    for i, inst in enumerate(plan.instances):
        o = by_name.get(inst.key)
        count[inst.key] += 1
        if o is None:
            out.append(f"instances[{i}]: instance type {inst.instance_type!r} ({inst.capacity_type}) is not offered")
        elif len(inst.gpus) > o.gpus or any(g.gpu != o.gpu or not 0 <= g.index < o.gpus for g in inst.gpus):
            out.append(f"instances[{i}]: {len(inst.gpus)} GPUs listed on a {o.name} ({o.gpus} x {o.gpu})")
    for name, n in count.items():
        o = by_name.get(name)
        if o is not None and o.max_instances is not None and n > o.max_instances:
            out.append(f"{name}: {n} instances > max_instances {o.max_instances}")
    return out
