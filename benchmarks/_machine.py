"""What machine a benchmark ran on, printed with every result, and the revision it ran."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path


def describe() -> str:
    cpu = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            cpu = next(line.split(":", 1)[1].strip() for line in fh if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{cpu}, {os.cpu_count()} logical CPUs, Python {platform.python_version()}, {platform.system()}"


def commit() -> str:
    """The checkout's short commit hash (call it before running: what runs is what was checked out)."""
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True)
    return done.stdout.strip() or "unknown"
