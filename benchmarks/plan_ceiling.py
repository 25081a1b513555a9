"""Planning time at the rate ceiling: a few workloads cut into tens of thousands of GPUs.

    python benchmarks/plan_ceiling.py [--runs 3] [--worst-planners igniter,ffd,gslice,gpulets]

plan_scale.py grows the number of workloads; here a few workloads at rates up to
limits.MAX_RATE_RPS grow the plan instead (tests/config/test_plan_property.py draws them: one took
152 s of a CI run). Cases, each planned cold (plan_scale.cold), median of --runs runs, on one core:

- `ceiling`: the property test's minimised draw: ssd at 10,000,000 req/s, SLO 100 s, on a
  4-GPU V100 type (29,095 whole-GPU replicas, 7,274 instances);
- `spread`: ssd at 3,000,000 req/s with scaling.redundancy spread instance (8,730 servers, an
  instance each);
- `worst`: the largest plan the property test can draw: four ssd workloads at the ceiling on a
  1-GPU T4 type with no instance limit (221,132 GPUs), for each planner; after only.

`before` packs the planned GPUs into instances as build.py did before 96514d1 (every waiting GPU
scanned for each instance, below) and prints as the CLI did (`json.dumps(plan.to_json(),
indent=2)`; a table row for every placement); `after` is the code checked out (cli/plan.py's
plan_json and print_plan). `json s` and `table s`: printing that plan as `igniter plan --json`
and `igniter plan` do, into memory.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import io
import json
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stdout
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _results import Results
from plan_scale import PROFILES, cold

from autoscaler.cli import plan as cli_plan
from autoscaler.model.perfmodel import PerfModel, load_perf_model
from autoscaler.planner import Demand, InstanceOption, Plan, build, make_plan
from autoscaler.planner.build import _instance, cover, spread_workloads
from autoscaler.planner.state import Gpu, GpuPool
from autoscaler.planner.types import InstanceOut

V100X4 = InstanceOption("type-0", "v100", 4, 0.08)
T4 = InstanceOption("type-t4", "t4-synthetic", 1, 1.0)
CASES: dict[str, tuple[list[Demand], list[InstanceOption]]] = {
    "ceiling": ([Demand("w0", "ssd", 100_000.0, 10_000_000.0)], [V100X4]),
    "spread": ([Demand("w0", "ssd", 100_000.0, 3_000_000.0, min_servers=2, spread="instance")], [V100X4]),
    "worst": ([Demand(f"w{i}", "ssd", 600_000.0, 10_000_000.0) for i in range(4)], [T4]),
}


def scanning_new_instances(fleet: GpuPool) -> list[InstanceOut]:
    """build.new_instances before 96514d1: take_apart scanned every waiting GPU per instance."""
    left = fleet.remaining()
    out = []
    for gtype in sorted(fleet.floating_counts()):
        gpus = sorted(
            (g for g in fleet.open_gpus() if g.kept is None and g.gpu == gtype and g.tasks), key=lambda g: g.gid
        )
        opts = [o for o in fleet.options if o.gpu == gtype]
        while gpus:
            for option, count in sorted(cover(len(gpus), opts, [left[o.name] for o in opts]), key=lambda x: -x[0].gpus):
                for _ in range(count):
                    members, gpus = _scan(gpus, option.gpus)
                    out.append(_instance(option, members))
                    cap = left[option.name]
                    left[option.name] = None if cap is None else cap - 1
    return [i for i in out if any(g.placements for g in i.gpus)]


def _scan(gpus: list[Gpu], n: int) -> tuple[list[Gpu], list[Gpu]]:
    taken: list[Gpu] = []
    spread: set[str] = set()
    rest: list[Gpu] = []
    for g in gpus:
        mine = spread_workloads(g)
        if len(taken) < n and not mine & spread:
            taken.append(g)
            spread |= mine
        else:
            rest.append(g)
    return taken, rest


@contextmanager
def version_of(version: str) -> Iterator[None]:
    """The packing and the printing of `version` (before: the scan, plain json.dumps, every row)."""
    saved = build.new_instances, cli_plan.plan_json, cli_plan.TABLE_ROWS
    if version == "before":
        build.new_instances = scanning_new_instances
        cli_plan.plan_json = lambda plan: json.dumps(plan.to_json(), indent=2)
        cli_plan.TABLE_ROWS = sys.maxsize
    try:
        yield
    finally:
        build.new_instances, cli_plan.plan_json, cli_plan.TABLE_ROWS = saved


def printed(fn: Callable[[], object]) -> None:
    with redirect_stdout(io.StringIO()):
        fn()


def median_of(runs: int, fn: Callable[[], object]) -> tuple[float, object]:
    times, out = [], None
    for _ in range(runs):
        start = time.process_time()
        out = fn()
        times.append(time.process_time() - start)
    return statistics.median(times), out


def one(case: str, planner: str, version: str, models: dict[str, PerfModel], runs: int) -> tuple[list[float], Plan]:
    """Median CPU seconds of a cold plan, of printing it as JSON and as the table; the plan."""
    demands, options = CASES[case]

    def plan_cold() -> Plan:
        cold(models)
        return make_plan(demands, options, models, planner=planner)

    with version_of(version):
        secs, plan = median_of(runs, plan_cold)
        assert isinstance(plan, Plan) and not plan.unplaced
        js, _ = median_of(runs, lambda: printed(lambda: print(cli_plan.plan_json(plan))))
        table, _ = median_of(runs, lambda: printed(lambda: cli_plan.print_plan(plan, demands, case, models)))
    return [secs, js, table], plan


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--worst-planners", default="igniter,ffd,gslice,gpulets")
    args = ap.parse_args()
    models: dict[str, PerfModel] = {g: load_perf_model(PROFILES / f"{g}.yaml") for g in ("v100", "t4-synthetic")}
    out = Results("plan_ceiling", "python benchmarks/plan_ceiling.py " + " ".join(sys.argv[1:]))
    out.line("times", f"machine: {out.doc['machine']}; CPU seconds, median of {args.runs} runs, each cold\n")
    out.line("times", "| case | planner | code | instances | GPUs | plan s | json s | table s |")
    out.line("times", "|---|---|---|---|---|---|---|---|")
    runs = [("ceiling", "igniter", "before"), ("ceiling", "igniter", "after")]
    runs += [("spread", "igniter", "before"), ("spread", "igniter", "after")]
    runs += [("worst", p, "after") for p in args.worst_planners.split(",") if p]
    for case, planner, version in runs:
        times, plan = one(case, planner, version, models, args.runs)
        gpus = sum(len(i.gpus) for i in plan.instances)
        for what, secs in zip(("plan", "json", "table"), times):
            out.figure(f"{case}_{planner}_{version}_{what}_seconds", secs)
        cells = " | ".join(f"{t:.2f}" for t in times)
        out.line("times", f"| {case} | {planner} | {version} | {len(plan.instances):,} | {gpus:,} | {cells} |")
    f = out.doc["figures"]
    for case in ("ceiling", "spread"):
        for what in ("plan", "json", "table"):
            ratio = f[f"{case}_igniter_before_{what}_seconds"] / f[f"{case}_igniter_after_{what}_seconds"]
            print(f"{case} {what}: {out.figure(f'{case}_{what}_speedup', ratio):.1f} x faster")
    out.write()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
