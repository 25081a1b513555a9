"""Scaling strategies the simulator compares the autoscaler with (not to be confused with the
planner's baselines, planner/baselines.py: those are placement algorithms from the paper, which
the simulator runs inside the autoscaler's own controller).

- static peak: the plan for every workload's peak rate, bought for the whole trace (what a fleet
  sized by hand for the busiest hour costs; it never falls short).
- reactive target tracking: what a Kubernetes HPA or an AWS target-tracking policy does. Each
  workload runs on dedicated replicas (one instance of the type with the best price per request,
  one server per GPU holding the whole GPU at the batch with the highest throughput within half the
  SLO, no co-location). When a workload's utilisation (observed rate / replica capacity) leaves the
  40-70 % band its replica count is reset to bring it to 55 %; inside the band nothing changes.

The reactive strategy is a planner function, so it runs inside the real controller on the simulated
provider: the same boot delay, the same scale-down delay and make-before-break apply to it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from autoscaler.config.policy import InstanceType, Policy
from autoscaler.config.scaling import ScalingConfig
from autoscaler.model.perfmodel import load_perf_model
from autoscaler.planner.types import GpuOut, InstanceOut, PlacementOut, Plan, Unplaced
from autoscaler.sim.result import SimResult, feasible_capacity
from autoscaler.sim.traces import Trace

if TYPE_CHECKING:
    from autoscaler.loop.tick.controller import PlanFn

LOW, HIGH, TARGET = 0.40, 0.70, 0.55
MAX_BATCH = 128


@dataclass(frozen=True, slots=True)
class Replica:
    """One dedicated instance of a workload: its type, batch, and predicted latency and throughput
    per GPU (each GPU of the instance runs one server)."""

    itype: InstanceType
    batch: int
    latency_ms: float
    throughput_rps: float

    @property
    def capacity(self) -> float:
        return self.throughput_rps * self.itype.gpus


@lru_cache(maxsize=4096)
def _best_batch(profile: Path, model: str, budget_ms: float, correction: float) -> tuple[int, float, float] | None:
    """(batch, latency, throughput) with the highest throughput whose latency fits the budget."""
    perf = load_perf_model(profile)
    best = None
    for b in range(1, MAX_BATCH + 1):
        lat, thr = perf.solo(model, b, 100.0)
        if lat * correction > budget_ms:
            break
        if best is None or thr > best[2]:
            best = (b, lat, thr)
    return best


def replica(
    policy: Policy, workload: str, correction: float = 1.0, excluded: frozenset[str] = frozenset()
) -> Replica | None:
    """The cheapest-per-request dedicated replica for `workload`, or None if no type meets its SLO."""
    w = policy.workload(workload)
    best: Replica | None = None
    for t in policy.instance_types:
        if t.name in excluded:
            continue
        profile = policy.profiles_dir / f"{t.gpu}.yaml"
        if w.model not in load_perf_model(profile).models:
            continue
        found = _best_batch(profile, w.model, w.slo_ms / 2.0, correction)
        if found is None:
            continue
        r = Replica(t, *found)
        if best is None or t.price_per_hour / r.capacity < best.itype.price_per_hour / best.capacity:
            best = r
    return best


def replicas_needed(rate: float, current: int, capacity: float) -> int:
    """Target tracking: keep `current` while utilisation is in [LOW, HIGH], else aim for TARGET."""
    if current >= 1 and LOW <= rate / (current * capacity) <= HIGH:
        return current
    return max(1, math.ceil(rate / (TARGET * capacity) - 1e-9))


def _counts(current: Plan | None) -> dict[str, int]:
    """Replicas per workload in the current plan (each instance carries one workload)."""
    out: dict[str, int] = {}
    for inst in current.instances if current else ():
        names = {p.workload for g in inst.gpus for p in g.placements}
        for w in names:
            out[w] = out.get(w, 0) + 1
    return out


def reactive_planner(
    policy: Policy,
    rates: Mapping[str, float],
    corrections: Mapping[str, float],
    caps: Mapping[str, int],
    current: Plan | None,
) -> Plan:
    """A PlanFn (controller.PlanFn) implementing reactive target tracking; see the module docstring."""
    have = _counts(current)
    excluded = frozenset(t for t, n in caps.items() if n <= 0)
    instances: list[InstanceOut] = []
    unplaced: list[Unplaced] = []
    for w in policy.workloads:
        rep = replica(policy, w.name, corrections.get(w.name, 1.0), excluded)
        if rep is None:
            unplaced.append(Unplaced(w.name, f"no instance type serves {w.model} within {w.slo_ms / 2:g} ms"))
            continue
        rate = rates.get(w.name, 0.0)
        n = replicas_needed(rate, have.get(w.name, 0), rep.capacity)
        share = rate / (n * rep.itype.gpus)
        place = PlacementOut(w.name, w.model, rep.batch, 100.0, share, rep.latency_ms, rep.throughput_rps)
        gpus = tuple(GpuOut(i, rep.itype.gpu, (place,)) for i in range(rep.itype.gpus))
        instances.extend(InstanceOut(rep.itype.name, rep.itype.price_per_hour, gpus) for _ in range(n))
    return Plan("reactive", tuple(instances), tuple(unplaced))


def oracle_horizon_s(scaling: ScalingConfig) -> float:
    """How far the oracle looks ahead at a tick: the whole time that tick's decision stands. What it
    launches serves from boot_s on, and it is the fleet until what the next tick launches is ready,
    interval_s + boot_s from now (an early or fast tick comes sooner, never later). boot_s is the
    cold boot: an instance started from a warm pool is ready sooner, but the pool may be empty."""
    return scaling.interval_s + scaling.boot_s


def plan_types(plan: Plan) -> dict[str, int]:
    """Instances per type in a plan."""
    out: dict[str, int] = {}
    for inst in plan.instances:
        out[inst.instance_type] = out.get(inst.instance_type, 0) + 1
    return out


def peak_plan(policy: Policy, trace: Trace, plan_fn: PlanFn) -> Plan:
    """The plan for every workload's peak rate: what static provisioning buys for the whole trace."""
    return plan_fn(policy, trace.peak(), {}, {}, None)


def static_result(policy: Policy, trace: Trace, label: str, plan: Plan) -> SimResult:
    """The static-peak strategy: the peak plan's (re-predicted) capacity and price at every row."""
    n, hours = len(trace.times), trace.duration_s / 3600.0
    cap, broken = feasible_capacity(policy, plan_gpus(plan))
    cost = plan.cost_per_hour * hours
    return SimResult(
        label=label,
        strategy="static-peak",
        planner=plan.planner,
        forecast="-",
        headroom=0.0,
        trace=trace,
        capacity={w: np.full(n, cap.get(w, 0.0)) for w in trace.names},
        cost_per_hour=np.full(n, plan.cost_per_hour),
        cost_total_usd=cost,
        static_peak_cost_usd=cost,
        instance_hours={t: k * hours for t, k in plan_types(plan).items()},
        unplaced={u.workload: u.reason for u in plan.unplaced},
        broken_servers=broken,
    )


def plan_gpus(plan: Plan) -> list[tuple[str, list[tuple[str, str, int, float]]]]:
    """A plan's GPUs as (GPU type, co-located servers), the shape feasible_capacity judges."""
    return [
        (g.gpu, [(p.workload, p.model, p.batch, p.mps_percent) for p in g.placements])
        for inst in plan.instances
        for g in inst.gpus
    ]
