"""Fault injection points for crash-recovery tests. Unset in production; costs one environment lookup.

`IGNITER_FAULT=<point>` makes the process SIGKILL itself when it reaches that point, e.g.
`after_launch` (the provider returned an instance, nothing recorded yet). Points named `slow_*`
sleep IGNITER_FAULT_SLEEP_S seconds (default 3) instead, to catch a tick in progress: they log
`fault point <name>: holding` as they start, so a test waits on that line, not on a guess; with
IGNITER_FAULT_RELEASE=<file> they hold until that file exists (IGNITER_FAULT_SLEEP_S at most), so
a test decides when the tick goes on whatever the machine's load;
`slow_send` sleeps just before the lease check that every mutating AWS request passes as it is
sent (loop/service/fence.py's bind_aws): after the tick's own fence check, so a leader held there past
its lease shows that the request is refused, not sent (docs/operations.md).

`IGNITER_CALL_LOG=<file>` appends one JSON line per mutating call that passed the leader fence
(loop/service/fence.py): time, pid, what, and the fencing token it went out under. Lease tests count
each process's calls with it.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import time

log = logging.getLogger(__name__)

POINTS = (
    "after_launch",
    "after_terminate",
    "before_terminate",  # a record moved to TERMINATING, its TerminateInstances not yet sent
    "before_return",  # a record moved to TERMINATING for the warm pool, its pool return not yet sent
    "after_apply",
    "slow_act",
    "slow_send",
    "after_claim",  # a warm-pool member tagged for its slot, not yet started
    "after_start",  # a warm-pool member claimed and started, nothing recorded
    "after_stop",  # a warm-pool member stopped
    "after_pool_launch",  # a warm-pool member launched, its intent not yet cleared
    "after_return",  # a retiring instance re-tagged as a warm-pool member, not yet stopped
)


def point(name: str) -> None:
    if os.environ.get("IGNITER_FAULT") != name:
        return
    if name.startswith("slow_"):
        _hold(name, float(os.environ.get("IGNITER_FAULT_SLEEP_S", "3")), os.environ.get("IGNITER_FAULT_RELEASE"))
        return
    os.kill(os.getpid(), signal.SIGKILL)


def _hold(name: str, seconds: float, release: str | None) -> None:
    """Sleep `seconds`, or until the file `release` exists when one is named (`seconds` at most)."""
    log.warning("fault point %s: holding", name)
    if release is None:
        time.sleep(seconds)
        return
    deadline = time.monotonic() + seconds
    while not os.path.exists(release) and time.monotonic() < deadline:
        time.sleep(0.05)


def record(kind: str, target: str, token: int) -> None:
    path = os.environ.get("IGNITER_CALL_LOG")
    if not path:
        return
    line = json.dumps({"t": time.time(), "pid": os.getpid(), "kind": kind, "target": target, "token": token})
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, (line + "\n").encode())  # one write of an O_APPEND file: lines never interleave
    finally:
        os.close(fd)
