"""This code against an older revision on `fleet_scale_sim.py`'s replay, in one run on one machine:
the same walk of the first N workloads of random-1000.yaml, replayed by each code in turn (new,
old, new, old, ...: a slower stretch of the host falls on both; with `--side-by-side` both at once,
one per core, for runs as long as a day), in a fresh process each. Per
`--plan-on` setting: each code's CPU per tick (median of `--repeat` runs), the new code's over the
old's, and whether both replays gave the same cost and SLO attainment (a change meant to cost less
CPU must not change an answer).

Run: nice .venv/bin/python benchmarks/fleet_scale_sim_ab.py --old REV [--workloads 1000] [--rows 60]
         [--plan-on tick interval] [--repeat 3] [--side-by-side] [--write NAME]

The old revision is exported with `git archive` (fleet_scale.py's `export`) and replayed by this
checkout's fleet_scale_sim.py from its directory, as that script's docstring says. `--write NAME`
saves benchmarks/results/NAME.json: `{setting}/cpu_per_tick_s_{new,old}`, `{setting}/new_over_old`,
`{setting}/same_answers` (1 or 0) and every run's figures under `runs`.
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

from _results import Results, commit
from fleet_scale import export

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def start(root: Path, workloads: int, rows: int, plan_on: str) -> subprocess.Popen[str]:
    """One fleet_scale_sim.py replay of `root`'s code in a fresh process (`answer` reads it)."""
    cmd = [sys.executable, str(HERE / "fleet_scale_sim.py"), "--workloads", str(workloads), "--rows", str(rows)]
    cmd += ["--plan-on", plan_on, "--json"]
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.Popen(cmd, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def answer(proc: subprocess.Popen[str]) -> dict[str, Any]:
    """The replay's JSON line, once it has ended."""
    out, err = proc.communicate()
    if proc.returncode:
        last = err.strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
        raise SystemExit(f"a replay failed: {last[0]}")
    return dict(json.loads(out.strip().splitlines()[-1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old", required=True, help="the older revision replayed beside this code (git archive)")
    ap.add_argument("--workloads", type=int, default=1000)
    ap.add_argument("--rows", type=int, default=60)
    ap.add_argument("--plan-on", nargs="+", choices=["tick", "interval"], default=["tick", "interval"])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--side-by-side",
        action="store_true",
        help="run the two codes at once, one per core (a day: a slow stretch hits both)",
    )
    ap.add_argument("--write", metavar="NAME", help="save the figures to benchmarks/results/NAME.json")
    args = ap.parse_args()
    roots = {"new": ROOT, "old": export(args.old)}
    res = (
        Results(args.write, "python benchmarks/fleet_scale_sim_ab.py " + " ".join(sys.argv[1:])) if args.write else None
    )
    for setting in args.plan_on:
        runs: dict[str, list[dict[str, Any]]] = {"new": [], "old": []}
        for _ in range(args.repeat):
            procs: dict[str, subprocess.Popen[str]] = {}
            for code, root in roots.items():
                procs[code] = start(root, args.workloads, args.rows, setting)
                if not args.side_by_side:
                    runs[code].append(answer(procs.pop(code)))
            for code, proc in procs.items():
                runs[code].append(answer(proc))
            for code in roots:
                r = runs[code][-1]
                print(f"{setting:8} {code}: {r['cpu_per_tick_s']:.3f} s/tick, cost {r['cost_total_usd']}", flush=True)
        med = {code: statistics.median(r["cpu_per_tick_s"] for r in rs) for code, rs in runs.items()}
        answers = {
            code: {(r["cost_total_usd"], r["slo_attainment"], r["ticks"]) for r in rs} for code, rs in runs.items()
        }
        same = len(answers["new"] | answers["old"]) == 1
        ratio = med["new"] / med["old"]
        print(f"{setting:8} new/old {ratio:.3f} (medians {med['new']:.3f} / {med['old']:.3f}), same answers: {same}")
        if res is not None:
            res.figure(f"{setting}/cpu_per_tick_s_new", med["new"])
            res.figure(f"{setting}/cpu_per_tick_s_old", med["old"])
            res.figure(f"{setting}/new_over_old", round(ratio, 3))
            res.figure(f"{setting}/same_answers", int(same))
            res.doc.setdefault("runs", {})[setting] = runs
    if res is not None:
        res.doc.update(
            old=args.old,
            new=commit(),
            workloads=args.workloads,
            rows=args.rows,
            repeat=args.repeat,
            side_by_side=args.side_by_side,
        )
        res.write()


if __name__ == "__main__":
    main()
