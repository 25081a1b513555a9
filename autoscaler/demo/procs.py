"""Making sure the demo leaves no process behind.

Every process the demo causes (agents, their inference servers, `igniter-agent status|apply`
calls) carries the demo's private temporary directory in its command line, so the final sweep finds
exactly those by id and nothing else; this process itself is excluded.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path


def pids_with(marker: str) -> list[int]:
    """Live, non-zombie processes (other than this one) whose command line contains `marker`."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[-1].split()[0]
        except OSError:
            continue
        if marker in cmd and state != "Z":
            out.append(int(entry.name))
    return out


def sweep(marker: str, grace_s: float = 3.0) -> list[int]:
    """SIGTERM the marked processes, SIGKILL what is left after `grace_s`; returns survivors' ids."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 2.0)):
        pids = pids_with(marker)
        for pid in pids:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        _reap()
        deadline = time.monotonic() + wait
        while pids_with(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
            _reap()
    return pids_with(marker)


def _reap() -> None:
    """Collect exited children so they do not linger as zombies."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


class Watchdog:
    """If the demo overruns `limit_s` (a hung teardown), sweep the marked processes and exit hard."""

    def __init__(self, marker: str, limit_s: float, on_fire: Callable[[], None] | None = None) -> None:
        self.marker, self.on_fire = marker, on_fire
        self.timer = threading.Timer(limit_s, self._fire)
        self.timer.daemon = True

    def start(self) -> Watchdog:
        self.timer.start()
        return self

    def cancel(self) -> None:
        self.timer.cancel()

    def _fire(self) -> None:
        if self.on_fire:
            self.on_fire()
        sweep(self.marker, grace_s=1.0)
        os._exit(1)
