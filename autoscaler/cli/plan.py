"""`igniter plan POLICY [--planner NAME] [--json] [--compare]`: the fleet plan for a policy.

Exit codes (contract): 0 a plan placing every workload; 2 bad input; 3 a plan that leaves
workloads unplaced (they are listed, with the reason, in the table or the JSON).
--compare runs every planner on the same inputs and re-checks each plan with the model, so a
baseline that breaks an SLO shows as infeasible; its exit code is that of the chosen planner.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from itertools import groupby
from typing import Any

from rich.console import Console
from rich.table import Table

from autoscaler.config.errors import InputError
from autoscaler.config.policy import load_policy
from autoscaler.model.mig import GpuModel, MigModel
from autoscaler.model.perfmodel import PerfModel
from autoscaler.planner import EXTRA, PLANNERS, TooLarge, TooManyInstances, check_plan, make_plan, planning_inputs
from autoscaler.planner.limits import as_input_error, check_bound
from autoscaler.planner.mixed import plan_mixed
from autoscaler.planner.offerings import plan_offerings
from autoscaler.planner.types import Demand, InstanceOption, InstanceOut, Plan

EXIT_OK, EXIT_UNPLACED = 0, 3
TABLE_ROWS = 1000  # placements above which the table prints a run of identical instances once


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "plan",
        help="plan the cheapest fleet that meets every SLO",
        description="Plan the fleet for a policy: instances, GPUs, and each workload's batch and MPS share.",
    )
    p.add_argument("policy", metavar="POLICY", help="policy YAML")
    p.add_argument(
        "--planner",
        choices=[*PLANNERS, *EXTRA],
        default=None,
        help="planner (default: the policy's scaling.planner, normally igniter)",
    )
    p.add_argument("--json", action="store_true", help="print the plan as JSON (the contract in docs/planner.md)")
    p.add_argument("--compare", action="store_true", help="run every planner and compare cost, GPUs, feasibility, time")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Plan (or compare planners) and print; exit 3 if the chosen planner leaves workloads unplaced."""
    policy = load_policy(args.policy)
    demands, options, models = planning_inputs(policy)
    name = args.planner or policy.scaling.planner
    why = policy.scaling.redundancy_refuses(name)
    if why is not None and not args.compare:
        raise InputError(policy.source or "<policy>", "scaling.redundancy.min_servers", why)
    limit = policy.scaling.instance_limit
    try:
        check_bound(demands, options, models, limit)
        return _plan(args, demands, options, models, name, limit)
    except TooManyInstances as exc:
        raise as_input_error(policy, exc) from None


def _plan(
    args: argparse.Namespace,
    demands: list[Demand],
    options: list[InstanceOption],
    models: dict[str, GpuModel],
    name: str,
    limit: int | None,
) -> int:
    if args.compare:
        rows = compare(demands, options, models)
        _print_compare(rows, args.json)
        chosen = next((r for r in rows if r.name == name and r.plan is not None), None)
        return EXIT_UNPLACED if chosen and chosen.plan.unplaced else EXIT_OK
    plan = make_plan(demands, options, models, planner=name, max_instances=limit)
    if args.json:
        print(plan_json(plan))
    else:
        print_plan(plan, demands, str(args.policy), models)
    return EXIT_UNPLACED if plan.unplaced else EXIT_OK


@dataclass(frozen=True, slots=True)
class Row:
    """One planner's result in --compare."""

    name: str
    plan: Plan | None
    violations: tuple[str, ...]
    seconds: float
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        if self.plan is None:
            return {"planner": self.name, "skipped": self.note}
        return {
            "planner": self.name,
            "cost_per_hour": self.plan.cost_per_hour,
            "gpus": self.plan.gpu_count,
            "instances": len(self.plan.instances),
            "feasible": not self.violations,
            "violations": len(self.violations),
            "unplaced": len(self.plan.unplaced),
            "seconds": round(self.seconds, 6),
        }


def compare(demands: Sequence[Demand], options: Sequence[InstanceOption], models: dict[str, GpuModel]) -> list[Row]:
    """Every planner on the same inputs, timed, each plan re-checked by the model (MIG GPUs: by
    their measured tables; the planner named plans the MPS types beside them)."""
    rows = []
    mig = any(isinstance(m, MigModel) for m in models.values())
    mps = {g: m for g, m in models.items() if isinstance(m, PerfModel)}
    for name in ["igniter-plain", *PLANNERS]:
        fn = PLANNERS.get(name) or EXTRA[name]
        start = time.perf_counter()
        try:
            if mig:
                plan = plan_mixed(partial(plan_offerings, fn), demands, options, models, None)
            else:
                plan = plan_offerings(fn, demands, options, mps)
        except TooLarge as exc:
            rows.append(Row(name, None, (), 0.0, str(exc)))
            continue
        seconds = time.perf_counter() - start
        rows.append(Row(name, plan, tuple(check_plan(plan, demands, models, options)), seconds))
    return rows


def _print_compare(rows: Sequence[Row], as_json: bool) -> None:
    if as_json:
        print(json.dumps([r.to_json() for r in rows], indent=2))
        return
    table = Table(title="planners compared (feasibility re-checked by the performance model)")
    for col in ("planner", "$/hour", "GPUs", "instances", "feasible", "unplaced", "time ms"):
        table.add_column(col, justify="left" if col == "planner" else "right")
    for r in rows:
        table.add_row(*_compare_cells(r))
    _console().print(table)


