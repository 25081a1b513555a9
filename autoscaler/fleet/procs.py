"""Processes on this machine that outlive `igniter run` (the local provider's agents, the local
gateway's haproxy) and are found again through a pid file.

A pid file can outlive its process and the kernel recycles pids, so a pid alone proves nothing:
`owned` also asks that the process's command line name something only ours was started with (its
state directory, its config file), and a zombie (exited, not yet reaped) counts as gone. psutil
reads /proc on Linux and the native APIs elsewhere.
"""

from __future__ import annotations

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
