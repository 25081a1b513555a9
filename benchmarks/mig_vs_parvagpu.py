"""igniter's MIG planner against ParvaGPU's published GPU counts, a lower bound, and the clock.

    python benchmarks/mig_vs_parvagpu.py [--shared ../shared] [--generated 200] [--seed 1] [--runs 5]

Reads ParvaGPU's measured A100 80GB tables and its six scenarios from ../shared (third-party data:
never copied into the repository; the tables are imported into a temporary folder with
`igniter profile import`, as a user would). For each scenario: the GPUs igniter's plan uses,
ParvaGPU's published count (2, 3, 5, 7, 13, 16), the lower bound, and the planning time (median
of --runs runs of `make_plan`, in this process: wall clock and this process's CPU time, since on
a shared, loaded machine the wall clock mostly measures the wait for a core; the load average is
recorded with the result).

The lower bound: a slice serves one workload, so each workload needs at least the fewest compute
slices of any multiset of its usable rows (latency <= 0.9 x SLO / 2) whose summed throughput
covers its rate (an exact knapsack over compute slices alone, planner/mig/plan.py
`lower_bound_gpus`); an A100 has 7 compute slices, so no plan uses fewer than ceil(sum / 7) GPUs.
It ignores that slices must sit at valid starts (3g + 3g leaves one compute slice idle), so it
may be below the true optimum.

Generated scenarios: `random.Random(seed)`; each draws one of ParvaGPU's six scenarios, keeps its
models, scales each rate by uniform(0.3, 4) and each SLO by uniform(0.7, 1.3). Scale: the 11-model
scenario, and 1,000 workloads (models drawn at random from the 11, rates and SLOs drawn from the
six scenarios' rows scaled the same way). Results: benchmarks/results/mig_vs_parvagpu.json.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import contextlib
import io
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _machine import describe
from _results import Results

from autoscaler.cli import main as igniter
from autoscaler.config.tables import parvagpu_scenarios
from autoscaler.model.mig import MigModel, load_gpu_model
from autoscaler.planner import Demand, InstanceOption, Plan, check_plan, make_plan
from autoscaler.planner.mig import lower_bound_gpus

HERE = Path(__file__).resolve().parent
PARVAGPU = [2, 3, 5, 7, 13, 16]
A100 = [InstanceOption("a100-80gb-1", "a100-80gb", 1, 5.07)]
Scenario = dict[str, tuple[float, float]]  # model -> (rate_rps, slo_ms)


def load_scenarios(shared: Path) -> list[Scenario]:
    folder = shared / "scenarios" / "mig"
    rates = (folder / "parvagpu-slo-req-rate.csv").read_text()
    return parvagpu_scenarios(rates, (folder / "parvagpu-slo-latency.csv").read_text())


def import_model(shared: Path, folder: Path) -> MigModel:
    out = folder / "a100-80gb.yaml"
    with contextlib.redirect_stdout(io.StringIO()):
        code = igniter(
            ["profile", "import", str(shared / "profiles" / "a100-80gb-mig"), "--gpu", "a100-80gb", "--out", str(out)]
        )
    if code != 0:
        raise SystemExit(f"import failed ({code})")
    model = load_gpu_model(out)
    assert isinstance(model, MigModel)
    return model


def timed(demands: list[Demand], models: dict[str, MigModel], runs: int) -> tuple[Plan, float, float]:
    """The plan, and the median wall-clock and CPU seconds of `runs` runs (CPU: this process's
    time, which a loaded shared machine does not inflate the way it inflates wall time)."""
    wall, cpu, plan = [], [], None
    for _ in range(runs):
        start, start_cpu = time.perf_counter(), time.process_time()
        plan = make_plan(demands, A100, models)
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    assert plan is not None
    return plan, statistics.median(wall), statistics.median(cpu)


def one(name: str, demands: list[Demand], model: MigModel, runs: int) -> dict[str, object]:
    models = {"a100-80gb": model}
    plan, seconds, cpu = timed(demands, models, runs)
    bound, frac = lower_bound_gpus(demands, "a100-80gb", model)
    problems = check_plan(plan, demands, models, A100)
    return {
        "scenario": name,
        "workloads": len(demands),
        "igniter_gpus": plan.gpu_count,
        "lower_bound_gpus": bound,
        "lower_bound_fractional": round(frac, 3),
        "unplaced": len(plan.unplaced),
        "feasible": not problems,
        "seconds": round(seconds, 4),
        "cpu_seconds": round(cpu, 4),
    }


def generated(scenarios: list[Scenario], n: int, seed: int) -> list[tuple[str, list[Demand]]]:
    rng = random.Random(seed)
    out = []
    for k in range(n):
        base = rng.randrange(len(scenarios))
        demands = [
            Demand(m, m, slo * rng.uniform(0.7, 1.3), rate * rng.uniform(0.3, 4.0))
            for m, (rate, slo) in scenarios[base].items()
        ]
        out.append((f"gen-{k} (from #{base + 1})", demands))
    return out


def thousand(scenarios: list[Scenario], seed: int) -> list[Demand]:
    rng = random.Random(seed)
    out = []
    for k in range(1000):
        sc = scenarios[rng.randrange(len(scenarios))]
        m = rng.choice(sorted(sc))
        rate, slo = sc[m]
        out.append(Demand(f"w{k}-{m}", m, slo * rng.uniform(0.7, 1.3), rate * rng.uniform(0.3, 4.0)))
    return out


def run(args: argparse.Namespace) -> dict[str, object]:
    shared = Path(args.shared).resolve()
    scenarios = load_scenarios(shared)
    with tempfile.TemporaryDirectory() as tmp:
        model = import_model(shared, Path(tmp))
    six = []
    for k, sc in enumerate(scenarios):
        row = one(f"parvagpu-{k + 1}", [Demand(m, m, s, r) for m, (r, s) in sc.items()], model, args.runs)
        row["parvagpu_gpus"] = PARVAGPU[k]
        six.append(row)
        print(
            f"{row['scenario']:>12}: igniter {row['igniter_gpus']:>3}  ParvaGPU {PARVAGPU[k]:>3}  "
            f"bound {row['lower_bound_gpus']:>3}  feasible {row['feasible']}  {row['seconds'] * 1000:.1f} ms"
        )
    gen = [one(name, demands, model, 1) for name, demands in generated(scenarios, args.generated, args.seed)]
    total, bound = sum(int(g["igniter_gpus"]) for g in gen), sum(int(g["lower_bound_gpus"]) for g in gen)
    over = [g for g in gen if g["igniter_gpus"] != g["lower_bound_gpus"]]
    print(
        f"generated ({args.generated}, seed {args.seed}): igniter {total} GPUs, bound {bound} "
        f"({(total / bound - 1) * 100 if bound else 0.0:.2f} % above); {len(over)} scenarios above their bound"
    )
    big = thousand(scenarios, args.seed)
    _, t1000, c1000 = timed(big, {"a100-80gb": model}, max(1, args.runs // 2))
    t11 = max(float(str(r["seconds"])) for r in six if r["workloads"] == 11)
    c11 = max(float(str(r["cpu_seconds"])) for r in six if r["workloads"] == 11)
    print(
        f"planning time (worst 11-workload scenario): {t11 * 1000:.1f} ms wall, {c11 * 1000:.1f} ms CPU; "
        f"1,000 workloads {t1000:.2f} s wall, {c1000:.2f} s CPU (load average {os.getloadavg()[0]:.1f})"
    )
    return {
        "machine": describe(),
        "generator": "random.Random(seed); per scenario: one of the six at random, rate x uniform(0.3, 4), SLO x uniform(0.7, 1.3)",
        "seed": args.seed,
        "runs": args.runs,
        "parvagpu_scenarios": six,
        "table": table(six),
        "generated": {
            "count": len(gen),
            "igniter_gpus": total,
            "lower_bound_gpus": bound,
            "above_bound_percent": round((total / bound - 1) * 100, 3) if bound else None,
            "above_by": above_by(gen),
            "scenarios": gen,
        },
        "planning_seconds": {
            "11_workloads_wall": t11,
            "11_workloads_cpu": c11,
            "1000_workloads_wall": round(t1000, 4),
            "1000_workloads_cpu": round(c1000, 4),
            "load_average_1min": round(os.getloadavg()[0], 1),
        },
    }


def table(six: list[dict[str, object]]) -> list[str]:
    """The markdown table docs/planner.md embeds (tests/test_docs.py compares the two)."""
    lines = [
        "| scenario | workloads | igniter GPUs | ParvaGPU (published) | lower bound (fractional) | plan time, CPU / wall |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in six:
        cpu, wall = float(str(r["cpu_seconds"])) * 1000, float(str(r["seconds"])) * 1000
        lines.append(
            f"| {str(r['scenario']).removeprefix('parvagpu-')} | {r['workloads']} | {r['igniter_gpus']} | "
            f"{r['parvagpu_gpus']} | {r['lower_bound_gpus']} ({float(str(r['lower_bound_fractional'])):.2f}) | "
            f"{cpu:.0f} ms / {wall:.0f} ms |"
        )
    return lines


def above_by(gen: list[dict[str, object]]) -> dict[str, int]:
    """Generated scenarios by how many GPUs their plan is above its lower bound."""
    counts = Counter(int(str(g["igniter_gpus"])) - int(str(g["lower_bound_gpus"])) for g in gen)
    return {str(k): counts[k] for k in sorted(counts)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--shared", default=str(HERE.parent.parent / "shared"), help="the shared data folder (default ../shared)"
    )
    p.add_argument("--generated", type=int, default=200, help="generated scenarios")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--runs", type=int, default=5, help="timed runs per ParvaGPU scenario (median)")
    args = p.parse_args()
    res = Results(
        "mig_vs_parvagpu",
        f"python benchmarks/mig_vs_parvagpu.py --generated {args.generated} --seed {args.seed} --runs {args.runs}",
    )
    res.doc.update(run(args))  # the docs quote these keys at the top level (docs/planner.md, README.md)
    res.write()


if __name__ == "__main__":
    main()
