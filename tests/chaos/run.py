"""`make chaos`: the probes of tests/chaos repeated (CHAOS_TRIALS, default 20: paused-leader
trials, gateway kills), bounded in time, on loopback; then one summary of what they counted:
duplicates, orphans, failed requests, tracebacks. Exit 1 when a probe failed.

    .venv/bin/python -m tests.chaos.run [--trials N] [--timeout S]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--timeout", type=int, default=1800, help="seconds for the whole run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "chaos.jsonl"
        env = {**os.environ, "CHAOS_TRIALS": str(args.trials), "CHAOS_REPORT": str(report)}
        cmd = [sys.executable, "-m", "pytest", "tests/chaos", "-m", "chaos", "-q", "-p", "no:randomly", "-n", "0"]
        try:
            done = subprocess.run(cmd, cwd=ROOT, env=env, timeout=args.timeout, check=False)
            code = done.returncode
        except subprocess.TimeoutExpired:
            print(f"chaos: stopped after {args.timeout} s", file=sys.stderr)
            code = 1
        rows = [json.loads(line) for line in report.read_text().splitlines()] if report.exists() else []
    print(json.dumps(summary(rows), indent=1))
    return 0 if code == 0 else 1


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Sums per probe (numbers only); bad inputs as their exit codes and tracebacks."""
    out: dict[str, Any] = defaultdict(lambda: defaultdict(float))
    for row in rows:
        probe = row.pop("probe")
        row.pop("at", None)
        if probe == "bad_input":
            out[probe][row["case"]] = {"exit_code": row["exit_code"], "tracebacks": row["tracebacks"]}
            continue
        for key, value in row.items():
            if isinstance(value, int | float):
                out[probe][key] = max(out[probe][key], value) if key.endswith("_max") else out[probe][key] + value
    return {k: dict(v) for k, v in out.items()}


if __name__ == "__main__":
    sys.exit(main())
