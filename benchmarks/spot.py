"""Spot capacity: what an on-demand floor costs, in plans and in replays with interruptions.

    .venv/bin/python benchmarks/spot.py plans            # seconds: plan cost vs on-demand only, per floor
    .venv/bin/python benchmarks/spot.py sim [--traces servegen-10min,azure-1min,servegen-1min]
        [--floors 0.3,0,0.5,1] [--rates 0.01,0.05] [--seeds 0] [--sizes 1] [--name spot_sim] [--out rows.jsonl]
    .venv/bin/python benchmarks/spot.py example          # docs/simulate.md's spot console block

Spot prices are 35 % of on-demand on every type (`--ratio`). `plans`: every scenario of
tests/data/scenarios, 55 rows of the ServeGen trace (x 1.4, the example's headroom) and the 59
rows of the Azure hour (x 100 x 1.5, its headroom) planned fresh, on-demand only and with spot at
each floor; the ratio of summed $/h. Beside it, `whole` (`whole_gpu_estimate`): the on-demand-only
plans' summed shares repacked perfectly, with the floor on whole on-demand GPUs and nothing lost to
splitting workloads in two. It is what rounding the floor to whole GPUs costs on its own: a spot
plan gets below it only by packing its servers tighter than the on-demand-only plan packs them.
Writes benchmarks/results/spot_plans.json.

`sim`: each trace (at each `--sizes` multiple of its rates) replayed on-demand only (spot off),
then with spot at each floor and interruption rate (per spot instance-hour, Poisson, seeded):
cost and attainment against the on-demand-only run. The 1-minute traces run with 60 s ticks.
Writes benchmarks/results/NAME.json (`runs`, keyed `TRACE/xSIZE/floorF/rateR`: F in %, R per
1,000 spot instance-hours; `tables.trade_off`). CPU cost of one replay on a 2-CPU Xeon: seconds
for the Azure hour, about a minute for the ServeGen example, several minutes for the 1-minute
ServeGen trace (every file records its CPU seconds).

`example`: the command docs/simulate.md shows (`igniter simulate` of the ServeGen example with
spot at 0.35 and 0.01 interruptions per hour, seed 1: the spot replay and its on-demand-only twin)
and its `--json`; the first command's CPU seconds are `figures.command_cpu_s`. Writes
benchmarks/results/spot_example.json.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import resource
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
TITLES = {
    "servegen-10min": "ServeGen example, 300 s ticks",
    "azure-1min": "Azure 1-minute x100, 60 s ticks",
    "servegen-1min": "ServeGen 1-minute, 60 s ticks",
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
    started, cpu = time.perf_counter(), time.process_time()
    opts = SimOptions(spot=spot, spot_interruptions_per_hour=rate, seed=seed, on_demand_twin=False)
    s = simulate(policy, trace, opts).summary()
    return {
        "trace": name,
        "size": size,
        "spot": spot,
        "floor": floor,
        "rate": rate,
        "seed": seed,
        "cost_usd": s["cost_total_usd"],
        "slo_attainment": s["slo_attainment"],
        "shortfall_steps": s["shortfall_steps"],
        "spot_instance_hours": s.get("spot_instance_hours"),
        "instance_hours": round(sum(s["instance_hours"].values()), 2),
        "interruptions": s.get("interruptions"),
        "launches": s["launches"],
        "surge_launches": s["surge_launches"],
        "surge_instance_hours": round(s["surge_instance_hours"], 2),
        "terminations": s["terminations"],
        "reconfigurations": s["reconfigurations"],
        "tick_errors": s["tick_errors"],
        "wall_s": round(time.perf_counter() - started, 1),
        "cpu_s": round(time.process_time() - cpu, 1),
    }


def label(name: str, size: float, floor: float | None = None, rate: float = 0.0, seed: int = 0) -> str:
    """A run's key in the results file, one a docs marker can name (no dots: `x2/floor30/rate10`
    is size 2, floor 0.3, 10 interruptions per 1,000 spot instance-hours)."""
    head = f"{name}/x{size:g}".replace(".", "p")
    if floor is None:
        return f"{head}/on_demand_only"
    return f"{head}/floor{round(floor * 100)}/rate{round(rate * 1000)}" + (f"/seed{seed}" if seed else "")


def run_sim(args: argparse.Namespace) -> None:
    """`sim`: every trace and size on-demand only, then at each floor, rate and seed; the rows are
    printed as JSON lines and written to benchmarks/results/NAME.json (`runs`, keyed by `label`,
    and the table docs/simulate.md embeds)."""
    floors, rates = [float(x) for x in args.floors.split(",")], [float(x) for x in args.rates.split(",")]
    seeds, sizes = [int(x) for x in args.seeds.split(",")], [float(x) for x in args.sizes.split(",")]
    out = Results(args.name, "python benchmarks/spot.py sim " + " ".join(sys.argv[2:]))
    runs: dict[str, dict[str, Any]] = out.doc.setdefault("runs", {})
    for name, size in ((n, k) for n in args.traces.split(",") for k in sizes):
        od = runs[label(name, size)] = sim_row(name, args.ratio, None, 0.0, 0, spot=False, size=size)
        emit(args.out, od)
        for f in floors:
            for r in rates if f < 1 else rates[:1]:  # a floor of 1 buys no spot: one rate says it all
                for seed in seeds:
                    row = sim_row(name, args.ratio, f, r, seed, spot=True, size=size)
                    row["cost_vs_on_demand_only"] = round(row["cost_usd"] / od["cost_usd"], 4)
                    row["slo_attainment_on_demand_only"] = od["slo_attainment"]
                    runs[label(name, size, f, r, seed)] = row
                    emit(args.out, row)
    out.figure("replays", len(runs))
    out.doc["tables"]["trade_off"] = sim_table(runs, sorted(floors), rates, seeds)
    print("\n".join(out.doc["tables"]["trade_off"]))
    out.write()


def sim_table(
    runs: Mapping[str, dict[str, Any]], floors: list[float], rates: list[float], seeds: list[int]
) -> list[str]:
    """One row per trace, size, rate and seed: each floor's cost against the on-demand-only run /
    its attainment / interruptions; the first cell names the on-demand-only run's cost and
    attainment (a floor of 1 only in the first rate's row, as it is run)."""
    rows = []
    for od in (v for v in runs.values() if not v["spot"]):
        for i, (r, seed) in enumerate((r, s) for r in rates for s in seeds):
            size = "" if od["size"] == 1 else f" x{od['size']:g}"
            head = (
                f"{TITLES[od['trace']]}{size} (${od['cost_usd']:,.2f}, {od['slo_attainment']:.6f})"
                if i == 0
                else "same"
            )
            cells = []
            for f in floors:
                run = runs.get(label(od["trace"], od["size"], f, r, seed))
                cells.append(
                    ""
                    if run is None
                    else f"{run['cost_vs_on_demand_only']:.4f} / {run['slo_attainment']:.6f} / {run['interruptions']}"
                )
            rows.append(
                f"| {head}, {r:g}/h" + (f", seed {seed}" if len(seeds) > 1 else "") + f" | {' | '.join(cells)} |"
            )
    head = "| trace (on-demand only: cost, attainment), rate | " + " | ".join(f"floor {f:g}" for f in floors) + " |"
    return [head, "|---" * (len(floors) + 1) + "|", *rows]


def example(args: argparse.Namespace) -> None:
    """`example`: docs/simulate.md's spot console block, the command as a user types it
    (simulate_example.igniter), and its `--json` figures; benchmarks/results/spot_example.json."""
    from simulate_example import console, igniter

    command = [
        "simulate", "policies/servegen-sim.yaml", "--trace", "traces/servegen-3models-wide.csv",
        "--spot-price-ratio", f"{args.ratio:g}", "--spot-interruptions-per-hour", "0.01", "--seed", "1",
    ]  # fmt: skip
    out = Results("spot_example", "python benchmarks/spot.py example")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    shown = igniter(command)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    out.figure("command_cpu_s", after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    out.doc["tables"]["console"] = console(command, shown, {"cost", "SLO attainment", "surge", "spot"})
    s = json.loads(igniter(command, "--json").stdout)
    out.doc["summary"] = s
    out.figure("cost_vs_on_demand_only", s["cost_total_usd"] / s["cost_on_demand_only_usd"])
    print("\n".join(out.doc["tables"]["console"]))
    out.write()


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
    ap.add_argument("what", choices=["plans", "sim", "example"])
    ap.add_argument("--ratio", type=float, default=0.35, help="spot price / on-demand price (default 0.35)")
    ap.add_argument("--floors", default="0.3,0,0.5,1")
    ap.add_argument("--rates", default="0.01,0.05", help="interruptions per spot instance-hour")
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--traces", default=",".join(CASES))
    ap.add_argument("--sizes", default="1", help="scale every trace's rates by each (a bigger fleet)")
    ap.add_argument("--name", default="spot_sim", help="sim: write benchmarks/results/NAME.json")
    ap.add_argument("--out", help="sim: also append the JSON lines here")
    args = ap.parse_args()
    {"plans": plans, "sim": run_sim, "example": example}[args.what](args)


if __name__ == "__main__":
    main()
