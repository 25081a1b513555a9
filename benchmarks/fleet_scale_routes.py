"""What would bring issue 50's one-day replay within half an hour, measured: the first rows of
`fleet_scale_sim.py`'s walk (the first N workloads of random-1000.yaml) replayed with today's code
and with each route to a cheaper tick, alone and together, each in a fresh process, interleaved
(every route once, then again: a slower stretch of the host falls on all of them).

The routes (docs/operations.md, Fleet size):
- `interval`: `scaling.plan_on: interval`, a real setting (early ticks keep the standing layout);
- `once`: a what-if, not a setting: the trace is read once per row, as a once-a-minute datapoint
  (CloudWatch's) would be: a read within a row already reported gives nothing new, so the
  controller keeps the last value (rates/reader.py) and its forecast and headroom see no new
  sample. The replay's own rate source reads a row at every tick, as a request counter would;
- `no_stand_ins`: a what-if, not a setting: the surge allocator's scans of the ready GPUs for
  stand-ins (bursts into free share, stand-ins for blocked moves) find nothing, at no cost: the
  most that making those scans cheaper could save. It changes answers (no such stand-in starts),
  so its cost and attainment are shown beside the CPU.

A what-if is applied in the replay's process only (monkeypatching the sim's rate source or the
allocator); nothing in the product changes. Per route: CPU per tick (median of `--repeat`), its
ratio to today's (`default`), cost and attainment. The tick each route would need,
`needed_over_default`, is half an hour over the whole default day last measured
(fleet_scale_day_head.json): the ratios here are of the first rows, which cost less a tick than
the day's later hours (operations.md: the process's age or the rows?), so they say what a route
saves on those rows, not over a day.

Run: nice .venv/bin/python benchmarks/fleet_scale_routes.py [--workloads 1000] [--rows 30]
         [--repeat 3] [--write fleet_scale_routes]
(about 20 minutes on one core at the defaults)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from _results import RESULTS, Results

DAY_S = 1800.0  # issue 50: a day's replay within half an hour
ROUTES: dict[str, tuple[str, ...]] = {
    "default": (),
    "interval": ("interval",),
    "once": ("once",),
    "no_stand_ins": ("no_stand_ins",),
    "interval+once": ("interval", "once"),
    "interval+no_stand_ins": ("interval", "no_stand_ins"),
    "interval+once+no_stand_ins": ("interval", "once", "no_stand_ins"),
}


def read_once_per_row() -> None:
    """`once`: the sim's trace source reports a row only at its first read (module docstring)."""
    from autoscaler.sim import trace_rates

    read = trace_rates.TraceRates.read

    def once(self: Any, now: float, workloads: list[str] | tuple[str, ...]) -> dict[str, float | None]:
        if now >= self.times[0]:
            rows = self._rows(now)
            if getattr(self, "_rows_read", None) == rows:
                return dict.fromkeys(workloads)
            self._rows_read = rows
        return read(self, now, workloads)

    trace_rates.TraceRates.read = once  # type: ignore[method-assign]


def no_stand_in_scans() -> None:
    """`no_stand_ins`: bursts and borrowed GPUs find nothing, at no cost (module docstring)."""
    from autoscaler.core.rollout import borrowing, bursting

    bursting.Bursting._burst = lambda self, t, gap, gpu: 0.0  # type: ignore[method-assign]
    borrowing.Borrowing._borrow = lambda self, b, thr, gpu, blocked: False  # type: ignore[method-assign]


def worker(route: str, workloads: int, rows: int, seed: int) -> dict[str, Any]:
    """One replay of the walk under `route`, in this (fresh) process, of the current directory's
    code (as fleet_scale_sim.py's: run it from an exported revision to measure that one)."""
    sys.path.insert(0, os.getcwd())
    from fleet_scale_sim import SCENARIO, own_heap, run_one

    parts = ROUTES[route]
    if "once" in parts:
        read_once_per_row()
    if "no_stand_ins" in parts:
        no_stand_in_scans()
    own_heap()
    r = run_one(workloads, rows, seed, SCENARIO, None, plan_on="interval" if "interval" in parts else None)
    r.pop("windows")
    import autoscaler

    return {"route": route, "imported_from": str(Path(autoscaler.__file__).parent.parent), **r}


def spawn(route: str, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", route]
    cmd += ["--workloads", str(args.workloads), "--rows", str(args.rows), "--seed", str(args.seed)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{route}: {(done.stderr.strip().splitlines() or [f'exit {done.returncode}'])[-1]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def reference_day() -> float | None:
    """The wall time of the whole default day last measured, where its file is here."""
    path = RESULTS / "fleet_scale_day_head.json"
    return json.loads(path.read_text())["figures"].get("w1000/wall_s") if path.exists() else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workloads", type=int, default=1000)
    ap.add_argument("--rows", type=int, default=30)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--routes", nargs="+", choices=list(ROUTES), default=list(ROUTES))
    ap.add_argument("--write", metavar="NAME", help="save the figures to benchmarks/results/NAME.json")
    ap.add_argument("--worker", choices=list(ROUTES), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.workloads, args.rows, args.seed)))
        return
    routes = ["default", *[r for r in args.routes if r != "default"]]
    res = (
        Results(args.write, "python benchmarks/fleet_scale_routes.py " + " ".join(sys.argv[1:])) if args.write else None
    )
    runs: dict[str, list[dict[str, Any]]] = {r: [] for r in routes}
    for _ in range(args.repeat):
        for route in routes:
            r = spawn(route, args)
            runs[route].append(r)
            print(f"{route:28} {r['cpu_per_tick_s']:.3f} s/tick, {r['ticks']} ticks (load {r['load_average'][0]})")
    out = res.line if res is not None else (lambda _table, text="": print(text))
    out("routes", "| route | CPU a tick s | of today's | cost $ | attainment |")
    out("routes", "| --- | --- | --- | --- | --- |")
    base = statistics.median(r["cpu_per_tick_s"] for r in runs["default"])
    for route in routes:
        med = statistics.median(r["cpu_per_tick_s"] for r in runs[route])
        first = runs[route][0]
        same = len({(r["cost_total_usd"], r["slo_attainment"], r["ticks"]) for r in runs[route]}) == 1
        if not same:
            print(f"{route}: the runs gave different answers (a replay should not)")
        out(
            "routes",
            f"| {route} | {med:.3f} | {med / base:.2f} | {first['cost_total_usd']:,.2f} | {first['slo_attainment']} |",
        )
        if res is not None:
            name = route.replace("+", "-and-")  # a figure's key: the docs' markers take no "+"
            res.figure(f"{name}/cpu_per_tick_s", med)
            res.figure(f"{name}/over_default", round(med / base, 3))
            res.figure(f"{name}/cost_total_usd", first["cost_total_usd"])
            res.figure(f"{name}/slo_attainment", first["slo_attainment"])
            res.figure(f"{name}/same_answers", int(same))
    day = reference_day()
    if day:
        print(f"a day in half an hour needs {DAY_S / day:.2f} of today's tick (the default day took {day:,.0f} s)")
    if res is not None:
        if day:
            res.figure("reference_day_wall_s", day)
            res.figure("needed_over_default", round(DAY_S / day, 3))
        res.doc.update(workloads=args.workloads, rows=args.rows, repeat=args.repeat, runs=runs)
        res.write()


if __name__ == "__main__":
    main()
