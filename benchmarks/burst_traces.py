"""Recurring-burst traces: a base rate with bursts that recur at a period, for `forecast: auto`.

Each burst starts at phase_s into its period, moved by up to +-jitter_s (uniform), rises linearly
to base * amplitude over rise_s (the issue's 1 to 2 minutes), holds for hold_s and falls back over
rise_s; every row is multiplied by 1 + noise * N(0, 1) (clipped at 0). Seeded: one seed, one trace.
The rows are `step_s` apart, the format `igniter simulate --trace` reads (time_s, one column per
workload). Several workloads may recur at different periods (`--spec name:period_s`).

    python benchmarks/burst_traces.py OUT.csv --hours 8 --spec a:3600 --spec b:1800 --seed 1
"""

from __future__ import annotations

import argparse
import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from autoscaler.sim.traces import Trace


@dataclass(frozen=True)
class Bursts:
    period_s: float = 3600.0
    phase_s: float = 1200.0
    jitter_s: float = 60.0
    amplitude: float = 4.0  # the burst's rate as a multiple of the base
    rise_s: float = 90.0
    hold_s: float = 600.0
    base_rps: float = 200.0
    noise: float = 0.03


def rates(spec: Bursts, times: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The rate at each of `times` (see the module doc)."""
    out = np.full(len(times), spec.base_rps)
    extra = spec.base_rps * (spec.amplitude - 1.0)
    for k in range(int(times[-1] // spec.period_s) + 1):
        start = k * spec.period_s + spec.phase_s + rng.uniform(-spec.jitter_s, spec.jitter_s)
        up = np.clip((times - start) / spec.rise_s, 0.0, 1.0)
        down = np.clip((start + spec.rise_s + spec.hold_s + spec.rise_s - times) / spec.rise_s, 0.0, 1.0)
        out += extra * np.minimum(up, down)
    return np.maximum(out * (1.0 + spec.noise * rng.standard_normal(len(times))), 0.0)


def make(specs: dict[str, Bursts], hours: float, step_s: float = 60.0, seed: int = 0) -> Trace:
    """A trace of `hours`, one column per spec, reproducible from `seed`."""
    rng = np.random.default_rng(seed)
    times = np.arange(int(hours * 3600 / step_s), dtype=float) * step_s
    return Trace(f"bursts-seed{seed}.csv", times, {w: rates(s, times, rng) for w, s in specs.items()}, step_s)


def write(trace: Trace, out: Path) -> None:
    with out.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["time_s", *trace.names])
        for i, t in enumerate(trace.times):
            w.writerow([f"{t:g}", *(f"{trace.rates[n][i]:.3f}" for n in trace.names)])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--hours", type=float, default=8.0)
    ap.add_argument("--step", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--spec", action="append", default=[], help="name:period_s (default a:3600)")
    ap.add_argument("--jitter", type=float, default=Bursts.jitter_s)
    ap.add_argument("--amplitude", type=float, default=Bursts.amplitude)
    ap.add_argument("--rise", type=float, default=Bursts.rise_s)
    ap.add_argument("--hold", type=float, default=Bursts.hold_s)
    ap.add_argument("--noise", type=float, default=Bursts.noise)
    ap.add_argument("--base", type=float, default=Bursts.base_rps)
    args = ap.parse_args()
    specs = {}
    for item in args.spec or ["a:3600"]:
        name, _, period = item.partition(":")
        p = float(period)
        specs[name] = Bursts(p, p / 3, args.jitter, args.amplitude, args.rise, args.hold, args.base, args.noise)
    write(make(specs, args.hours, args.step, args.seed), args.out)


if __name__ == "__main__":
    main()
