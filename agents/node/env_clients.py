"""How the CPU stand-ins for MPS and MIG (mps_fake.py, mig_fake.py) find the processes that use a
GPU resource: by the environment CUDA reads when a process starts, as the driver knows its clients.

An exec'd server's environment is in /proc/PID/environ. A server forked from the zygote
(zygote.py) shows the zygote's there, so its own is read where it states it: its stats file's
`gpu_env` (agents/server/app.py), trusted only while that pid's command line still names the file
(a stats file outlives its server, and pids are reused).
"""

from __future__ import annotations

import os
from pathlib import Path

from agents.fsutil import read_json


def processes_with(key: str, value: str, run_dir: Path) -> list[int]:
    """Processes (those this user may read) whose `key` is `value`; servers' stats under `run_dir`."""
    want = f"{key}={value}".encode()
    found = set(_stated(key, value, run_dir))
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                env = (entry / "environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if want in env:
                found.add(int(entry.name))
    return sorted(found)


def _stated(key: str, value: str, run_dir: Path) -> list[int]:
    out = []
    for stats in run_dir.glob("*.stats.json"):
        doc = read_json(stats)
        env = doc.get("gpu_env") if isinstance(doc, dict) else None
        pid = doc.get("pid") if isinstance(doc, dict) else None
        if isinstance(env, dict) and env.get(key) == value and isinstance(pid, int) and _names(pid, stats):
            out.append(pid)
    return out


def _names(pid: int, stats: Path) -> bool:
    """Whether `pid`'s command line still names its stats file (it is that server)."""
    try:
        return os.fsencode(str(stats)) in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