def _compare_cells(r: Row) -> list[str]:
    if r.plan is None:
        return [r.name, "-", "-", "-", f"n/a: {r.note}", "-", "-"]
    ok = "yes" if not r.violations else f"[red]no: {len(r.violations)} violations[/red]"
    return [
        r.name,
        f"{r.plan.cost_per_hour:.2f}",
        str(r.plan.gpu_count),
        str(len(r.plan.instances)),
        ok,
        str(len(r.plan.unplaced)),
        f"{r.seconds * 1000:.1f}",
    ]


def _console() -> Console:
    """Rich's console; wide enough for the plan table when the output is not a terminal."""
    return Console() if sys.stdout.isatty() else Console(width=132)


def print_plan(
    plan: Plan, demands: Sequence[Demand], source: str, models: Mapping[str, GpuModel] | None = None
) -> None:
    """The plan as a table (instances, GPUs, placements, latency against budget) and its cost.
    A MIG placement shows its slice (`3g.40gb@4 x2`: profile, start, MPS processes) and the MIG
    budget, (1 - margin) x SLO / 2; an MPS one its share."""
    budgets = {d.workload: d.slo_ms / 2.0 / d.correction for d in demands}
    slo = {d.workload: (d.slo_ms, d.correction) for d in demands}
    table = Table(title=f"{source}: plan by {plan.planner}")
    for col in (
        "instance",
        "$/hour",
        "GPU",
        "workload",
        "batch",
        "MPS % / slice",
        "rate rps",
        "latency ms",
        "budget ms",
    ):
        table.add_column(col, justify="left" if col in ("instance", "GPU", "workload") else "right")
    for k, n, inst in instance_runs(plan):
        spot = " (spot)" if inst.capacity_type == "spot" else ""
        label = f"{k} {inst.instance_type}{spot}" if n == 1 else f"{k}-{k + n - 1} {inst.instance_type}{spot} x{n}"
        head = [label, f"{inst.price_per_hour:.3f}"]
        for g in inst.gpus:
            for p in g.placements:
                table.add_row(
                    *head,
                    f"{g.index} {g.gpu}",
                    p.workload,
                    str(p.batch),
                    f"{p.mig_profile}@{p.mig_start} x{p.processes}" if p.mig_profile else f"{p.mps_percent:g}",
                    f"{p.rate_rps:.1f}",
                    f"{p.predicted_latency_ms:.2f}",
                    f"{_budget(p.workload, g.gpu, budgets, slo, models):.2f}",
                )
                head = ["", ""]
    console = _console()
    console.print(table)
    console.print(
        f"[bold]{plan.cost_per_hour:.2f} $/hour[/bold]: {len(plan.instances)} instances{_spot_count(plan)}, "
        f"{plan.gpu_count} GPUs"
        + "".join(f"; {plan.stats[k]}" for k in ("fallback", "on_demand_floor") if k in plan.stats)
    )
    for u in plan.unplaced:
        console.print(f"[red]unplaced[/red] {u.workload}: {u.reason}")


def plan_json(plan: Plan) -> str:
    """`json.dumps(plan.to_json(), indent=2)`, byte for byte, each distinct instance encoded once:
    the indenting encoder is pure Python (about 20 µs an instance), and a plan of hundreds of
    thousands of instances is mostly alike whole-GPU ones. Equal instances of one plan print
    alike: the same option's type and price, and the same rounded figures."""
    encoded: dict[InstanceOut, str] = {}
    items = []
    for inst in plan.instances:
        text = encoded.get(inst)
        if text is None:
            text = encoded[inst] = "    " + json.dumps(inst.to_json(), indent=2).replace("\n", "\n    ")
        items.append(text)
    rest = json.dumps({**replace(plan, instances=()).to_json(), "cost_per_hour": plan.cost_per_hour}, indent=2)
    return rest.replace(
        '"instances": []', '"instances": ' + ("[\n" + ",\n".join(items) + "\n  ]" if items else "[]"), 1
    )


def instance_runs(plan: Plan) -> list[tuple[int, int, InstanceOut]]:
    """(first index, count, instance) for the table: each instance alone, but in a plan of more
    than TABLE_ROWS placements each run of identical instances once. Rich takes about a
    millisecond a row: a plan at the rate ceiling (29,000 identical whole-GPU instances) printed
    for half a minute, and a table that long is read by no one."""
    if sum(len(g.placements) for i in plan.instances for g in i.gpus) <= TABLE_ROWS:
        return [(k, 1, inst) for k, inst in enumerate(plan.instances)]
    out: list[tuple[int, int, InstanceOut]] = []
    for inst, run in groupby(plan.instances):
        out.append((out[-1][0] + out[-1][1] if out else 0, len(list(run)), inst))
    return out


def _budget(
    workload: str,
    gpu: str,
    budgets: Mapping[str, float],
    slo: Mapping[str, tuple[float, float]],
    models: Mapping[str, GpuModel] | None,
) -> float:
    model = (models or {}).get(gpu)
    if isinstance(model, MigModel) and workload in slo:
        return model.budget_ms(slo[workload][0]) / slo[workload][1]
    return budgets.get(workload, 0.0)


def _spot_count(plan: Plan) -> str:
    n = sum(i.capacity_type == "spot" for i in plan.instances)
    return f" ({n} spot)" if n else ""
