"""Fault injection points for crash-recovery tests: `IGNITER_FAULT=<point>` makes the process
SIGKILL itself when it reaches that point (e.g. `after_launch`: the provider returned an
instance, nothing recorded yet). Unset in production; costs one environment lookup."""

from __future__ import annotations

import os
import signal

POINTS = ("after_launch", "after_terminate", "after_apply")


def point(name: str) -> None:
    if os.environ.get("IGNITER_FAULT") == name:
        os.kill(os.getpid(), signal.SIGKILL)
