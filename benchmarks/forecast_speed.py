"""CPU of `forecast: auto`'s period finder per workload per tick (issue 52's budget: <= 50 ms a
tick for 1,000 workloads on average, the refits amortised).

1,000 workloads, each a day of 1-minute rows from benchmarks/burst_traces.py (a third with an
hourly burst, a third half-hourly, a third noise only): one refit of every workload
(core/capacity/periods.py: decompose, the hourly part) and one tick's lookups (Fit.rise), timed
with process CPU time. The per-tick average is lookups + refits / (refit_s / interval_s) once the
histories are a day old. A young history is refit more often (periods.py: refit_after, span /
refit_growth, at least refit_min_s): `startup_average_ms` replays that schedule over the first
`--hours` (every workload starts at 0, so all are due together) and averages its refits and
lookups over those ticks. The
store's read of the day (loop/tick/tuning.py, once per refit) is not in it: it is SQLite's, and
the same read `seasonal` makes in pieces. Beside it, not in the average (it runs whatever the
forecast method): a tick of the recent-error windows (core/capacity/error_window.py), full. Nor
is scipy's import (once a process: periods.py imports it at the first refit).

    python benchmarks/forecast_speed.py [--workloads 1000] [--interval 30]

Writes benchmarks/results/forecast_speed.json.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

# here, not timed: periods.py imports these at a process's first refit (0.6 s, once a process)
import scipy.ndimage
import scipy.signal  # noqa: F401
from _results import Results
from burst_traces import Bursts, make

from autoscaler.core.capacity.error_window import WindowConfig, Windows
from autoscaler.core.capacity.periods import PeriodConfig, decompose, refit_after


def error_window_ms(workloads: int, interval: float) -> float:
    """CPU of one tick of the recent-error windows (/v1/headroom's forecast_error_1h; loop/tick/
    tuning.py: recent_errors) once every window holds its hour: add each workload's error, then
    every workload's quantiles."""
    cfg = WindowConfig(max_gap_s=180.0 + interval, first_s=interval, size=min(240, math.ceil(1.125 * 3600 / interval)))
    names = [f"w{i}" for i in range(workloads)]
    rng = np.random.default_rng(0)
    errs = [dict(zip(names, rng.normal(0.0, 0.2, workloads).tolist(), strict=True)) for _ in range(10)]
    ws = Windows().keep(names, cfg)
    for k in range(cfg.size):
        ws = ws.update(k * interval, errs[k % 10], cfg)
    t0, reps = time.process_time(), 50
    for k in range(cfg.size, cfg.size + reps):
        ws = ws.keep(names, cfg).update(k * interval, errs[k % 10], cfg)
        ws.quantiles(k * interval, cfg)
    return 1e3 * (time.process_time() - t0) / reps


def startup(histories: list[list[tuple[float, float]]], cfg: PeriodConfig, hours: float) -> tuple[float, int]:
    """CPU seconds of every refit the schedule makes over the first `hours` of the histories (each
    on the history up to then), and how many rounds of refits it made."""
    cpu, t, rounds = 0.0, 0.0, 0
    while t < hours * 3600.0:
        n = int(t // cfg.step_s) + 1
        t0 = time.process_time()
        for h in histories:
            decompose(h[:n], t, 240.0, cfg)
        cpu += time.process_time() - t0
        rounds += 1
        t += refit_after(t, cfg)
    return cpu, rounds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", type=int, default=1000)
    ap.add_argument("--interval", type=float, default=30.0)
    ap.add_argument("--hours", type=float, default=24.0)
    args = ap.parse_args()
    kinds = {"hourly": Bursts(), "half-hourly": Bursts(1800.0, 600.0), "noise": Bursts(amplitude=1.0, noise=0.1)}
    histories = []
    for i in range(args.workloads):
        kind = list(kinds)[i % 3]
        tr = make({"w": kinds[kind]}, args.hours, seed=i)
        histories.append(list(zip(tr.times.tolist(), tr.rates["w"].tolist(), strict=True)))
    cfg = PeriodConfig()
    now = args.hours * 3600.0 - 60.0
    t0 = time.process_time()
    fits = [decompose(h, now, 240.0, cfg) for h in histories]
    refit = time.process_time() - t0
    t0 = time.process_time()
    reps = 100
    for r in range(reps):
        for f in fits:
            f.rise(now + r)
    tick = (time.process_time() - t0) / reps
    per_refit = cfg.refit_s / args.interval
    errors_ms = error_window_ms(args.workloads, args.interval)
    young, rounds = startup(histories, cfg, args.hours)
    ticks = args.hours * 3600.0 / args.interval
    out = {
        "workloads": args.workloads,
        "interval_s": args.interval,
        "refit_all_s": round(refit, 3),
        "refit_per_workload_ms": round(1e3 * refit / args.workloads, 3),
        "tick_lookups_ms": round(1e3 * tick, 3),
        "tick_average_ms": round(1e3 * (tick + refit / per_refit), 2),
        "tick_error_window_ms": round(errors_ms, 2),
        "startup_refit_rounds": rounds,
        "startup_refits_s": round(young, 2),
        "startup_average_ms": round(1e3 * (tick + young / ticks), 2),
        "found": {k: sum(1 for i, f in enumerate(fits) if list(kinds)[i % 3] == k and f.periods) for k in kinds},
    }
    res = Results("forecast_speed", f"python benchmarks/forecast_speed.py --interval {args.interval:g}")
    for key, value in out.items():
        if isinstance(value, dict):
            for k, v in value.items():
                res.figure(f"found_{k}", v)
        else:
            res.figure(key, value)
        print(f"{key}: {value}")
    res.write()


if __name__ == "__main__":
    main()
