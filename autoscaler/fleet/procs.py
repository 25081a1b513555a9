"""Processes on this machine that outlive `igniter run` (the local provider's agents, the local
gateway's haproxy) and are found again through a pid file.

A pid file can outlive its process and the kernel recycles pids, so a pid alone proves nothing:
`owned` also asks that the process's command line name something only ours was started with (its
state directory, its config file), and a zombie (exited, not yet reaped) counts as gone. psutil
reads /proc on Linux and the native APIs elsewhere.
"""

from __future__ import annotations

import os
from pathlib import Path

import psutil


def alive(pid: int) -> bool:
    """Whether `pid` is a running process (not a zombie)."""
    if pid <= 0:
        return False
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def owned(pid: int, marker: str) -> bool:
    """Whether `pid` is running and `marker` is on its command line: ours, not a recycled pid."""
    if not alive(pid):
        return False
    try:
        return marker in " ".join(psutil.Process(pid).cmdline())
    except psutil.Error:
        return False


def find_owned(marker: str) -> int | None:
    """The oldest running process whose command line names `marker` (a state directory only one
    agent is ever started with): how a process whose pid was never written down is found again."""
    found: list[tuple[float, int]] = []
    for proc in psutil.process_iter(["pid", "cmdline", "create_time", "status"]):
        info = proc.info
        if info.get("status") == psutil.STATUS_ZOMBIE or marker not in " ".join(info.get("cmdline") or ()):
            continue
        found.append((float(info.get("create_time") or 0.0), int(info["pid"])))
    return min(found)[1] if found else None


def private_dirs(path: Path, mode: int = 0o700) -> None:
    """`mkdir -p` where every directory it creates gets `mode` (Path.mkdir(parents=True) gives
    the parents it creates the umask's 0755, whatever mode says); existing ones are left alone."""
    missing = []
    for parent in (path, *path.parents):
        if parent.exists():
            break
        missing.append(parent)
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=mode)
        except FileExistsError:
            continue
        os.chmod(directory, mode)  # mkdir's mode is masked by the umask
