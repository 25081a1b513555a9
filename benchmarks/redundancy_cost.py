"""What `scaling.redundancy: {min_servers: 2}` costs against 1, on the shipped traces.

Each shipped simulation example is replayed twice through the real controller (`igniter simulate`'s
engine) with the policy's own settings, once with min_servers 1 (the default) and once with
min_servers 2 (spread gpu); and each policy's own plan (its `rate_rps`, what `igniter plan` prints)
is made both ways. Writes benchmarks/results/redundancy_cost.json (each run's summary, the
ratios docs/simulate.md quotes, the table it embeds); tests/test_docs.py checks the docs against
it. policies/a100-mig.yaml is not here: min_servers 2 is refused with MIG GPU types. A few minutes
of one idle CPU.

    nice -n 10 .venv/bin/python benchmarks/redundancy_cost.py
"""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))

from _machine import commit, describe, write_result  # noqa: E402

from autoscaler import planner  # noqa: E402
from autoscaler.config.policy import Policy, load_policy  # noqa: E402
from autoscaler.config.scaling import RedundancyConfig  # noqa: E402
from autoscaler.planner import make_plan, planning_inputs  # noqa: E402
from autoscaler.sim import traces  # noqa: E402
from autoscaler.sim.engine import SimOptions, simulate  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "redundancy_cost.json"
# (label, policy, trace, time column, scale): the examples docs/simulate.md runs
CASES = [
    ("servegen", "policies/servegen-sim.yaml", "traces/servegen-3models-wide.csv", "time_s", 1.0),
    ("azure", "policies/azure-sim.yaml", "traces/azure-llm-2023-rps.csv", "second_since_2023-11-16T18:15:46", 100.0),
]


def with_servers(policy: Policy, n: int) -> Policy:
    scaling = policy.scaling.model_copy(update={"redundancy": RedundancyConfig(min_servers=n, spread="gpu")})
    return policy.model_copy(update={"scaling": scaling})


def static_plan(policy: Policy) -> dict[str, float]:
    demands, options, models = planning_inputs(policy)
    plan = make_plan(demands, options, models, max_instances=policy.scaling.instance_limit)
    servers = sum(len(g.placements) for i in plan.instances for g in i.gpus)
    return {"cost_per_hour": plan.cost_per_hour, "gpus": plan.gpu_count, "servers": servers}


class Counted:
    """make_plan as the controller calls it, counting the plans and those that fail the N+1 check
    (planner/redundancy.py puts the failures in plan.stats["redundancy"])."""

    def __init__(self) -> None:
        self.plans = self.faulty = 0

    def __enter__(self) -> Counted:
        def counted(*args: Any, **kwargs: Any) -> Any:
            plan = make_plan(*args, **kwargs)
            self.plans += 1
            self.faulty += bool(plan.stats.get("redundancy"))
            return plan

        planner.make_plan = counted
        return self

    def __exit__(self, *_: object) -> None:
        planner.make_plan = make_plan


def run(label: str, policy_path: str, trace_path: str, time_col: str, factor: float) -> dict[str, object]:
    base = load_policy(ROOT / policy_path)
    trace = traces.read_wide(ROOT / trace_path, time_col)
    if factor != 1.0:
        trace = traces.scale(trace, factor)
    out: dict[str, object] = {"policy": policy_path, "trace": trace_path, "scale": factor}
    for n in (1, 2):
        policy = with_servers(base, n)
        print(f"{label}: min_servers {n} ...", file=sys.stderr, flush=True)
        started = time.perf_counter()
        with Counted() as count:
            summary = simulate(policy, trace, SimOptions()).summary()
        out[f"sim_{n}"] = {
            **summary,
            "wall_seconds": round(time.perf_counter() - started, 1),
            "plans": count.plans,
            "plans_failing_n_plus_1": count.faulty,
        }
        out[f"plan_{n}"] = static_plan(policy)
    return out


def ratios(case: dict[str, object]) -> dict[str, float]:
    one, two = case["sim_1"], case["sim_2"]
    p1, p2 = case["plan_1"], case["plan_2"]
    assert isinstance(one, dict) and isinstance(two, dict) and isinstance(p1, dict) and isinstance(p2, dict)
    return {
        "sim_cost_x": round(two["cost_total_usd"] / one["cost_total_usd"], 3),
        "plan_cost_x": round(p2["cost_per_hour"] / p1["cost_per_hour"], 3),
        "attainment_1_pct": round(one["slo_attainment"] * 100, 2),
        "attainment_2_pct": round(two["slo_attainment"] * 100, 2),
    }


def table(cases: dict[str, dict[str, object]]) -> list[str]:
    lines = [
        "| example | min_servers | plan $/h (servers) | simulated cost $ | x min_servers 1 | attain |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for label, case in cases.items():
        for n in (1, 2):
            s, p = case[f"sim_{n}"], case[f"plan_{n}"]
            assert isinstance(s, dict) and isinstance(p, dict)
            one = case["sim_1"]
            assert isinstance(one, dict)
            lines.append(
                f"| {label} | {n} | {p['cost_per_hour']:,.2f} ({p['servers']}) | {s['cost_total_usd']:,.2f} | "
                f"{s['cost_total_usd'] / one['cost_total_usd']:.3f} | {s['slo_attainment']:.4f} |"
            )
    return lines


def main() -> None:
    code = commit(ROOT)
    started = time.perf_counter()
    cases = {c[0]: run(*c) for c in CASES}
    doc = {
        "machine": describe(),
        "commit": code,
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "wall_seconds": round(time.perf_counter() - started, 1),
        "quoted": {label: ratios(case) for label, case in cases.items()},
        "table": table(cases),
        "cases": cases,
    }
    write_result(OUT, doc)


if __name__ == "__main__":
    main()
