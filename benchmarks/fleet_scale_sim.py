"""CPU per tick of `igniter simulate` at fleet scale (issue 50, item 1): the first N workloads of
../shared/scenarios/random-1000.yaml (one V100 type, headroom 0.1) over R rows of 60 s whose rates
wander within +-20 % of each workload's rate (a seeded random walk). The policy subset and the trace
are written to a temp dir (nothing shared is copied into the repo); the replay runs in this process
through the CLI, as `igniter simulate POLICY --trace CSV --json` does, and the ticks it makes
(interval ticks and the early ticks a replay adds) are counted.

Run: nice .venv/bin/python benchmarks/fleet_scale_sim.py --workloads 200 400 --rows 8 [--profile OUT]

`--profile OUT` writes a cProfile of the last size to OUT (read it with pstats). `--json` prints
one line per size. Run it from an exported older revision (`git archive REV | tar -x -C DIR`, then
`cd DIR && python /path/to/fleet_scale_sim.py`) to time the code before a change the same way.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

SCENARIO = Path(__file__).resolve().parents[2] / "shared" / "scenarios" / "random-1000.yaml"


def write_inputs(tmp: Path, n: int, rows: int, seed: int, scenario: Path) -> tuple[Path, Path]:
    """The policy of the scenario's first `n` workloads (headroom 0.1) and its wandering trace."""
    doc = yaml.safe_load(scenario.read_text())
    doc["workloads"] = doc["workloads"][:n]
    doc.setdefault("scaling", {})["headroom"] = 0.1
    policy = tmp / "policy.yaml"
    policy.write_text(yaml.safe_dump(doc, sort_keys=False))
    rng = random.Random(seed)
    base = [float(w["rate_rps"]) for w in doc["workloads"]]
    level = [1.0] * n
    lines = ["time_s," + ",".join(w["name"] for w in doc["workloads"])]
    for r in range(rows):
        lines.append(f"{60 * r}," + ",".join(f"{b * f:.3f}" for b, f in zip(base, level)))
        level = [min(1.2, max(0.8, f + rng.uniform(-0.05, 0.05))) for f in level]
    trace = tmp / "trace.csv"
    trace.write_text("\n".join(lines) + "\n")
    return policy, trace


def run_one(n: int, rows: int, seed: int, scenario: Path, profile: Path | None) -> dict[str, Any]:
    """One replay: CPU seconds in all, ticks, CPU per tick, and the summary's cost and attainment."""
    from autoscaler.cli import main
    from autoscaler.sim import engine

    ticks = 0
    original = engine.Replay.tick

    def counted(self: Any, now: float, fast: bool = False) -> Any:
        nonlocal ticks
        ticks += 1
        return original(self, now, fast)

    engine.Replay.tick = counted  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory() as d:
        policy, trace = write_inputs(Path(d), n, rows, seed, scenario)
        out = io.StringIO()
        prof = cProfile.Profile() if profile else None
        cpu = time.process_time()
        with contextlib.redirect_stdout(out):
            if prof:
                prof.enable()
            code = main(["simulate", str(policy), "--trace", str(trace), "--json"])
            if prof:
                prof.disable()
        cpu = time.process_time() - cpu
    engine.Replay.tick = original  # type: ignore[method-assign]
    if prof and profile:
        prof.dump_stats(str(profile))
    summary = json.loads(out.getvalue()) if code == 0 else {}
    return {
        "workloads": n,
        "rows": rows,
        "exit": code,
        "cpu_s": round(cpu, 2),
        "ticks": ticks,
        "cpu_per_tick_s": round(cpu / max(1, ticks), 3),
        "cost_total_usd": summary.get("cost_total_usd"),
        "slo_attainment": summary.get("slo_attainment"),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workloads", type=int, nargs="+", default=[200, 400])
    ap.add_argument("--rows", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--scenario", type=Path, default=SCENARIO)
    ap.add_argument("--profile", type=Path, help="write a cProfile of the last size here")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    sys.path.insert(0, os.getcwd())  # the autoscaler of the current directory (an exported revision)
    for i, n in enumerate(args.workloads):
        last = i == len(args.workloads) - 1
        r = run_one(n, args.rows, args.seed, args.scenario, args.profile if last else None)
        if args.json:
            print(json.dumps(r), flush=True)
        else:
            print(
                f"{n:5d} workloads {r['rows']:4d} rows: {r['ticks']:4d} ticks, {r['cpu_s']:8.2f} s CPU, "
                f"{r['cpu_per_tick_s']:.3f} s/tick, cost {r['cost_total_usd']}, attainment "
                f"{r['slo_attainment']} (load {r['load_average'][0]})",
                flush=True,
            )


if __name__ == "__main__":
    main()
