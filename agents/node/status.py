"""Reading the agent's status (for `igniter-agent status`) and waiting on it (for `apply --wait`).

The daemon writes status.json atomically (temp file + rename) every loop, and a heartbeat thread
rewrites it with a fresh `heartbeat_at` while a loop is busy (agents/node/daemon.py): a reader
never sees half a document, and one whose `heartbeat_at` is old is from an agent that stopped
answering (killed, frozen). The controller reads that file directly, over its pooled SSH
connection (`cat`, no Python started on the node: autoscaler/transport/status_file.py), every
tick. This side is the command for humans: it reads the same file, plus asks the lock file
whether the agent that wrote it is still alive (pid files lie after a kill -9; locks do not). It
imports nothing heavy (not the daemon, not pydantic; rich only to render a table).
"""

from __future__ import annotations

import fcntl
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agents.fsutil import read_json

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

STATUS_FILE = "status.json"  # written by the daemon (agents/node/daemon.py) every loop
HEARTBEAT_KEY = "heartbeat_at"  # epoch seconds of the write: the daemon's loop or its heartbeat
LOCK_FILE = "agent.lock"  # held by the running daemon

EMPTY_STATUS: dict[str, Any] = {
    "generation": None,
    "gpu_available": False,
    "gpus": [],
    "servers": [],
    "agent_pid": None,
    "updated_at": None,
}


def agent_running(state_dir: Path) -> bool:
    """True while some agent holds the state directory's lock."""
    try:
        with open(state_dir / LOCK_FILE) as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(handle, fcntl.LOCK_UN)
            return False
    except OSError:
        return False


def read_status(state_dir: Path) -> dict[str, Any]:
    """The last status the agent wrote, plus `agent_running`; the empty shape when there is none."""
    status = read_json(state_dir / STATUS_FILE)
    if not isinstance(status, dict):
        status = dict(EMPTY_STATUS)
    status["agent_running"] = agent_running(state_dir)
    if not status["agent_running"]:
        for server in status.get("servers", []):  # servers never outlive their agent
            server.update(state="stopped", pid=None)
    return status


def print_status(state_dir: Path, as_json: bool) -> int:
    """`igniter-agent status [--json]`: the status as JSON, or as a table on a terminal."""
    status = read_status(state_dir)
    if as_json:
        print(json.dumps(status, indent=1, sort_keys=True))
    else:
        from rich.console import Console

        render(status, Console())
    return 0


def render(status: dict[str, Any], console: Console) -> None:
    """Human-readable status: a header line, one row per server, one per GPU."""
    age = f"{time.time() - status['updated_at']:.1f} s ago" if status.get("updated_at") else "never"
    running = "running" if status.get("agent_running") else "NOT running"
    console.print(
        f"agent {running} (pid {status.get('agent_pid')}), generation {status.get('generation')}, "
        f"device {status.get('device', '?')}, gpu_available {status.get('gpu_available')}, updated {age}"
    )
    if status.get("assignment_error"):
        console.print(f"[red]assignment rejected:[/red] {status['assignment_error']}")
    console.print(_servers_table(status.get("servers", [])))
    for gpu in status.get("gpus", []):
        console.print(
            f"GPU {gpu['index']} {gpu.get('name')}: util {gpu.get('utilization_percent')} %, "
            f"mem {gpu.get('memory_used_mb')}/{gpu.get('memory_total_mb')} MB, {gpu.get('power_w')} W, "
            f"SM {gpu.get('sm_clock_mhz')} MHz, {gpu.get('temperature_c')} C, {gpu.get('health')}"
        )


def _servers_table(servers: list[dict[str, Any]]) -> Table:
    from rich.table import Table

    columns = [
        "name",
        "state",
        "pid",
        "port",
        "restarts",
        "requests_total",
        "batches_total",
        "latency_ms_p50",
        "latency_ms_p99",
        "last_error",
    ]
    table = Table(*columns)
    for server in servers:
        table.add_row(*("" if server.get(c) is None else str(server.get(c)) for c in columns))
    return table


def wait_for(state_dir: Path, generation: int, timeout_s: float, poll_s: float = 0.2) -> tuple[bool, str]:
    """Wait until the agent runs `generation` with every server ready; (ok, why not)."""
    deadline = time.monotonic() + timeout_s
    why = "the agent has not picked it up"
    while time.monotonic() < deadline:
        status = read_status(state_dir)
        if status.get("generation") == generation:
            states = {s["name"]: s["state"] for s in status.get("servers", [])}
            failed = [name for name, state in states.items() if state == "failed"]
            if failed:
                return False, f"server(s) failed: {', '.join(failed)}"
            if all(state == "ready" for state in states.values()):
                return True, ""
            why = "servers not ready: " + ", ".join(f"{n}={s}" for n, s in states.items() if s != "ready")
        elif not status["agent_running"]:
            why = "no agent is running on this state directory"
        time.sleep(poll_s)
    return False, f"generation {generation} not ready within {timeout_s:g} s ({why})"
