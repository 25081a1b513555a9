"""What machine a benchmark ran on, printed with every result, and the revision it ran."""

from __future__ import annotations

import json
import os
import platform
import subprocess
from pathlib import Path
from typing import Any


def describe() -> str:
    cpu = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            cpu = next(line.split(":", 1)[1].strip() for line in fh if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{cpu}, {os.cpu_count()} logical CPUs, Python {platform.python_version()}, {platform.system()}"


def commit(root: Path | None = None) -> str:
    """The checked-out commit (what runs is what was checked out at the start)."""
    root = root or Path(__file__).resolve().parent.parent
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def write_result(path: Path, doc: dict[str, Any]) -> None:
    """A results file (benchmarks/results/README.md) and, on stdout, its table and quoted figures."""
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    print("\n".join(doc["table"]))
    print(json.dumps(doc["quoted"], indent=1))
