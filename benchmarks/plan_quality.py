"""Plan cost on the scenarios: every planner, the paper's algorithm, each extension, the bounds.

    python benchmarks/plan_quality.py [SCENARIO_DIR_OR_YAML ...]   (default: ../shared/scenarios)

For each scenario: the cost and GPU count of every planner, whether the model's independent
re-check (check_plan) finds the plan feasible, and cost over two bounds:
- `bound`: the scenarios README's: each workload at its resource lower bound (the paper's batch
  rule) on its cheapest GPU type, no interference, fractional GPUs (a workload above one GPU
  counts rate / the throughput of a whole GPU at its largest feasible batch). Computed here the
  same way and checked against the README's figure.
- `bound*`: the same with the planner's batch search (the smallest lower bound over the rule's
  batch and the few below it). iGniter's batch search can beat `bound`, so `bound*` is the honest
  yardstick for how much interference and packing cost.
Then: the ablation (the paper's algorithm, adding one extension at a time), and stability
(re-planning a drifting workload set with and without the current plan).
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _results import Results

from autoscaler.config.policy import load_policy
from autoscaler.model.perfmodel import PerfModel, load_perf_model
from autoscaler.planner import Demand, InstanceOption, Plan, TooLarge, check_plan, make_plan, planning_inputs
from autoscaler.planner.api import EXTRA, igniter
from autoscaler.planner.api import PLANNERS as REGISTRY
from autoscaler.planner.build import count_moved
from autoscaler.planner.igniter import PLAIN, Config
from autoscaler.planner.state import price_per_gpu
from autoscaler.planner.tasks import max_batch, size_on

SHARED = Path(__file__).resolve().parent.parent.parent / "shared" / "scenarios"
_T4_POLICY = Path(__file__).resolve().parent.parent / "policies" / "example.yaml"  # names the t4-synthetic profile
PLANNERS = ("igniter-plain", "igniter", "ffd", "gslice", "gpulets", "exact")
ABLATION = {
    "paper (igniter-plain)": PLAIN,
    "+ all instance types": replace(PLAIN, hetero=True),
    "+ batch search": replace(PLAIN, hetero=True, batch_search=True),
    "+ repair pass": replace(PLAIN, hetero=True, batch_search=True, repair=True),
    "default (bounded search)": Config(),
}
Inputs = tuple[list[Demand], list[InstanceOption], dict[str, PerfModel]]


def readme_figures(folder: Path) -> dict[str, tuple[float, float]]:
    """scenario file -> (the prototype's greedy $/h, the bound $/h) from the README table."""
    out = {}
    readme = folder / "README.md"
    if not readme.is_file():
        return out
    for line in readme.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0].endswith(".yaml"):
            greedy, bound = re.match(r"[\d.]+", cells[2]), re.match(r"[\d.]+", cells[4])
            if greedy and bound:
                out[cells[0]] = (float(greedy.group()), float(bound.group()))
    return out


def bound(inputs: Inputs, search: bool) -> float:
    """Fractional, interference-free cost: each workload on its cheapest GPU type."""
    demands, options, models = inputs
    prices = price_per_gpu(options)
    return sum(
        min((c for g in prices if (c := _cost(models[g], g, d, prices[g], search)) is not None), default=0.0)
        for d in demands
        if d.rate_rps > 0
    )


def _cost(model: PerfModel, gpu: str, d: Demand, price: float, search: bool) -> float | None:
    """One workload's fractional cost on one GPU type; None if the type cannot serve it."""
    if d.model not in model.coef:
        return None
    if search:
        size = size_on(model, gpu, d, d.rate_rps)
        lower = size.lower if size is not None else None
    else:
        lower = model.lower_bound(d.model, model.batch_size(d.model, d.slo_ms, d.rate_rps), d.slo_ms, d.rate_rps)
    if lower is not None:
        return lower / 100.0 * price
    top = max_batch(model, d.model, d.slo_ms / 2.0)
    return d.rate_rps / model.solo(d.model, top, 100.0)[1] * price if top else None


def run_planner(inputs: Inputs, name: str) -> tuple[float, int, bool] | None:
    demands, options, models = inputs
    try:
        plan = (REGISTRY.get(name) or EXTRA[name])(demands, options, models, None)
    except TooLarge:
        return None
    return plan.cost_per_hour, plan.gpu_count, not check_plan(plan, demands, models, options)


def scenario_rows(paths: list[Path]) -> list[dict]:
    rows = []
    for path in paths:
        inputs = planning_inputs(load_policy(path))
        figures = (readme_figures(path.parent) or readme_figures(SHARED)).get(path.name, (None, None))
        rows.append(
            {
                "name": path.name,
                "n": len(inputs[0]),
                "inputs": inputs,
                "proto": figures[0],
                "readme_bound": figures[1],
                "bound": bound(inputs, False),
                "bound*": bound(inputs, True),
                "plans": {p: run_planner(inputs, p) for p in PLANNERS},
            }
        )
    return rows


