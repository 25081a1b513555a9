"""One supervised inference server: start it, notice it crash, restart it with backoff, or give up.

States: starting -> ready (the server's stats file says so) -> crashed -> starting again after the
backoff (1 s, doubling, at most 30 s) ... -> failed after 5 crashes in 5 minutes, until the next
assignment. A server the assignment drops goes draining -> stopped: SIGTERM makes it refuse new
requests and answer those it holds; it is SIGKILLed only if it is still there a grace period after
its drain timeout. stopped is where the daemon leaves it on purpose.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from agents import logs
from agents.fsutil import open_private, private_dir, read_json
from agents.spec import ServerLimits, ServerSpec

log = logging.getLogger("igniter-agent")
PR_SET_PDEATHSIG = 1
STATES = ("starting", "ready", "failed", "draining", "stopped")
KILL_GRACE_S = 10.0  # after its drain timeout a server still stops its batcher and closes connections
LOG_ROTATE_BYTES = 5 * 2**20

_LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True) if sys.platform == "linux" else None


def die_with_parent() -> None:
    """preexec_fn: the kernel SIGKILLs the server when the agent dies, even by kill -9.

    libc is loaded before the fork, so the child only makes one system call here.
    """
    if _LIBC is not None:
        _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


@dataclass(frozen=True)
class RestartPolicy:
    """Crash handling: exponential backoff, and a crash budget per time window."""

    initial_backoff_s: float = 1.0
    max_backoff_s: float = 30.0
    crash_limit: int = 5
    window_s: float = 300.0

    def delay_after(self, crash_times: list[float], now: float) -> float | None:
        """Seconds to wait before the next start, or None when the server is to be marked failed."""
        recent = [t for t in crash_times if now - t <= self.window_s]
        if len(recent) >= self.crash_limit:
            return None
        return min(self.max_backoff_s, self.initial_backoff_s * 2 ** max(0, len(recent) - 1))


@dataclass(frozen=True)
class ServerFiles:
    """Where one server's stats and log live inside the agent's state directory."""

    stats: Path
    log: Path

    @classmethod
    def under(cls, state_dir: Path, name: str) -> ServerFiles:
        return cls(state_dir / "run" / f"{name}.stats.json", state_dir / "logs" / f"{name}.log")


def server_args(limits: ServerLimits) -> list[str]:
    """The limits as the server's flags (agents/server/main.py)."""
    return [
        "--read-timeout",
        f"{limits.read_timeout_s:g}",
        "--idle-timeout",
        f"{limits.idle_timeout_s:g}",
        "--max-connections",
        str(limits.max_connections),
        "--max-header-kb",
        str(limits.max_header_kb),
        "--drain-timeout",
        f"{limits.drain_timeout_s:g}",
        "--max-request-items",
        str(limits.max_request_items),
    ]


def server_argv(spec: ServerSpec, device: str, files: ServerFiles, limits: ServerLimits) -> list[str]:
    """`python -m agents.server`'s arguments for one spec, less `--parent-pid` (the starter adds it)."""
    return [
        "--spec",
        spec.model_dump_json(),
        "--device",
        device,
        "--stats-file",
        str(files.stats),
        "--log-format",
        logs.current_format(),  # the agent's own: one format on the whole node
        *server_args(limits),
    ]


def prepare_files(files: ServerFiles) -> None:
    """Before a start: no stale stats file (readiness is read from it) and the log rotated."""
    private_dir(files.stats.parent)
    files.stats.unlink(missing_ok=True)
    _rotate(files.log)


def launch_server(
    spec: ServerSpec, env: dict[str, str], device: str, files: ServerFiles, limits: ServerLimits = ServerLimits()
) -> subprocess.Popen:
    """Start `python -m agents.server` for one spec, a new interpreter; output goes to its log file."""
    prepare_files(files)
    cmd = [
        sys.executable,
        "-m",
        "agents.server",
        *server_argv(spec, device, files, limits),
        "--parent-pid",
        str(os.getpid()),
    ]
    with os.fdopen(open_private(files.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND), "ab") as log:
        return subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **env},
            preexec_fn=die_with_parent,
            start_new_session=True,
        )


