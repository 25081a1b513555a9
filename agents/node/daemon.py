"""The agent loop: desired assignment -> running servers; supervise them; write status.

Each step is observe -> diff -> act -> report: read the assignment file if it changed, diff it
against the servers we run (by name; any spec change is a restart), start draining what must go,
start what must come, tick every server's state machine, and write status.json atomically.

status.json is what the controller reads each tick (a `cat` over its pooled SSH connection, no
process of ours started): written by temp file + rename, so never read half-written; on every
loop, and by a heartbeat thread while a loop is busy longer than HEARTBEAT_S (a MIG re-cut, a
slow GPU read), so `heartbeat_at` stays fresh while this process lives and goes stale when it is
killed or frozen (the controller then counts the agent silent). The last write, at shutdown,
says `agent_running: false`.

Removal is make-before-break on this side too: a removed server drains (it answers everything it
has accepted, refuses new requests, then exits) while the loop goes on, listed under `draining` and
never among `servers`, so nothing routes to it again. A new server whose port a draining one still
holds starts as soon as that one is gone. The autoscaler runs a resized server under a new name
and port beside the old one, so the old one drains while the new one already serves.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from agents.errors import InputError
from agents.fsutil import atomic_write_json, open_private
from agents.node.gpu import GpuMonitor
from agents.node.group import ServerGroup
from agents.node.mig import MigManager
from agents.node.mig_check import check_slices
from agents.node.mps import Mps
from agents.node.status import HEARTBEAT_KEY, LOCK_FILE, STATUS_FILE
from agents.node.supervisor import RestartPolicy, ServerFiles, launch_server, stop_all
from agents.node.zygote import fork_server, forks
from agents.spec import Assignment, ServerLimits, ServerSpec, SliceKey, parse_assignment

log = logging.getLogger("igniter-agent")
ASSIGNMENT_FILE = "assignment.json"
HEARTBEAT_S = 2.0  # status.json is rewritten at least this often while the agent lives


@dataclass(frozen=True)
class Changes:
    """What converging from the running set to the desired set takes, by server name."""

    start: tuple[ServerSpec, ...]
    stop: tuple[str, ...]
    restart: tuple[ServerSpec, ...]
    keep: tuple[str, ...]


def server_changes(running: Mapping[str, ServerSpec], desired: Mapping[str, ServerSpec]) -> Changes:
    """Pure: new names start, missing names stop, changed specs restart, equal specs stay put
    (a different drain_timeout_s alone is no restart: the running process does not depend on it)."""

    def same(name: str, spec: ServerSpec) -> bool:
        return name in running and running[name].restart_key() == spec.restart_key()

    return Changes(
        start=tuple(spec for name, spec in desired.items() if name not in running),
        stop=tuple(name for name in running if name not in desired),
        restart=tuple(spec for name, spec in desired.items() if name in running and not same(name, spec)),
        keep=tuple(name for name, spec in desired.items() if same(name, spec)),
    )


class AgentLocked(RuntimeError):
    """Another agent already runs on this state directory."""


def lock_state_dir(state_dir: Path) -> TextIO:
    """Hold an exclusive lock for the agent's lifetime: two agents on one directory would fight."""
    handle = os.fdopen(open_private(state_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT), "r+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "?"
        handle.close()
        raise AgentLocked(
            f"{state_dir}: another igniter-agent (pid {holder}) is running on this state directory"
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()
    return handle


class Daemon:
    """Converges and supervises; `step` is one loop iteration, `run` loops until told to stop."""

    def __init__(
        self,
        state_dir: Path,
        mps: Mps,
        gpus: GpuMonitor,
        device: str = "cpu",
        policy: RestartPolicy = RestartPolicy(),
        clock: Callable[[], float] = time.monotonic,
        limits: ServerLimits = ServerLimits(),
        mig: MigManager | None = None,
        cannot_serve: str | None = None,
        start: str = "auto",
    ) -> None:
        self.state_dir = state_dir
        self.starter = fork_server if forks(start, device) else launch_server  # zygote.STARTS
        self.mig = mig
        self.cannot_serve = cannot_serve  # why no server can run here (no torch): each one is refused
        self.limits = limits
        self.leaving: list[ServerGroup] = []
        self.mps = mps
        self.gpus = gpus
        self.device = device
        self.policy = policy
        self.clock = clock
        self.servers: dict[str, ServerGroup] = {}
        self.applied: Assignment | None = None
        self.assignment_error: str | None = None
        self._seen: tuple[int, int, int] | None = None
        self._written: tuple[dict[str, Any], float] | None = None  # the last status and when (monotonic)
        self._write_lock = threading.Lock()  # the loop and the heartbeat thread write one at a time

    def drain_timeout(self, spec: ServerSpec) -> float:
        """The assignment's drain_timeout_s for this server, else the agent's --drain-timeout."""
        return spec.drain_timeout_s if spec.drain_timeout_s is not None else self.limits.drain_timeout_s

    def launch(self, spec: ServerSpec, files: ServerFiles) -> Any:
        """Start one server with the GPU share MPS gives it (MPS is started first when needed); a
        server in a MIG slice gets the slice's MIG-<uuid> and the slice's own MPS daemon."""
        limits = self.limits.model_copy(update={"drain_timeout_s": self.drain_timeout(spec)})
        if spec.mig_slice() is not None and self.mig is not None:
            return self.starter(spec, self.mig.server_env(spec), self.device, files, limits)
        self.mps.ensure_running()
        return self.starter(spec, self.mps.server_env(spec), self.device, files, limits)

    def step(self) -> None:
        """One loop: pick up a new assignment, advance every server (draining ones too), report."""
        desired = self._read_assignment()
        if desired is not None and desired != self.applied:
            self.converge(desired)
            # Said at once: the new generation, its new servers starting. A start can block the loop
            # for seconds (the first fork waits for the zygote's imports), and meanwhile the
            # heartbeat repeats the last status: a stale one would tell the controller, and
            # `igniter-agent status`, that the assignment was never taken.
            self.write_status()
        now = self.clock()
        for server in self.leaving:
            server.tick(now)
        self.leaving = [server for server in self.leaving if server.state == "draining"]
        self._reconcile_slices()
        held = {server.spec.port for server in self.leaving if server.holds_port()}
        for server in self.servers.values():
            server.tick(now, hold=server.spec.port in held or not self._slice_ready(server.spec))
        self.write_status()

    def _reconcile_slices(self) -> None:
        """Create the assigned slices, destroy ours that no server is assigned to or still drains in."""
        if self.mig is None:
            return
        desired = {k for k in (s.mig_slice() for s in (self.applied.servers if self.applied else [])) if k}
        busy = {k for k in (s.spec.mig_slice() for s in self.leaving) if k}
        self.mig.reconcile(desired, busy)

    def _slice_ready(self, spec: ServerSpec) -> bool:
        """A server in a slice waits (starting) until its slice exists."""
        key = spec.mig_slice()
        return key is None or (self.mig is not None and self.mig.ready(key))

    def slice_servers(self) -> dict[SliceKey, list[str]]:
        """Slice -> the servers (running and draining) in it, for status."""
        out: dict[SliceKey, list[str]] = {}
        for server in [*self.servers.values(), *self.leaving]:
            key = server.spec.mig_slice()
            if key is not None:
                out.setdefault(key, []).append(server.spec.name)
        return out

    def _read_assignment(self) -> Assignment | None:
        """The assignment file, parsed only when it changed (apply renames, so the inode changes)."""
        path = self.state_dir / ASSIGNMENT_FILE
        try:
            st = path.stat()
        except FileNotFoundError:
            return None
        key = (st.st_ino, st.st_mtime_ns, st.st_size)
        if key == self._seen:
            return None
        self._seen = key
        try:
            assignment = parse_assignment(path.read_bytes(), str(path))
            if any(s.mig_slice() is not None for s in assignment.servers):
                gpus = {g.index: g for g in self.mig.inventory} if self.mig is not None else {}
                check_slices(assignment, str(path), gpus)
        except (InputError, OSError) as exc:
            if self.mig is not None and not self.mig.inventory:
                self._seen = None  # the GPUs could not be read yet: check it again next loop
            self.assignment_error = str(exc)  # keep running what we have; say why in status
            log.error(
                "assignment rejected, still running generation %s: %s", self.applied and self.applied.generation, exc
            )
            return None
        self.assignment_error = None
        return assignment

    def converge(self, desired: Assignment) -> None:
        """Stop removed and changed servers (so ports are free), then start new and changed ones.

        A server in `failed` gets a fresh start with every new assignment, even if unchanged.
        """
        running = {name: server.spec for name, server in self.servers.items()}
        changes = server_changes(running, desired.by_name())
        retry = [name for name in changes.keep if self.servers[name].state == "failed"]
        log.info(
            "generation %d: start %s, stop %s, restart %s, retry %s, keep %s",
            desired.generation,
            [s.name for s in changes.start],
            list(changes.stop),
            [s.name for s in changes.restart],
            retry,
            [n for n in changes.keep if n not in retry],
        )
        now = self.clock()
        for name in (*changes.stop, *(spec.name for spec in changes.restart), *retry):
            self._retire(self.servers.pop(name), now)
        for name in set(changes.keep) - set(retry):
            self.servers[name].spec = desired.by_name()[name]  # drain_timeout_s may have changed
        for spec in (*changes.start, *changes.restart, *(desired.by_name()[name] for name in retry)):
            server = ServerGroup(spec, self.state_dir, self.launch, self.policy, now)
            if self.cannot_serve is not None:
                server.refuse(self.cannot_serve)
            self.servers[spec.name] = server
        self.servers = {spec.name: self.servers[spec.name] for spec in desired.servers}
        self.applied = desired

    def _retire(self, server: ServerGroup, now: float) -> None:
        """Start its drain; it stays supervised (and listed as draining) until its process is gone."""
        server.drain(now, self.drain_timeout(server.spec))
        if server.state == "draining":
            self.leaving.append(server)

    def status(self) -> dict[str, Any]:
        """The document `igniter-agent status --json` prints (its top-level keys are a contract)."""
        return {
            "generation": self.applied.generation if self.applied else None,
            "gpu_available": self.device != "cpu",
            "gpus": self.gpus.read(),
            "servers": [server.describe() for server in self.servers.values()],
            "agent_pid": os.getpid(),
            "agent_running": True,
            "updated_at": time.time(),
            "device": self.device,
            "mps": self.mps.describe(),
            "assignment_error": self.assignment_error,
            "draining": [server.describe() for server in self.leaving],
            "mig": self.mig.describe(self.slice_servers()) if self.mig is not None else {"enabled": False},
        }

    def write_status(self, running: bool = True) -> None:
        """Write the current status (`running` False only for the last write, at shutdown)."""
        status = self.status()
        status["agent_running"] = running
        with self._write_lock:
            self._write(status)

    def heartbeat(self) -> None:
        """Rewrite the last status with a fresh heartbeat_at if the loop has not written it for
        HEARTBEAT_S: a loop busy in a long call is alive, a frozen or killed process is not."""
        with self._write_lock:
            if self._written is not None and time.monotonic() - self._written[1] >= HEARTBEAT_S:
                self._write(self._written[0])

    def _write(self, status: dict[str, Any]) -> None:
        status[HEARTBEAT_KEY] = time.time()
        atomic_write_json(self.state_dir / STATUS_FILE, status)
        self._written = (status, time.monotonic())

    def run(self, stop: threading.Event, interval_s: float = 0.5) -> None:
        """Loop until stop is set, then stop every server and MPS (if we started it); a heartbeat
        thread keeps status.json fresh while a loop (or the shutdown's drain) is busy."""
        done = threading.Event()
        beat = threading.Thread(target=self._beat, args=(done,), name="heartbeat", daemon=True)
        beat.start()
        try:
            while not stop.is_set():
                try:
                    self.step()
                except OSError as exc:  # e.g. a full disk: keep supervising, try again next loop
                    log.error("loop error: %s", exc)
                stop.wait(interval_s)
        finally:
            try:
                self.shutdown()
            finally:
                done.set()
                beat.join()

    def _beat(self, done: threading.Event) -> None:
        while not done.wait(HEARTBEAT_S / 2):
            try:
                self.heartbeat()
            except OSError as exc:
                log.error("heartbeat: %s", exc)

    def shutdown(self) -> None:
        """No server outlives the agent: drain all (bounded), SIGKILL stragglers, record them stopped."""
        log.info("stopping %d server(s)", len(self.servers) + len(self.leaving))
        stop_all(
            [m for g in [*self.servers.values(), *self.leaving] for m in g.members], self.drain_timeout, self.clock
        )
        self.leaving = []
        self.mps.stop()
        if self.mig is not None:
            self.mig.stop()
        self.write_status(running=False)
        self.gpus.close()