def print_costs(out: Results, rows: list[dict]) -> None:
    out.line("costs", "## Cost per planner ($/hour, GPUs; '!' = the model's re-check finds SLO violations)\n")
    out.line("costs", "| scenario | n | prototype | bound (README) | bound* | " + " | ".join(PLANNERS) + " |")
    out.line("costs", "|---" * (5 + len(PLANNERS)) + "|")
    for r in rows:
        cells = []
        for p in PLANNERS:
            res = r["plans"][p]
            cells.append("n/a" if res is None else f"{res[0]:.2f} ({res[1]}){'' if res[2] else ' !'}")
        readme = f" ({r['readme_bound']:.2f})" if r["readme_bound"] is not None else ""
        proto = f"{r['proto']:.2f}" if r["proto"] is not None else "-"
        out.line(
            "costs",
            f"| {r['name']} | {r['n']} | {proto} | {r['bound']:.2f}{readme} | {r['bound*']:.2f} | "
            + " | ".join(cells)
            + " |",
        )


def print_ratios(out: Results, rows: list[dict]) -> None:
    out.line("ratios", "\n## Cost over the bounds (igniter) and against the prototype\n")
    out.line(
        "ratios",
        "| scenario | igniter / bound | igniter / bound* | plain / bound | igniter / prototype | igniter / exact |",
    )
    out.line("ratios", "|---|---|---|---|---|---|")
    for r in rows:
        ig, plain, ex = r["plans"]["igniter"][0], r["plans"]["igniter-plain"][0], r["plans"]["exact"]
        proto = f"{ig / r['proto']:.3f}" if r["proto"] else "-"
        gap = f"{ig / ex[0]:.3f}" if ex else "n/a"
        out.line(
            "ratios",
            f"| {r['name']} | {ig / r['bound']:.3f} | {ig / r['bound*']:.3f} | {plain / r['bound']:.3f} | {proto} | {gap} |",
        )
    vs_proto = [r["plans"]["igniter"][0] / r["proto"] for r in rows if r["proto"]]
    out.figure("igniter_over_prototype_min", min(vs_proto))
    out.figure("igniter_over_prototype_max", max(vs_proto))
    big = [r for r in rows if r["n"] >= 100]
    if big:
        for key, label in (("bound", "bound"), ("bound*", "bound*")):
            name = label.replace("*", "_star")  # a figure's key is a plain name (the docs' markers)
            mean = out.figure(f"igniter_over_{name}", statistics.mean(r["plans"]["igniter"][0] / r[key] for r in big))
            plain = statistics.mean(r["plans"]["igniter-plain"][0] / r[key] for r in big)
            out.figure(f"plain_over_{name}", plain)
            out.figure(f"igniter_above_{name}_pct", (mean - 1) * 100)
            print(
                f"\nmean cost / {label} over the {len(big)} scenarios with >= 100 workloads: "
                f"igniter {mean:.3f}, igniter-plain {plain:.3f}"
            )


def print_ablation(out: Results, rows: list[dict]) -> None:
    out.line("ablation", "\n## Ablation: the paper's algorithm, then one extension at a time ($/hour)\n")
    out.line("ablation", "| scenario | " + " | ".join(ABLATION) + " |")
    out.line("ablation", "|---" * (1 + len(ABLATION)) + "|")
    for r in rows:
        demands, options, models = r["inputs"]
        costs = [igniter(demands, options, models, None, cfg).cost_per_hour for cfg in ABLATION.values()]
        out.line("ablation", f"| {r['name']} | " + " | ".join(f"{c:.2f}" for c in costs) + " |")


def print_types(out: Results, rows: list[dict]) -> None:
    """The V100-only scenarios re-planned with p3.8xlarge and the (synthetic) T4 types offered too:
    the paper's algorithm can use one type; iGniter mixes them per workload."""
    extra = [
        InstanceOption("p3.8xlarge", "v100", 4, 12.24),
        InstanceOption("g4dn.xlarge", "t4-synthetic", 1, 0.526),
        InstanceOption("g4dn.12xlarge", "t4-synthetic", 4, 3.912),
    ]
    out.line(
        "types",
        "\n## More instance types: V100-only scenarios with p3.8xlarge, g4dn.xlarge, g4dn.12xlarge added ($/hour)\n",
    )
    out.line(
        "types",
        "| scenario | V100 only (igniter) | plain, cheapest single type | igniter, all types | GPUs V100 / T4 |",
    )
    out.line("types", "|---|---|---|---|---|")
    for r in rows:
        demands, options, models = r["inputs"]
        if {o.gpu for o in options} != {"v100"} or r["n"] < 12:
            continue
        models = {**models, **planning_inputs(load_policy(_T4_POLICY))[2]}
        more = [*options, *extra]
        plain = igniter(demands, more, models, None, PLAIN)
        plan = igniter(demands, more, models, None, Config())
        split = [
            sum(g.gpu == t for i in plan.instances for g in i.gpus if g.placements) for t in ("v100", "t4-synthetic")
        ]
        out.line(
            "types",
            f"| {r['name']} | {r['plans']['igniter'][0]:.2f} | {_cost_cell(plain)} | {_cost_cell(plan)} "
            f"| {split[0]} / {split[1]} |",
        )