def _rotate(log: Path) -> None:
    """Keep one previous log; a crash-looping server must not fill the disk."""
    if log.exists() and log.stat().st_size > LOG_ROTATE_BYTES:
        log.replace(log.with_suffix(".log.1"))


def last_line(path: Path, tail_bytes: int = 4096) -> str | None:
    """The last non-empty line of a log (what a crashing server said last; a JSON line's message)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(max(0, path.stat().st_size - tail_bytes))
            lines = handle.read().decode(errors="replace").splitlines()
    except OSError:
        return None
    lines = [line.strip() for line in lines if line.strip()]
    return logs.message_of(lines[-1]) if lines else None


def describe_exit(returncode: int, detail: str | None) -> str:
    """`killed by SIGKILL` or `exited with code 1: <what it said>`."""
    if returncode < 0:
        try:
            how = f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            how = f"killed by signal {-returncode}"
    else:
        how = f"exited with code {returncode}"
    return f"{how}: {detail}" if detail and returncode > 0 else how


class ServerProcess(Protocol):
    """What the supervisor reads of a started server: a Popen (an exec'd server) or a
    zygote.ForkedServer (a forked one) says it alike. `returncode` and `poll()`: None while it
    runs, its exit code, or minus the signal that killed it; `wait` raises
    subprocess.TimeoutExpired when the timeout passes first."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def terminate(self) -> None: ...

    def kill(self) -> None: ...


Starter = Callable[[ServerSpec, ServerFiles], ServerProcess]


class ManagedServer:
    """The agent's view of one server process across its restarts."""

    def __init__(
        self, spec: ServerSpec, files: ServerFiles, launch: Starter, policy: RestartPolicy, now: float
    ) -> None:
        self.spec = spec
        self.files = files
        self._launch = launch
        self._policy = policy
        self.state = "starting"
        self.proc: ServerProcess | None = None
        self.restarts = 0
        self.crash_times: list[float] = []
        self.last_error: str | None = None
        self.stats: dict[str, Any] = {}
        self.next_start_at: float | None = now
        self.kill_at: float | None = None
        self._started_once = False

    def tick(self, now: float, hold: bool = False) -> None:
        """Advance the state machine: start when due (unless `hold`: its port is still being drained
        by another process), notice exits, pick up readiness and stats."""
        if self.state == "draining":
            self._drain_tick(now)
            return
        if self.state in ("failed", "stopped"):
            return
        if self.proc is None:
            if self.next_start_at is not None and now >= self.next_start_at and not hold:
                self._start(now)
            return
        returncode = self.proc.poll()
        if returncode is None:
            self._refresh_stats()
        else:
            self._crashed(now, describe_exit(returncode, self._crash_detail()))

    def refuse(self, reason: str) -> None:
        """Never start: what every server needs is missing on this VM. Failed at once, with the reason
        in status, instead of a crash loop that ends in the same place with a less useful message."""
        self.state, self.next_start_at, self.last_error = "failed", None, reason

    def _start(self, now: float) -> None:
        if self._started_once:
            self.restarts += 1
        self._started_once = True
        self.stats, self.state, self.next_start_at = {}, "starting", None
        try:
            self.proc = self._launch(self.spec, self.files)
        except Exception as exc:  # MPS down, binary missing, fork failure: a failed start, retried
            self._crashed(now, f"could not start: {exc}")
            return
        log.info("server %s: started, pid %d (log %s)", self.spec.name, self.proc.pid, self.files.log)

    def _refresh_stats(self) -> None:
        """The server's own stats file is the source of readiness and counters."""
        stats = read_json(self.files.stats)
        if isinstance(stats, dict) and self.proc is not None and stats.get("pid") == self.proc.pid:
            self.stats = stats
            if stats.get("ready") and self.state == "starting":
                self.state = "ready"
                log.info("server %s: ready on %s:%d", self.spec.name, self.spec.host, self.spec.port)

    def _crash_detail(self) -> str | None:
        stats = read_json(self.files.stats)
        if isinstance(stats, dict) and stats.get("error"):
            return str(stats["error"])
        return last_line(self.files.log)

    def _crashed(self, now: float, message: str) -> None:
        """Record the crash; schedule the restart, or mark failed when the crash budget is spent."""
        self.proc = None
        self.last_error = message
        self.crash_times.append(now)
        delay = self._policy.delay_after(self.crash_times, now)
        if delay is None:
            self.state, self.next_start_at = "failed", None
            log.error(
                "server %s: %s; failed after %d crashes, waiting for a new assignment",
                self.spec.name,
                message,
                len(self.crash_times),
            )
        else:
            self.state, self.next_start_at = "starting", now + delay
            log.warning("server %s: %s; restarting in %.1f s", self.spec.name, message, delay)

    def drain(self, now: float, timeout_s: float) -> None:
        """Stop gracefully: SIGTERM now (the server drains), SIGKILL if still there after the grace."""
        self.next_start_at = None
        if self.proc is None or self.proc.poll() is not None:
            self._reap()
            return
        self.state, self.kill_at = "draining", now + timeout_s + KILL_GRACE_S
        self.proc.terminate()
        log.info("server %s: draining (at most %.0f s)", self.spec.name, timeout_s)

    def _drain_tick(self, now: float) -> None:
        assert self.proc is not None
        if self.proc.poll() is not None:
            log.info("server %s: drained, %s", self.spec.name, describe_exit(self.proc.returncode, None))
            self._reap()
            return
        self._refresh_stats()
        if self.kill_at is not None and now >= self.kill_at:
            log.warning("server %s: still running past its drain timeout; SIGKILL", self.spec.name)
            self.proc.kill()
            self.kill_at = None

    def _reap(self) -> None:
        if self.proc is not None:
            self.proc.wait()
        self.proc, self.state, self.kill_at = None, "stopped", None

    def holds_port(self) -> bool:
        """A draining process still has its port bound."""
        return self.state == "draining" and self.proc is not None

    def terminate(self) -> None:
        """Ask the server to finish (SIGTERM); `wait_stopped` completes the stop."""
        self.state = "stopped"
        self.next_start_at = None
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()

    def wait_stopped(self, deadline: float) -> None:
        """Wait until the deadline (monotonic), then SIGKILL; always reaps the process."""
        if self.proc is None:
            return
        try:
            self.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def describe(self) -> dict[str, Any]:
        """The per-server entry of `status --json`."""
        spec, stats = self.spec, self.stats
        return {
            "name": spec.name,
            "workload": spec.workload,
            "state": self.state,
            "pid": self.proc.pid if self.proc is not None else None,
            "host": spec.host,
            "port": spec.port,
            "batch": spec.batch,
            "mps_percent": spec.mps_percent,
            "gpu_index": spec.gpu_index,
            "mig_profile": spec.mig_profile,
            "mig_start": spec.mig_start,
            "device": stats.get("device"),
            "gpu_env": stats.get("gpu_env"),
            "restarts": self.restarts,
            "requests_total": stats.get("requests_total", 0),
            "items_total": stats.get("items_total", 0),
            "batches_total": stats.get("batches_total", 0),
            "errors_total": stats.get("errors_total", 0),
            "latency_ms_p50": stats.get("latency_ms_p50"),
            "latency_ms_p99": stats.get("latency_ms_p99"),
            "compute_ms_p50": stats.get("compute_ms_p50"),
            "started_at": stats.get("started_at"),
            "last_error": self.last_error,
            "in_flight": stats.get("in_flight", 0),
        }


def stop_all(
    servers: list[ManagedServer],
    timeout_for: Callable[[ServerSpec], float],
    clock: Callable[[], float] = time.monotonic,
    poll_s: float = 0.05,
) -> None:
    """Drain every server at once and wait until all are gone (each SIGKILLed past its own bound)."""
    for server in servers:
        if server.state != "draining":
            server.drain(clock(), timeout_for(server.spec))
    while any(server.state == "draining" for server in servers):
        time.sleep(poll_s)
        for server in servers:
            server.tick(clock())
