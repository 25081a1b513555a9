"""`make demo`: what the autoscaler makes of policies/example.yaml.

Shows, per workload and instance type, the paper's batch size and resource lower bound and the
predicted solo latency against the latency budget (SLO / 2), then the plan when the planner exists.
"""

from __future__ import annotations

import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from autoscaler.perfmodel import load_model
from autoscaler.policy import Policy, load_policy

EXAMPLE = Path(__file__).resolve().parent.parent / "policies" / "example.yaml"


def solo_table(policy: Policy) -> Table:
    """Batch, lower bound and solo latency at that bound for every (workload, instance type)."""
    table = Table(title=f"{policy.source}: batch rule and resource lower bounds")
    for col in ("workload", "instance type", "batch", "lower bound %", "latency ms", "budget ms"):
        table.add_column(col, justify="left" if col in ("workload", "instance type") else "right")
    for w in policy.workloads:
        for itype in policy.instance_types:
            model = load_model(policy.profiles_dir / f"{itype.gpu}.yaml")
            table.add_row(*_row(model, w.name, w.model, w.slo_ms, w.rate_rps, itype.name))
    return table


def _row(model, name: str, mdl: str, slo: float, rate: float, itype: str) -> list[str]:
    if mdl not in model.models:
        return [name, itype, "-", "model not profiled", "-", f"{slo / 2:.1f}"]
    batch = model.batch_size(mdl, slo, rate)
    bound = model.lower_bound(mdl, batch, slo, rate)
    if bound is None:
        return [name, itype, str(batch), "> 100 (replicas)", "-", f"{slo / 2:.1f}"]
    lat = model.solo(mdl, batch, bound)[0]
    return [name, itype, str(batch), f"{bound:g}", f"{lat:.2f}", f"{slo / 2:.1f}"]


def main(argv: list[str] | None = None) -> int:
    path = Path((argv or sys.argv[1:] or [str(EXAMPLE)])[0])
    policy = load_policy(path)
    console = Console()
    console.print(f"[bold]igniter validate {path}[/bold]: ok")
    console.print(solo_table(policy))
    return 0


if __name__ == "__main__":
    sys.exit(main())
