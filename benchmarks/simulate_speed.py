"""How long `igniter simulate` takes: 10 workloads over 14 days at 10-minute rows, and over 2 days at
1-minute rows (the issue's target: under 60 s each), plus the documented ServeGen example.

The 10-workload traces are built from the real ServeGen trace: workload i replays column i mod 3,
shifted by 70 min x i and scaled, so the workloads peak at different times; the 1-minute trace
interpolates the 10-minute rows and adds seeded +-5 % noise. The policy ticks once per row
(interval_s = the row spacing), boot_s 180, ewma forecast. Median of 3 runs, wall and CPU time
(the CPU time is what the simulator itself costs on a machine shared with other work).

Run: .venv/bin/python benchmarks/simulate_speed.py [--runs N]

`--compare` times `igniter simulate policies/servegen-sim.yaml --trace
traces/servegen-3models-wide.csv --compare` (the issue's target: under 2 minutes) as a user runs
it, a fresh process per run, in the same session: one process (`--workers 1`: the caches alone)
against the default (a worker per CPU), and with `--baseline REF` the code of a git revision
before the change (exported with `git archive`, run the same way). `--days D` replays the
trace's first D days only. One process and the workers must print the same JSON (checked:
identical numbers is the bar; the baseline's is the same only where nothing the simulator computes
changed since REF, which is printed), and the table gives the median wall time of `--runs` runs, the ratio to the one-process
case, and the CPU time of each command with every process it started (this script makes itself
the subreaper of the fork server that outlives the command, so its workers' time is counted: on a
loaded machine the CPU time says what the run costs, and CPU time / CPUs what it would take alone). The load average is printed
beside: on a shared machine wall time follows it.

Run: nice .venv/bin/python benchmarks/simulate_speed.py --compare [--runs N] [--days D] [--baseline REF]

`--example` times the documented example itself, `igniter simulate policies/servegen-sim.yaml
--trace traces/servegen-3models-wide.csv --json` (what tests/cli/test_simulate.py runs), as a
user runs it: a fresh process per run, this checkout against `--baseline REF` (required) run by
run in turn, the median wall and CPU time of `--runs` runs each; both must print the same JSON
(the replay's numbers unchanged). Writes benchmarks/results/simulate_example_speed.json.

Run: nice .venv/bin/python benchmarks/simulate_speed.py --example --baseline REF [--runs N]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))

from _machine import describe  # noqa: E402
from _results import Results  # noqa: E402

from autoscaler.config.policy import load_policy  # noqa: E402
from autoscaler.sim.engine import SimOptions, simulate  # noqa: E402
from autoscaler.sim.traces import Trace, read_wide  # noqa: E402

MODELS = [("alexnet", 20), ("resnet50", 40), ("vgg19", 60), ("ssd", 50)]
SERVEGEN = ROOT / "traces" / "servegen-3models-wide.csv"


def ten_workloads(step_s: float, days: float, seed: int = 7) -> Trace:
    """10 trace-shaped workloads (see the module docstring)."""
    base = read_wide(SERVEGEN)
    cols = list(base.rates.values())
    times = np.arange(0.0, days * 86400.0, step_s)
    rng = np.random.default_rng(seed)
    rates = {}
    for i in range(10):
        src = np.roll(cols[i % 3], 7 * i)
        series = np.interp(times, base.times, src)
        if step_s < base.step_s:
            series = series * rng.normal(1.0, 0.05, len(times)).clip(0.8, 1.2)
        rates[f"w{i}"] = series * (0.15 + 0.05 * i)
    return Trace(f"ten-workloads-{step_s:g}s", times, rates, step_s)


def policy_for(trace: Trace, interval_s: float, path: Path) -> Path:
    workloads = [
        {
            "name": w,
            "model": MODELS[i % 4][0],
            "slo_ms": MODELS[i % 4][1],
            "rate_rps": round(float(trace.rates[w].max()), 1),
        }
        for i, w in enumerate(trace.names)
    ]
    data = {
        "fleet": "bench",
        "agents": {"transport": "none"},
        "instance_types": [
            {"name": "p3.2xlarge", "gpu": "v100", "gpus": 1, "price_per_hour": 3.06},
            {"name": "g4dn.xlarge", "gpu": "t4-synthetic", "gpus": 1, "price_per_hour": 0.526},
        ],
        "workloads": workloads,
        "scaling": {
            "interval_s": interval_s,
            "boot_s": 180,
            "headroom": 0.1,
            "scale_down_delay_s": 1200,
            "forecast": "ewma",
        },
    }
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def timed(policy_path: Path, trace: Trace, runs: int) -> tuple[float, float, dict]:
    """Median wall and CPU seconds of `runs` simulations, and the last summary."""
    policy = load_policy(policy_path)
    walls, cpus, summary = [], [], {}
    for _ in range(runs):
        w, c = time.perf_counter(), time.process_time()
        summary = simulate(policy, trace, SimOptions()).summary()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return statistics.median(walls), statistics.median(cpus), summary


def compare_cmd(days: float | None, workers: int | None) -> list[str]:
    cmd = ["-m", "autoscaler", "simulate", str(ROOT / "policies" / "servegen-sim.yaml"), "--trace", str(SERVEGEN)]
    cmd += ["--compare", "--json"] + (["--end-s", str(days * 86400)] if days else [])
    return cmd + (["--workers", str(workers)] if workers else [])


def subreaper() -> bool:
    """Make this process the reaper of its orphaned descendants (Linux): `--compare`'s fork
    server outlives the command, and only its reaper learns the CPU it and its workers used."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


