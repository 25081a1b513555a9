"""Where a benchmark writes what the docs quote: benchmarks/results/NAME.json.

A `Results` collects the figures (`figure`) and the markdown tables (`line`: printed as it is
produced, and kept if it is a table row) of one run, and `write` saves them with the machine, the
commit checked out when the run started, the date and the load average, so a quoted figure can be
traced to the run that produced it. tests/test_docs.py compares README.md and docs/*.md with the
files (benchmarks/results/README.md: the marker convention).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _machine import describe

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"


def commit() -> str:
    """The checkout's commit (with `+dirty` when code it runs differs from it; docs may)."""
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no", "--", "autoscaler", "agents", "benchmarks/*.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    return (head.stdout.strip() or "unknown") + ("+dirty" if dirty.stdout.strip() else "")


class Results:
    """One benchmark run's quoted figures and tables."""

    def __init__(self, name: str, command: str) -> None:
        self.path = RESULTS / f"{name}.json"
        self.started = time.perf_counter()
        self.doc: dict[str, Any] = {
            "command": command,
            "machine": describe(),
            "commit": commit(),  # what runs is what was checked out at the start
            "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "load_average_start": round(os.getloadavg()[0], 1),
            "figures": {},
            "tables": {},
        }

    def figure(self, key: str, value: float | int) -> float | int:
        """Keep one quoted number (rounded to 6 places: the docs show fewer)."""
        self.doc["figures"][key] = round(value, 6) if isinstance(value, float) else value
        return value

    def line(self, table: str, text: str = "") -> None:
        """Print one line of output; a markdown table row is also kept under `tables.<table>`."""
        print(text)
        if text.startswith("|"):
            self.doc["tables"].setdefault(table, []).append(text)

    def write(self) -> None:
        self.doc["wall_seconds"] = round(time.perf_counter() - self.started, 1)
        self.doc["cpu_seconds"] = round(time.process_time(), 1)
        self.doc["load_average_end"] = round(os.getloadavg()[0], 1)
        RESULTS.mkdir(exist_ok=True)
        self.path.write_text(json.dumps(self.doc, indent=1, sort_keys=True) + "\n")
        print(f"wrote {self.path.relative_to(ROOT)}")
