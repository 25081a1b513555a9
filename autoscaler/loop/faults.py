"""Fault injection points for crash-recovery tests. Unset in production; costs one environment lookup.

`IGNITER_FAULT=<point>` makes the process SIGKILL itself when it reaches that point, e.g.
`after_launch` (the provider returned an instance, nothing recorded yet). Points named `slow_*`
sleep IGNITER_FAULT_SLEEP_S seconds (default 3) instead, to catch a tick in progress.
"""

from __future__ import annotations

import os
import signal
import time

POINTS = ("after_launch", "after_terminate", "after_apply", "slow_act")


def point(name: str) -> None:
    if os.environ.get("IGNITER_FAULT") != name:
        return
    if name.startswith("slow_"):
        time.sleep(float(os.environ.get("IGNITER_FAULT_SLEEP_S", "3")))
        return
    os.kill(os.getpid(), signal.SIGKILL)
