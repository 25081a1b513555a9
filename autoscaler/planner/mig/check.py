"""The independent re-check of MIG GPUs in a plan, from the measured table alone. Pure.

It trusts nothing the planner computed: every placement on a MIG GPU must be a measured row of its
workload's model (slice profile, batch, processes) whose latency meets the rule ((1 - margin) x
SLO / 2, after the SLO-guard correction), carry no more than that row's throughput, and report the
row's own numbers; the GPU's slices must sit at allowed starts without sharing a memory unit
(config/mig.py `valid`). Rates adding up per workload and instance limits are checked for every
GPU alike (planner/check.py).
"""

from __future__ import annotations

from collections.abc import Mapping

from autoscaler.model.mig import MigModel
from autoscaler.planner.types import Demand, GpuOut, PlacementOut

REL = 1e-6


def check_mig_gpu(where: str, g: GpuOut, demands: Mapping[str, Demand], model: MigModel) -> list[str]:
    """Every way this MIG GPU breaks the table, the latency rule or the geometry."""
    out: list[str] = []
    slots = []
    for p in g.placements:
        if p.mig_profile is None or p.mig_start is None:
            out.append(f"{where}: {p.workload}: a placement on a MIG GPU without mig_profile/mig_start")
            continue
        slots.append((p.mig_profile, p.mig_start))
        out += _check_row(f"{where}: {p.workload}", p, demands.get(p.workload), model)
    if not model.geometry.valid(slots):
        out.append(f"{where}: slices {sorted(slots, key=lambda s: s[1])} are not a valid cut (starts or overlap)")
    return out


def _check_row(where: str, p: PlacementOut, d: Demand | None, model: MigModel) -> list[str]:
    if d is None or d.model != p.model:
        return [f"{where}: unknown workload or model {p.model!r}"]
    row = model.row(p.model, p.mig_profile or "", p.batch, p.processes)
    if row is None:
        return [f"{where}: no measured row for {p.mig_profile} batch {p.batch} x {p.processes} processes"]
    out = []
    if not model.usable(row, d.slo_ms, d.correction):
        out.append(
            f"{where}: measured latency {row.latency_ms * d.correction:.2f} ms > budget "
            f"{model.budget_ms(d.slo_ms):.2f} ms ((1 - margin) x SLO / 2)"
        )
    capacity = row.slice_throughput_rps / d.correction
    if p.rate_rps > capacity * (1 + REL) + 1e-6:
        out.append(f"{where}: rate {p.rate_rps:.1f} rps > the row's {capacity:.1f} rps")
    if abs(p.predicted_throughput_rps - capacity) > REL * capacity + 1e-3:
        out.append(f"{where}: predicted throughput {p.predicted_throughput_rps:.1f} is not the row's {capacity:.1f}")
    return out
