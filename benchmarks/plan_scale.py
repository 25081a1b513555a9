"""How planning time and memory grow with the number of workloads.

    python benchmarks/plan_scale.py [--sizes 10,100,1000,2000,5000,10000] [--runs 3] [--plain-max 2000] [--hetero]

Random workloads drawn like ../shared/scenarios' (model, SLO and rate ranges per model; seed 1),
on one p3.2xlarge type as the prototype (--hetero adds p3.8xlarge and the synthetic T4 types).
Time: the median of --runs runs of `make_plan`, in this process, on one core, in CPU time and wall clock (the planner is
single-threaded Python; BLAS threads are pinned to 1). Peak memory: one more run under
tracemalloc (Python heap allocated during that call) and the process's peak RSS at the end.
The paper's algorithm as published ("igniter-plain": every open GPU tried) runs up to --plain-max.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import random
import resource
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _results import Results

from autoscaler.model.perfmodel import PerfModel, load_perf_model
from autoscaler.planner import Demand, InstanceOption, api, check_plan, make_plan

PROFILES = Path(__file__).resolve().parent.parent / "policies" / "profiles"
RANGES = {
    "alexnet": ((10, 25), (300, 1500)),
    "resnet50": ((20, 50), (100, 800)),
    "vgg19": ((30, 70), (50, 400)),
    "ssd": ((30, 70), (30, 300)),
}
V100 = [InstanceOption("p3.2xlarge", "v100", 1, 3.06)]
HETERO = [
    *V100,
    InstanceOption("p3.8xlarge", "v100", 4, 12.24),
    InstanceOption("g4dn.xlarge", "t4-synthetic", 1, 0.526),
    InstanceOption("g4dn.12xlarge", "t4-synthetic", 4, 3.912),
]


def workloads(n: int, seed: int = 1) -> list[Demand]:
    """n random workloads with the scenarios' per-model SLO and rate ranges."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        model = rnd.choice(sorted(RANGES))
        (s0, s1), (r0, r1) = RANGES[model]
        out.append(Demand(f"w{i}", model, float(rnd.randint(s0, s1)), float(rnd.randint(r0, r1))))
    return out


def cold(models: dict[str, PerfModel]) -> None:
    """Forget everything earlier runs remembered (planner/api.py's forget_memos): every timed run
    plans inputs it has not seen, as a tick with new rates does. Without this, runs 2 and 3 answer
    from the memos in microseconds."""
    api.forget_memos(models.values())


def timed(
    demands: list[Demand], options: list[InstanceOption], models: dict[str, PerfModel], planner: str, runs: int
) -> tuple[float, float, object]:
    times, cpus, plan = [], [], None
    for _ in range(runs):
        cold(models)
        start, cpu = time.perf_counter(), time.process_time()
        plan = make_plan(demands, options, models, planner=planner)
        times.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
    return statistics.median(times), statistics.median(cpus), plan


def peak_mb(demands: list[Demand], options: list[InstanceOption], models: dict[str, PerfModel], planner: str) -> float:
    cold(models)
    tracemalloc.start()
    make_plan(demands, options, models, planner=planner)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / 2**20


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10,100,1000,2000,5000,10000")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--plain-max", type=int, default=2000, help="largest size for igniter-plain (it is quadratic)")
    ap.add_argument("--hetero", action="store_true", help="V100 and T4 instance types, 1 and 4 GPUs each")
    args = ap.parse_args()
    models = {
        "v100": load_perf_model(PROFILES / "v100.yaml"),
        "t4-synthetic": load_perf_model(PROFILES / "t4-synthetic.yaml"),
    }
    options = HETERO if args.hetero else V100
    out = Results(
        "plan_scale_hetero" if args.hetero else "plan_scale",
        "python benchmarks/plan_scale.py " + " ".join(sys.argv[1:]),
    )
    print(f"machine: {out.doc['machine']}")
    print(f"instance types: {', '.join(o.name for o in options)}; median of {args.runs} runs\n")
    print(f"{'workloads':>9} {'planner':>14} {'median s':>9} {'peak MB':>8} {'GPUs':>6} {'$/hour':>10} {'feasible':>8}")
    rows = []
    for n in (int(x) for x in args.sizes.split(",")):
        demands = workloads(n)
        cells = [str(n)]
        for planner in ("igniter", "igniter-plain"):
            if planner == "igniter-plain" and n > args.plain_max:
                cells += ["-", "-"]
                continue
            secs, cpu, plan = timed(demands, options, models, planner, args.runs)
            ok = "yes" if not check_plan(plan, demands, models, options) else "NO"
            mb = peak_mb(demands, options, models, planner)
            print(
                f"{n:>9} {planner:>14} {secs:>9.3f} {mb:>8.2f} {plan.gpu_count:>6} {plan.cost_per_hour:>10.2f} {ok:>8}",
                flush=True,
            )
            out.figure(f"{planner}_seconds_{n}", secs)
            out.figure(f"{planner}_cpu_seconds_{n}", cpu)
            cells += [f"{cpu:.3f} / {secs:.3f}", *([f"{mb:.2f}"] if planner == "igniter" else []), str(plan.gpu_count)]
        rows.append("| " + " | ".join(cells) + " |")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\nprocess peak RSS: {rss:.0f} MB")
    out.figure("peak_rss_mb", rss)
    out.doc["tables"]["scale"] = [
        "| workloads | igniter s, CPU / wall | peak MB | GPUs | igniter-plain s, CPU / wall | GPUs |",
        "|---|---|---|---|---|---|",
        *rows,
    ]
    out.write()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
