"""docs/simulate.md's first example, run as a user types it: `igniter simulate
policies/servegen-sim.yaml --trace traces/servegen-3models-wide.csv`, its console output (100
columns, as on a wide terminal) kept as the block the doc embeds, and the same command with
`--json` for the figures the doc's prose quotes. Writes benchmarks/results/simulate_example.json.
Two replays of 14 days: about a minute of an idle CPU.

    nice .venv/bin/python benchmarks/simulate_example.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from _results import ROOT, Results

COMMAND = ["simulate", "policies/servegen-sim.yaml", "--trace", "traces/servegen-3models-wide.csv"]


def igniter(command: list[str], *extra: str) -> subprocess.CompletedProcess[str]:
    """`igniter COMMAND EXTRA` as a user runs it, on a 100-column terminal."""
    script = Path(sys.executable).parent / "igniter"
    argv = [str(script)] if script.exists() else [sys.executable, "-m", "autoscaler.cli"]
    env = {**os.environ, "COLUMNS": "100", "TERM": "dumb"}
    done = subprocess.run([*argv, *command, *extra], cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"igniter {' '.join(command)} exited {done.returncode}: {done.stderr}")
    return done


def console(command: list[str], shown: subprocess.CompletedProcess[str], rows: set[str] | None = None) -> list[str]:
    """The console block a doc embeds: the command and what it printed, or with `rows` only the
    command, `...` and the summary table's rows of those names (a long command folded after its
    trace, as the docs show it)."""
    said = [line for line in shown.stderr.splitlines() if not line.startswith("simulating ")]
    table = [line.rstrip() for line in shown.stdout.rstrip("\n").splitlines()]
    if rows is None:
        return ["```console", "$ igniter " + " ".join(command), *said, *table, "```"]
    kept = [line for line in table if line.startswith("│") and line.split("│")[1].strip() in rows]
    head = f"$ igniter {' '.join(command[:4])} \\\n    {' '.join(command[4:])}"
    return ["```console", *head.split("\n"), "...", *kept, "```"]


def main() -> None:
    out = Results("simulate_example", "python benchmarks/simulate_example.py")
    out.doc["tables"]["console"] = console(COMMAND, igniter(COMMAND))
    s = json.loads(igniter(COMMAND, "--json").stdout)
    columns = (ROOT / COMMAND[3]).read_text().split("\n", 1)[0].split(",")
    pairs = s["steps"] * (len(columns) - 1)  # (row, workload) pairs: the trace's rate columns
    out.doc["summary"] = s
    out.figure("cost_vs_static_peak_pct", s["cost_vs_static_peak"] * 100)
    out.figure("shortfall_steps", s["shortfall_steps"])
    out.figure("pairs", pairs)
    out.figure("short_pct", s["shortfall_steps"] / pairs * 100)
    out.figure("surge_launches", s["surge_launches"])
    out.figure("surge_cost_pct", s["surge_cost_fraction"] * 100)
    print("\n".join(out.doc["tables"]["console"]))
    out.write()


if __name__ == "__main__":
    main()
