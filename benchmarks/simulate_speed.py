"""How long `igniter simulate` takes: 10 workloads over 14 days at 10-minute rows, and over 2 days at
1-minute rows (the issue's target: under 60 s each), plus the documented ServeGen example.

The 10-workload traces are built from the real ServeGen trace: workload i replays column i mod 3,
shifted by 70 min x i and scaled, so the workloads peak at different times; the 1-minute trace
interpolates the 10-minute rows and adds seeded +-5 % noise. The policy ticks once per row
(interval_s = the row spacing), boot_s 180, ewma forecast. Median of 3 runs, wall and CPU time
(the CPU time is what the simulator itself costs on a machine shared with other work).

Run: .venv/bin/python benchmarks/simulate_speed.py [--runs N]
"""

from __future__ import annotations

import argparse
import statistics
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    print(f"machine: {describe()}")
    print(f"{'case':<44} {'ticks':>6} {'wall s':>7} {'cpu s':>7} {'ms/tick':>8} {'target':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        cases = [
            ("10 workloads, 14 days, 10-min rows", ten_workloads(600, 14), 600.0),
            ("10 workloads, 2 days, 1-min rows", ten_workloads(60, 2), 60.0),
        ]
        for name, trace, interval in cases:
            wall, cpu, s = timed(policy_for(trace, interval, Path(tmp) / "p.yaml"), trace, args.runs)
            print(
                f"{name:<44} {s['ticks']:>6} {wall:>7.1f} {cpu:>7.1f} {1000 * cpu / s['ticks']:>8.1f} "
                f"{'met' if wall < 60 else 'MISSED':>7}"
            )
        trace = read_wide(SERVEGEN)
        wall, cpu, s = timed(ROOT / "policies" / "servegen-sim.yaml", trace, args.runs)
        print(
            f"{'ServeGen example (3 workloads, interval 300)':<44} {s['ticks']:>6} {wall:>7.1f} {cpu:>7.1f} "
            f"{1000 * cpu / s['ticks']:>8.1f} {'-':>7}"
        )


if __name__ == "__main__":
    main()
