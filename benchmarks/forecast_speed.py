"""CPU of `forecast: auto`'s period finder per workload per tick (issue 52's budget: <= 50 ms a
tick for 1,000 workloads on average, the refits amortised).

1,000 workloads, each a day of 1-minute rows from benchmarks/burst_traces.py (a third with an
hourly burst, a third half-hourly, a third noise only): one refit of every workload
(core/capacity/periods.py: decompose, the hourly part) and one tick's lookups (Fit.rise), timed
with process CPU time. The per-tick average is lookups + refits / (refit_s / interval_s). The
store's read of the day (loop/tick/tuning.py, once per refit) is not in it: it is SQLite's, and
the same read `seasonal` makes in pieces.

    python benchmarks/forecast_speed.py [--workloads 1000] [--interval 30]

Writes benchmarks/results/forecast_speed.json.
"""

from __future__ import annotations

import argparse
import time

from _results import Results
from burst_traces import Bursts, make

from autoscaler.core.capacity.periods import PeriodConfig, decompose


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
    out = {
        "workloads": args.workloads,
        "interval_s": args.interval,
        "refit_all_s": round(refit, 3),
        "refit_per_workload_ms": round(1e3 * refit / args.workloads, 3),
        "tick_lookups_ms": round(1e3 * tick, 3),
        "tick_average_ms": round(1e3 * (tick + refit / per_refit), 2),
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
