"""How big a plan may get: a cheap lower bound on the instances a demand needs, checked before the
planner runs, so a rate typo (1e8 req/s) is refused in milliseconds instead of planning 65,000
instances for a minute; and the same limit on the plan the planner returns.

The bound: no GPU serves a workload faster than one whole GPU at its largest batch that meets the
latency budget, so each workload needs at least rate / that throughput GPUs on its best GPU type,
and the fleet at least their sum over the most GPUs one instance type has; and, for the workloads
an offering without max_instances can serve (the plan places all of them), the fewest instances
that hold their GPUs with each offering at most its max_instances.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import lru_cache

from autoscaler.config.errors import InputError
from autoscaler.config.offerings import ON_DEMAND
from autoscaler.config.policy import Policy
from autoscaler.model.mig import GpuModel, MigModel, best_slice_rps_per_gpu
from autoscaler.model.perfmodel import PerfModel
from autoscaler.planner.tasks import max_batch
from autoscaler.planner.types import Demand, InstanceOption, Plan


class TooManyInstances(ValueError):
    """A plan (or its lower bound) above the instance limit; `workload` needs the most GPUs."""

    def __init__(self, needed: int, limit: int, workload: str | None, *, at_least: bool) -> None:
        self.needed, self.limit, self.workload = needed, limit, workload
        qualifier = "at least " if at_least else ""
        super().__init__(
            f"the plan needs {qualifier}{needed:,} instances, more than the limit of {limit:,} "
            "(scaling.max_instances); set scaling.max_cost_per_hour to cap the fleet's cost instead, "
            "or raise scaling.max_instances if the fleet is really this big"
        )


def gpus_needed(demand: Demand, models: Mapping[str, GpuModel]) -> float:
    """The fewest GPUs (fractional) that could carry `demand` on its best GPU type; 0 when none can
    serve it (it will be unplaced, not planned). On a MIG GPU: every compute slice at the best
    usable row per compute slice."""
    if demand.rate_rps <= 0:
        return 0.0
    best = 0.0
    for model in models.values():
        if isinstance(model, MigModel):
            best = max(best, best_slice_rps_per_gpu(model, demand.model, demand.slo_ms, demand.correction))
            continue
        best = max(best, gpu_rps(model, demand.model, demand.slo_ms, demand.correction))
    return demand.rate_rps / best if best > 0 else 0.0


@lru_cache(maxsize=4096)
def gpu_rps(model: PerfModel, name: str, slo_ms: float, correction: float) -> float:
    """The most one whole GPU of `model` serves of `name` within the budget (0.0: none; never
    below 0, so a max over types is as if the type were skipped). Remembered per exact argument
    (a pure function; a PerfModel is hashed by identity): the bound is checked on every plan, for
    every workload, with rates that move but models, SLOs and corrections that mostly do not."""
    if name not in model.coef:
        return 0.0
    top = max_batch(model, name, slo_ms / 2.0 / correction)
    return model.solo(name, top, 100.0)[1] / correction if top else 0.0


def min_instances(
    demands: Sequence[Demand], options: Sequence[InstanceOption], models: Mapping[str, GpuModel]
) -> tuple[int, str | None]:
    """A lower bound on the instances any plan needs, and the workload that needs the most GPUs."""
    if not options:
        return 0, None
    need = {d.workload: gpus_needed(d, models) for d in demands}
    per_instance = max(o.gpus for o in options)
    total = math.floor(sum(need.values()) * (1 - 1e-9))
    placed = math.floor(sum(need[d.workload] for d in demands if _uncapped_serves(d, options, models)) * (1 - 1e-9))
    worst = max(need, key=lambda w: need[w], default=None)
    bound = max(math.ceil(total / per_instance), fewest_holding(placed, options))
    return bound, worst if worst is not None and need[worst] > 0 else None


def _uncapped_serves(demand: Demand, options: Sequence[InstanceOption], models: Mapping[str, GpuModel]) -> bool:
    """Whether an offering without max_instances can serve all of `demand`: then the plan places
    all of it (no capacity runs out), and its GPUs count towards fewest_holding."""
    return any(
        o.max_instances is None
        and o.gpu in models
        and (demand.gpus is None or o.gpu in demand.gpus)
        and (demand.on_demand_floor <= 0 or o.capacity_type == ON_DEMAND)
        and gpus_needed(demand, {o.gpu: models[o.gpu]}) > 0
        for o in options
    )


def fewest_holding(gpus: int, options: Sequence[InstanceOption]) -> int:
    """The fewest instances that hold `gpus` GPUs, each offering at most its max_instances: the
    largest first. Without it the bound divided by the largest type even where that type was
    capped at a few instances, so a plan of 33,000 small instances was planned in full (seconds)
    before the limit of 10,000 refused it."""
    count = 0
    for o in sorted(options, key=lambda o: -o.gpus):
        if gpus <= 0:
            break
        take = math.ceil(gpus / o.gpus) if o.max_instances is None else min(o.max_instances, math.ceil(gpus / o.gpus))
        count += take
        gpus -= take * o.gpus
    return count


def check_bound(
    demands: Sequence[Demand],
    options: Sequence[InstanceOption],
    models: Mapping[str, GpuModel],
    limit: int | None,
) -> None:
    """Raise TooManyInstances when even the lower bound is above `limit` (None: no limit)."""
    if limit is None:
        return
    needed, worst = min_instances(demands, options, models)
    if needed > limit:
        raise TooManyInstances(needed, limit, worst, at_least=True)


def check_plan_size(plan: Plan, limit: int | None) -> None:
    """Raise TooManyInstances when the plan itself has more than `limit` instances."""
    if limit is not None and len(plan.instances) > limit:
        counts: dict[str, int] = {}
        for inst in plan.instances:
            for g in inst.gpus:
                for p in g.placements:
                    counts[p.workload] = counts.get(p.workload, 0) + 1
        worst = max(counts, key=lambda w: counts[w], default=None)
        raise TooManyInstances(len(plan.instances), limit, worst, at_least=False)


def as_input_error(policy: Policy, exc: TooManyInstances, source: str | None = None) -> InputError:
    """The refusal as bad input naming the workload that needs the most (`workloads[2].rate_rps`)."""
    names = [w.name for w in policy.workloads]
    field = f"workloads[{names.index(exc.workload)}].rate_rps" if exc.workload in names else "workloads"
    return InputError(source or policy.source or "<policy>", field, str(exc))