def run_once(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, str]:
    """Wall seconds of one command, the CPU seconds of it and of every process it started (its
    workers too where this process is their subreaper), and its stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, *cmd], cwd=cwd, env=env, stdout=subprocess.PIPE, text=True)
    out = proc.stdout.read() if proc.stdout else ""
    if proc.wait() != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}")
    wall = time.perf_counter() - start
    while True:  # the fork server and its resource tracker, orphaned to this process
        try:
            os.wait()
        except ChildProcessError:
            break
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), out


def baseline_tree(ref: str, into: Path) -> Path:
    """The package and policies as they were at `ref`, to run beside this checkout."""
    archive = subprocess.run(
        ["git", "archive", ref, "autoscaler", "policies"], cwd=ROOT, capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def compare_speed(
    runs: int, days: float | None, baseline: str | None, single: bool = True, write: bool = False
) -> None:
    """The `--compare` cases (see the module docstring), interleaved run by run so that the
    machine's load falls on each alike. `single=False` leaves out the one-process case (the
    slowest: it is there to check the workers' numbers); `write` saves the figures to
    results/simulate_compare.json."""
    env = {**os.environ, "PYTHONPATH": ""}
    reaped = subreaper()
    one_name, default_name = "one process (--workers 1)", "worker per CPU (default)"
    with tempfile.TemporaryDirectory() as tmp:
        cases = {one_name: (compare_cmd(days, 1), ROOT, env)} if single else {}
        cases[default_name] = (compare_cmd(days, None), ROOT, env)
        if baseline:
            old = baseline_tree(baseline, Path(tmp))
            cases[f"before: {baseline}"] = (compare_cmd(days, None), old, {**env, "PYTHONPATH": str(old)})
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
        loads: dict[str, list[float]] = {name: [] for name in cases}
        outputs: dict[str, set[str]] = {name: set() for name in cases}
        for _ in range(runs):
            for name, (cmd, cwd, e) in cases.items():
                wall, cpu, out = run_once(cmd, cwd, e)
                times[name].append((wall, cpu))
                loads[name].append(os.getloadavg()[1])  # the 5-minute load over about the run
                print(f"  {name}: {wall:.1f} s wall, {cpu:.1f} s CPU, load {loads[name][-1]:.1f}", flush=True)
                outputs[name].add(out)
    mine = set().union(*(outputs[n] for n in (one_name, default_name) if n in outputs))
    assert len(mine) == 1, "one process and the workers (or two runs) printed different numbers"
    medians = {
        name: (statistics.median(w for w, _ in ts), statistics.median(c for _, c in ts)) for name, ts in times.items()
    }
    ref = medians[one_name if single else default_name][0]
    before = medians[f"before: {baseline}"][0] if baseline else None
    print(f"ServeGen example --compare, {days or 14:g} days, median of {runs}; load average {os.getloadavg()}")
    print(f"{'case':<32} {'wall s':>8} {'reference / it':>15} {'before / it':>12} {'cpu s':>8} {'walls (5-min load)'}")
    for name, (wall, cpu) in medians.items():
        cpu_s = f"{cpu:.1f}" if reaped else "-"  # a worker's CPU is seen only by its reaper
        vs_before = f"{before / wall:.2f}" if before else "-"
        each = ", ".join(f"{w:.1f} ({load:.1f})" for (w, _), load in zip(times[name], loads[name], strict=True))
        print(f"{name:<32} {wall:>8.1f} {ref / wall:>15.2f} {vs_before:>12} {cpu_s:>8} {each}")
    same_before = baseline is not None and outputs[f"before: {baseline}"] == mine
    print(f"identical JSON across {'one process, workers and runs' if single else 'runs'}: yes")
    if baseline:  # the same only where nothing the simulator computes changed since REF
        print(f"identical JSON to {baseline}: {'yes' if same_before else 'no'}")
    if write:
        keys = {one_name: "one_process", default_name: "workers", f"before: {baseline}": "before"}
        doc = {
            "machine": describe(),
            "command": "igniter simulate policies/servegen-sim.yaml --trace traces/servegen-3models-wide.csv "
            "--compare --json" + (f" --end-s {days * 86400:g}" if days else ""),
            "baseline": baseline,
            "runs": runs,
            "cases": {
                keys[name]: {
                    "label": name,
                    "wall_s": [round(w, 1) for w, _ in times[name]],
                    "median_wall_s": round(medians[name][0], 1),
                    "cpu_s": [round(c, 1) for _, c in times[name]] if reaped else None,
                    "median_cpu_s": round(medians[name][1], 1) if reaped else None,
                    "load_5min": [round(x, 1) for x in loads[name]],
                }
                for name in cases
            },
            "cpus": os.cpu_count(),
            "identical_json_to_baseline": same_before if baseline else None,
        }
        (ROOT / "benchmarks" / "results" / "simulate_compare.json").write_text(json.dumps(doc, indent=1) + "\n")


def example_speed(runs: int, baseline: str) -> None:
    """The `--example` case (see the module docstring)."""
    env = {**os.environ, "PYTHONPATH": ""}
    cmd = ["-m", "autoscaler", "simulate", str(ROOT / "policies" / "servegen-sim.yaml"), "--trace", str(SERVEGEN)]
    cmd.append("--json")
    out = Results(
        "simulate_example_speed", f"python benchmarks/simulate_speed.py --example --baseline {baseline} --runs {runs}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        old = baseline_tree(baseline, Path(tmp))
        cases = {"this checkout": (ROOT, env), f"before: {baseline}": (old, {**env, "PYTHONPATH": str(old)})}
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
        outputs: dict[str, set[str]] = {name: set() for name in cases}
        for _ in range(runs):
            for name, (cwd, e) in cases.items():
                wall, cpu, text = run_once(cmd, cwd, e)
                times[name].append((wall, cpu))
                outputs[name].add(text)
                print(f"  {name}: {wall:.1f} s wall, {cpu:.1f} s CPU, load {os.getloadavg()[0]:.1f}", flush=True)
    same = len(set().union(*outputs.values())) == 1
    for key, name in (("new", "this checkout"), ("before", f"before: {baseline}")):
        wall = statistics.median(w for w, _ in times[name])
        cpu = statistics.median(c for _, c in times[name])
        print(f"{name:<24} median {wall:.1f} s wall, {cpu:.1f} s CPU ({', '.join(f'{w:.1f}' for w, _ in times[name])})")
        out.figure(f"{key}_wall_s", wall)
        out.figure(f"{key}_cpu_s", cpu)
    out.figure("runs", runs)
    out.figure("cpu_ratio", out.doc["figures"]["before_cpu_s"] / out.doc["figures"]["new_cpu_s"])
    out.figure("identical_json", int(same))
    print(f"identical JSON, every run of both: {'yes' if same else 'NO'}")
    out.write()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--compare", action="store_true", help="time simulate --compare (see the module docstring)")
    ap.add_argument("--days", type=float, help="--compare: the trace's first D days only")
    ap.add_argument("--baseline", metavar="REF", help="--compare: also time the code at this git revision")
    ap.add_argument("--no-single", action="store_true", help="--compare: leave out the one-process case")
    ap.add_argument("--write", action="store_true", help="--compare: save results/simulate_compare.json")
    ap.add_argument("--example", action="store_true", help="time the documented example against --baseline")
    args = ap.parse_args()
    print(f"machine: {describe()}")
    if args.example:
        if not args.baseline:
            ap.error("--example needs --baseline REF")
        example_speed(args.runs, args.baseline)
        return
    if args.compare:
        compare_speed(args.runs, args.days, args.baseline, not args.no_single, args.write)
        return
    out = Results("simulate_speed", f"python benchmarks/simulate_speed.py --runs {args.runs}")
    print(f"{'case':<44} {'ticks':>6} {'wall s':>7} {'cpu s':>7} {'ms/tick':>8} {'target':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        cases = [
            ("ten_14d_10min", "10 workloads, 14 days, 10-min rows", ten_workloads(600, 14), 600.0),
            ("ten_2d_1min", "10 workloads, 2 days, 1-min rows", ten_workloads(60, 2), 60.0),
        ]
        for key, name, trace, interval in cases:
            wall, cpu, s = timed(policy_for(trace, interval, Path(tmp) / "p.yaml"), trace, args.runs)
            print(
                f"{name:<44} {s['ticks']:>6} {wall:>7.1f} {cpu:>7.1f} {1000 * cpu / s['ticks']:>8.1f} "
                f"{'met' if wall < 60 else 'MISSED':>7}"
            )
            out.figure(f"{key}_wall_s", wall)
            out.figure(f"{key}_cpu_s", cpu)
        trace = read_wide(SERVEGEN)
        wall, cpu, s = timed(ROOT / "policies" / "servegen-sim.yaml", trace, args.runs)
        print(
            f"{'ServeGen example (3 workloads, interval 300)':<44} {s['ticks']:>6} {wall:>7.1f} {cpu:>7.1f} "
            f"{1000 * cpu / s['ticks']:>8.1f} {'-':>7}"
        )
        out.figure("servegen_example_wall_s", wall)
        out.figure("servegen_example_cpu_s", cpu)
    out.write()


if __name__ == "__main__":
    main()
