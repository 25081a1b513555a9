"""Spot capacity: what an on-demand floor costs, in plans and in replays with interruptions.

    .venv/bin/python benchmarks/spot.py plans            # seconds: plan cost vs on-demand only, per floor
    .venv/bin/python benchmarks/spot.py sim [--traces servegen-10min,azure-1min,servegen-1min]
        [--floors 0.3,0,0.5,1] [--rates 0.01,0.05] [--seeds 0] [--size 1] [--out results.jsonl]   # minutes to hours

Spot prices are 35 % of on-demand on every type (`--ratio`). `plans`: every scenario of
tests/data/scenarios, 55 rows of the ServeGen trace (x 1.4, the example's headroom) and the 59
rows of the Azure hour (x 100 x 1.5, its headroom) planned fresh, on-demand only and with spot at
each floor; the ratio of summed $/h. Beside it, `whole` (`whole_gpu_estimate`): the on-demand-only
plans' summed shares repacked perfectly, with the floor on whole on-demand GPUs and nothing lost to
splitting workloads in two. It is what rounding the floor to whole GPUs costs on its own: a spot
plan gets below it only by packing its servers tighter than the on-demand-only plan packs them.
`sim`: each trace replayed on-demand only (spot off), then with spot at each floor and
interruption rate (per spot instance-hour, Poisson, seeded): cost and attainment against the
on-demand-only run. The 1-minute traces run with 60 s ticks. Machine and wall time are printed
with the results.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _results import Results  # noqa: E402

from autoscaler.config.offerings import SPOT  # noqa: E402
from autoscaler.config.policy import Policy, load_policy  # noqa: E402
from autoscaler.planner import make_plan, planning_inputs  # noqa: E402
from autoscaler.planner.state import price_per_gpu  # noqa: E402
from autoscaler.planner.types import Plan  # noqa: E402
from autoscaler.sim.engine import SimOptions, simulate  # noqa: E402
from autoscaler.sim.traces import Trace, read_wide, scale  # noqa: E402
from autoscaler.sim.whatif import with_spot  # noqa: E402

# name -> (policy, trace, interval_s override, rate scale)
CASES: dict[str, tuple[str, str, float | None, float]] = {
    "servegen-10min": ("policies/servegen-sim.yaml", "traces/servegen-3models-wide.csv", None, 1.0),
    "azure-1min": ("policies/azure-sim.yaml", "traces/azure-llm-2023-1min.csv", 60.0, 100.0),
    "servegen-1min": ("policies/servegen-sim.yaml", "traces/servegen-3models-1min.csv", 60.0, 1.0),
}


def plan_sets() -> dict[str, list[tuple[Any, Any, Any]]]:
    """The planning inputs of every set `plans` prices (module docstring)."""
    sets: dict[str, list[tuple[Any, Any, Any]]] = {}
    for path in sorted((ROOT / "tests" / "data" / "scenarios").glob("*.yaml")):
        sets[path.stem] = [planning_inputs(load_policy(path))]
    for name, pol, tr, k, step in (
        ("servegen rows", "policies/servegen-sim.yaml", "traces/servegen-3models-wide.csv", 1.4, 37),
        ("azure rows", "policies/azure-sim.yaml", "traces/azure-llm-2023-1min.csv", 100 * 1.5, 1),
    ):
        policy, trace = load_policy(ROOT / pol), read_wide(ROOT / tr)
        sets[name] = [
            planning_inputs(policy, rates={w: k * float(trace.rates[w][i]) for w in trace.names})
            for i in range(0, len(trace.times), step)
        ]
    return sets


def whole_gpu_estimate(plan: Plan, prices: Mapping[str, float], floor: float, ratio: float) -> float:
    """$/h of `plan` (on-demand only) repacked with `floor` of its work on whole on-demand GPUs
    and the rest on spot, per GPU type (`prices`: $/h of one GPU, planner.state.price_per_gpu):
    D GPUs of summed shares take ceil(floor x D) on-demand GPUs and ceil(D) in all. It leaves out
    the share a workload split in two servers costs of its own, so only the rounding is priced
    (module docstring)."""
    shares: dict[str, float] = {}
    for g in (g for inst in plan.instances for g in inst.gpus):
        shares[g.gpu] = shares.get(g.gpu, 0.0) + sum(p.mps_percent for p in g.placements) / 100.0
    out = 0.0
    for gpu, d in shares.items():
        od = math.ceil(floor * d - 1e-9)
        out += prices[gpu] * (od + ratio * max(0, math.ceil(d - 1e-9) - od))
    return out


def plan_costs(ratio: float, floors: list[float]) -> dict[str, dict[float, tuple[float, float]]]:
    """Per input set and floor: summed $/h with spot, and the whole-GPU estimate, each over
    summed $/h on-demand only."""
    out: dict[str, dict[float, tuple[float, float]]] = {}
    for name, inputs in plan_sets().items():
        alone = [make_plan(d, o, m) for d, o, m in inputs]
        od = sum(p.cost_per_hour for p in alone)
        out[name] = {}
        for f in floors:
            cost = 0.0
            for d, o, m in inputs:
                spot = [*o, *(replace(x, price_per_hour=x.price_per_hour * ratio, capacity_type=SPOT) for x in o)]
                cost += make_plan([replace(x, on_demand_floor=f) for x in d], spot, m).cost_per_hour
            whole = sum(whole_gpu_estimate(p, price_per_gpu(o), f, ratio) for p, (_, o, _) in zip(alone, inputs))
            out[name][f] = (round(cost / od, 4), round(whole / od, 4))
    return out


def case(name: str, ratio: float, floor: float | None, size: float = 1.0) -> tuple[Policy, Trace]:
    pol, tr, interval, k = CASES[name]
    k *= size
    policy = load_policy(ROOT / pol)
    if interval is not None:
        policy = policy.model_copy(update={"scaling": policy.scaling.model_copy(update={"interval_s": interval})})
    trace = read_wide(ROOT / tr)
    return with_spot(policy, ratio, floor), scale(trace, k) if k != 1.0 else trace


def sim_row(
    name: str, ratio: float, floor: float | None, rate: float, seed: int, spot: bool, size: float = 1.0
) -> dict[str, Any]:
    policy, trace = case(name, ratio, floor, size)
    started = time.perf_counter()
    opts = SimOptions(spot=spot, spot_interruptions_per_hour=rate, seed=seed, on_demand_twin=False)
    s = simulate(policy, trace, opts).summary()
    return {
        "trace": name if size == 1.0 else f"{name} x{size:g}",
        "spot": spot,
        "floor": floor,
        "rate": rate,
        "seed": seed,
        "cost_usd": s["cost_total_usd"],
        "slo_attainment": s["slo_attainment"],
        "shortfall_steps": s["shortfall_steps"],
        "spot_instance_hours": s.get("spot_instance_hours"),
        "interruptions": s.get("interruptions"),
        "launches": s["launches"],
        "terminations": s["terminations"],
        "reconfigurations": s["reconfigurations"],
        "tick_errors": s["tick_errors"],
        "wall_s": round(time.perf_counter() - started, 1),
    }


def run_sim(args: argparse.Namespace) -> None:
    floors = [float(x) for x in args.floors.split(",")]
    rates = [float(x) for x in args.rates.split(",")]
    seeds = [int(x) for x in args.seeds.split(",")]
    for name in args.traces.split(","):
        od = sim_row(name, args.ratio, None, 0.0, 0, spot=False, size=args.size)
        emit(args.out, od)
        for f in floors:
            for r in rates if f < 1 else rates[:1]:  # a floor of 1 buys no spot: one rate says it all
                for seed in seeds:
                    row = sim_row(name, args.ratio, f, r, seed, spot=True, size=args.size)
                    row["cost_vs_on_demand_only"] = round(row["cost_usd"] / od["cost_usd"], 4)
                    row["slo_attainment_on_demand_only"] = od["slo_attainment"]
                    emit(args.out, row)


def emit(out: str | None, row: dict[str, Any]) -> None:
    row = {**row, "machine": f"{platform.node()} {platform.machine()} {platform.python_version()}"}
    print(json.dumps(row), flush=True)
    if out:
        with open(out, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")


def plans(args: argparse.Namespace) -> None:
    """`plans`: the ratios, printed and written to benchmarks/results/spot_plans.json with the
    table docs/planner.md embeds (floors in ascending order)."""
    out = Results("spot_plans", f"python benchmarks/spot.py plans --ratio {args.ratio:g} --floors {args.floors}")
    started = time.perf_counter()
    floors = [float(x) for x in args.floors.split(",")]
    costs = plan_costs(args.ratio, floors)
    for name, ratios in costs.items():
        print(f"{name:18s} " + "  ".join(f"floor {f:g}: {r:.3f} (whole {w:.3f})" for f, (r, w) in ratios.items()))
        for f, (r, w) in ratios.items():
            out.figure(f"{name}_floor_{f:g}", r)
            out.figure(f"{name}_floor_{f:g}_whole", w)
            key = f"{name.replace(' ', '_')}_floor{round(f * 100)}"  # a key the docs' markers can name
            out.figure(key, r)
            out.figure(f"{key}_whole", w)
    for f in floors:
        out.figure(f"blend_floor{round(f * 100)}", f + (1 - f) * args.ratio)
    print("blend (floor + (1 - floor) x ratio): " + "  ".join(f"{f + (1 - f) * args.ratio:.3f}" for f in floors))
    print(f"{time.perf_counter() - started:.1f} s on {platform.node()} ({platform.machine()})")
    order = sorted(floors)
    blend = [f"{f + (1 - f) * args.ratio:.3f}" for f in order]
    rows = [f"| blend | {' | '.join(blend)} |"]
    for name, ratios in costs.items():
        cells = [f"{ratios[f][0]:.3f}" + ("" if f in (0.0, 1.0) else f" ({ratios[f][1]:.3f})") for f in order]
        rows.append(f"| {name} | {' | '.join(cells)} |")
    head = "| inputs | " + " | ".join(f"floor {f:g}" for f in order) + " |"
    out.doc["tables"]["plans"] = [head, "|---" * (len(order) + 1) + "|", *rows]
    out.write()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["plans", "sim"])
    ap.add_argument("--ratio", type=float, default=0.35, help="spot price / on-demand price (default 0.35)")
    ap.add_argument("--floors", default="0.3,0,0.5,1")
    ap.add_argument("--rates", default="0.01,0.05", help="interruptions per spot instance-hour")
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--traces", default=",".join(CASES))
    ap.add_argument("--size", type=float, default=1.0, help="scale every trace's rates (a bigger fleet)")
    ap.add_argument("--out", help="also append the JSON lines here")
    args = ap.parse_args()
    if args.what == "plans":
        plans(args)
    else:
        run_sim(args)


if __name__ == "__main__":
    main()