def _cost_cell(plan: Plan) -> str:
    return f"{plan.cost_per_hour:.2f}" + (f" ({len(plan.unplaced)} unplaced)" if plan.unplaced else "")


def print_gap(out: Results, sizes: tuple[int, ...] = (8, 12, 16), sets: int = 10) -> None:
    """igniter against `exact` on random workload sets drawn like plan_scale's (V100 type)."""
    from plan_scale import PROFILES, V100, workloads

    models = {"v100": load_perf_model(PROFILES / "v100.yaml")}
    out.line("gap", f"\n## Optimality gap: igniter / exact on {sets} random sets per size (V100 type)\n")
    out.line("gap", "| workloads | mean | max | sets where igniter = exact |")
    out.line("gap", "|---|---|---|---|")
    for n in sizes:
        ratios = [
            make_plan(d, V100, models).cost_per_hour / make_plan(d, V100, models, planner="exact").cost_per_hour
            for d in (workloads(n, seed) for seed in range(sets))
        ]
        out.line(
            "gap", f"| {n} | {statistics.mean(ratios):.3f} | {max(ratios):.3f} | {sum(r <= 1 + 1e-9 for r in ratios)} |"
        )


def print_stability(out: Results, rows: list[dict], steps: int = 10, spread: float = 0.05) -> None:
    """Every workload's rate drifts by up to +-spread per step; moves with and without `current`."""
    out.line(
        "stability", f"\n## Stability: {steps} re-plans, every rate drifting +-{spread:.0%} a step (mean per step)\n"
    )
    out.line(
        "stability",
        "| scenario | placements | moved (fresh plan) | moved (with current) | $/h fresh | $/h with current "
        "| $/h with current, no repair |",
    )
    out.line("stability", "|---|---|---|---|---|---|---|")
    for r in rows:
        if r["n"] < 50:
            continue
        m = _drift(r["inputs"], steps, spread)
        out.line(
            "stability",
            f"| {r['name']} | {m[0]:.0f} | {m[1]:.1f} | {m[2]:.1f} | {m[3]:.2f} | {m[4]:.2f} | {m[5]:.2f} |",
        )


def _drift(inputs: Inputs, steps: int, spread: float) -> list[float]:
    demands, options, models = inputs
    rnd = random.Random(7)
    current = fresh_prev = bare = make_plan(demands, options, models)
    stats = []
    for _ in range(steps):
        demands = [replace(d, rate_rps=round(d.rate_rps * rnd.uniform(1 - spread, 1 + spread), 2)) for d in demands]
        fresh = make_plan(demands, options, models)
        kept = make_plan(demands, options, models, current=current)
        bare = igniter(demands, options, models, bare, replace(Config(), repair=False))
        n = sum(len(g.placements) for i in kept.instances for g in i.gpus)
        stats.append(
            (n, count_moved(fresh, fresh_prev), kept.moved, fresh.cost_per_hour, kept.cost_per_hour, bare.cost_per_hour)
        )
        current, fresh_prev = kept, fresh
    return [statistics.mean(x) for x in zip(*stats)]


def scenario_paths(args: list[str]) -> list[Path]:
    out: list[Path] = []
    for a in args or [str(SHARED)]:
        p = Path(a)
        out.extend(sorted(p.glob("*.yaml")) if p.is_dir() else [p])
    return [p for p in out if "workloads:" in p.read_text()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="*", help="scenario YAMLs or folders (default: ../shared/scenarios)")
    ap.add_argument("--no-stability", action="store_true")
    args = ap.parse_args(argv)
    out = Results("plan_quality", "python benchmarks/plan_quality.py " + " ".join(argv or sys.argv[1:]))
    print(f"machine: {out.doc['machine']}\n")
    rows = scenario_rows(scenario_paths(args.paths))
    print_costs(out, rows)
    print_ratios(out, rows)
    print_ablation(out, rows)
    print_types(out, rows)
    print_gap(out)
    if not args.no_stability:
        print_stability(out, rows)
    out.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
