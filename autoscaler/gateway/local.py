"""A local gateway: one haproxy process under the fleet's state directory.

Like local instances it outlives `igniter run`: a later run finds it through its pid file (the
process's command line must name this directory's configuration, so a recycled pid is never taken
for it) and keeps driving it; `igniter down` stops it. Files in the directory: haproxy.cfg (its
first line carries the hash of the spec it was rendered from), haproxy.pid, servers.state (the
servers' state, carried over a reload), errors/NNN.http (the JSON errorfiles, gateway/config.py) and the runtime socket admin.sock (mode 600; in a short
private directory under /tmp when the state path is too long for a unix socket).

The listening socket is created by this object's owner (`igniter run`), held for as long as it
runs and lent to haproxy (`bind fd@N`, inherited at the same descriptor number): a haproxy that
dies leaves the port open, the kernel queues new connections, and `revive` (called by the
leader's keeper, loop/service/keeper.py, the moment haproxy exits) starts a new one on the same socket,
with the servers it routed to when last observed, which accepts them (gateway/listener.py). A
later owner that finds haproxy running takes a duplicate of the socket from it (`_adopt`).
Binding checks the address as haproxy would (SO_REUSEADDR: connections of a dead gateway in
TIME_WAIT do not count as "another process"; haproxy is told `noreuseport`, so a second gateway
cannot silently share a port either). The configuration is validated with `haproxy -c` before
`haproxy -D` starts it. A reload renders the servers that run now into the new configuration,
saves their state, and starts the new process on the same held socket, with `-x` (it takes the
runtime socket over; without a held socket, the listeners too) and `-sf` (the old one finishes
its requests, then exits): no connection is refused or dropped. `stop` and a start that failed
close the held socket, and the port with it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from autoscaler.core.routing.routes import GatewayView, Op, Route, ServerSeen
from autoscaler.fleet.procs import alive, owned, private_dirs
from autoscaler.gateway import listener, runtime
from autoscaler.gateway.base import GatewayError, GatewaySpec, route_one, spec_hash
from autoscaler.gateway.config import Paths, error_files, render

log = logging.getLogger(__name__)
MAX_SOCKET_PATH = 97  # haproxy's own limit for a `stats socket` path (sun_path holds 108 bytes)


class LocalHaproxy:
    """The Gateway contract (gateway/base.py) for a haproxy process on this machine."""

    def __init__(self, state_dir: Path, command: str = "haproxy", stop_timeout_s: float = 10.0) -> None:
        self.dir = state_dir.expanduser().resolve()
        self.command = command
        self.stop_timeout_s = stop_timeout_s
        self.cfg = self.dir / "haproxy.cfg"
        self.pidfile = self.dir / "haproxy.pid"
        self.paths = Paths(
            socket=str(socket_path(self.dir)),
            state_file=str(self.dir / "servers.state"),
            errors=str(self.dir / "errors"),
        )
        self.channel = runtime.UnixSocketChannel(self.paths.socket)
        self._spec: GatewaySpec | None = None
        self._seen: GatewayView | None = None  # the last observation: what a restart routes to at once
        self._listener: socket.socket | None = None  # the listening socket this process holds (listener.py)
        self._unheld_warned = False
        self._lock = threading.RLock()  # the tick (ensure) and the keeper's thread (revive) both start it

    # -- the contract -----------------------------------------------------------------------------
    def ensure(self, spec: GatewaySpec) -> bool:
        with self._lock:
            pid = self.pid()
            if pid is not None and self._rendered_for() == spec_hash(spec):
                self._spec = spec
                self._adopt(spec, pid)
                return False
            if pid is None:
                self._start(spec)
            else:
                self._reload(spec, pid)
            return True

    def revive(self) -> bool:
        """Start the gateway again, with the configuration last ensured and the servers it routed
        to, when it is not running; False when it runs or nothing was ensured yet. The keeper
        (loop/service/keeper.py) calls it the moment haproxy exits; the held socket queued the
        connections that came meanwhile, and the new process accepts them."""
        with self._lock:
            if self._spec is None or self.pid() is not None:
                return False
            self._start(self._spec)
            return True

    def wait_gone(self, timeout_s: float) -> bool:
        """Block until the running haproxy exits, at most `timeout_s`; True when none runs."""
        pid = self.pid()
        return True if pid is None else listener.wait_exit(pid, timeout_s)

    def preflight(self, spec: GatewaySpec) -> None:
        """Raise the GatewayError `ensure` would, without starting anything: haproxy missing, or
        the listen address held by a process other than this directory's gateway."""
        self._binary()
        if self.pid() is None:
            check_port_free(spec.host, spec.port)

    def observe(self) -> GatewayView:
        self._seen = runtime.observe(self.channel)
        return self._seen

    def apply(self, ops: Sequence[Op]) -> list[str]:
        spec = self._spec_or_fail()
        return runtime.apply_ops(self.channel, ops, spec)

    def clear_maxima(self) -> None:
        runtime.clear_maxima(self.channel)

    def route(self, desired: Mapping[str, Sequence[Route]], seen: GatewayView) -> tuple[list[Op], list[str]]:
        return route_one(self, desired, seen)

    def stop(self) -> None:
        """Soft stop (SIGUSR1: finish the requests in flight), then SIGTERM, then SIGKILL; then
        the listening socket this process holds is closed, and the port with it. Nothing is
        revived after a stop (a keeper in this process waits for the next `ensure`)."""
        with self._lock:
            self._spec = None
            pid = self.pid()
            if pid is not None:
                for sig, wait in ((signal.SIGUSR1, self.stop_timeout_s), (signal.SIGTERM, 3.0), (signal.SIGKILL, 2.0)):
                    _signal(pid, sig)
                    if _wait_gone(pid, wait):
                        break
            for path in (self.pidfile, Path(self.paths.socket)):
                path.unlink(missing_ok=True)
            self.close()

    def close(self) -> None:
        """Let go of the listening socket (haproxy keeps its own: the gateway outlives us)."""
        with self._lock:
            self._hold(None)

    def holds_listener(self) -> bool:
        """Whether this process holds the listening socket (a kill of haproxy refuses nothing)."""
        return self._listener is not None

    # -- state ------------------------------------------------------------------------------------
    def pid(self) -> int | None:
        """The running haproxy of this directory, if any."""
        try:
            pid = int(self.pidfile.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None
        return pid if owned(pid, str(self.cfg)) else None

    def running(self) -> bool:
        return self.pid() is not None

    def _rendered_for(self) -> str | None:
        try:
            first = self.cfg.read_text(encoding="utf-8").split("\n", 1)[0]
        except OSError:
            return None
        return first.removeprefix("# igniter-spec ").strip() if first.startswith("# igniter-spec ") else None

    def _spec_or_fail(self) -> GatewaySpec:
        if self._spec is None:
            raise GatewayError("the gateway's configuration is not known yet (ensure comes first)")
        return self._spec

    # -- start and reload -------------------------------------------------------------------------
    def _start(self, spec: GatewaySpec) -> None:
        binary = self._binary()
        sock = self._listening(spec)
        created = not self.dir.exists()
        try:
            private_dirs(self.dir)
            Path(self.paths.state_file).unlink(missing_ok=True)  # a dead process's states are stale
            self._write(spec, self._revived(spec), binary, sock)
            self._run([binary, "-D", "-f", str(self.cfg), "-p", str(self.pidfile)], "start", sock)
            self._wait_ready()
        except GatewayError:
            self._undo(created)
            self._hold(None)  # nothing accepts on it: release the port rather than queue clients
            raise
        self._spec = spec

    def _revived(self, spec: GatewaySpec) -> list[ServerSeen]:
        """The servers a gateway that died was sending requests to (none on a first start)."""
        if self._seen is None or self._spec != spec:
            return []
        serving = self._seen.serving()
        return [s for s in self._seen.servers.values() if s.name in serving]

    def _reload(self, spec: GatewaySpec, pid: int) -> None:
        """The new process gets the held socket (the same one: no connection is refused) or,
        without one, takes the old process's listeners over with `-x`; `-sf` lets the old one
        finish its requests."""
        binary = self._binary()
        try:
            view = self.observe()
            Path(self.paths.state_file).write_text(_state_dump(self.channel), encoding="utf-8")
        except GatewayError:
            view = GatewayView()
        sock = self._shared(spec, pid)
        argv = [binary, "-D", "-f", str(self.cfg), "-p", str(self.pidfile), "-x", self.paths.socket, "-sf", str(pid)]
        try:
            self._write(spec, list(view.servers.values()), binary, sock)
            self._run(argv, "reload", sock)
            self._wait_ready(old=pid)
        except GatewayError:
            if sock is not None and sock is not self._listener:
                sock.close()
            raise
        self._hold(sock)
        self._spec = spec

    # -- the listening socket (listener.py) ---------------------------------------------------------
    def _hold(self, sock: socket.socket | None) -> None:
        """Hold `sock` from now on; the socket held before (if another) is closed."""
        if self._listener is not None and self._listener is not sock:
            self._listener.close()
        self._listener = sock

    def _listening(self, spec: GatewaySpec) -> socket.socket:
        """For a start: the socket held for this address, else one bound now (held at once)."""
        held = self._listener
        if held is not None and listener.listens_on(held, spec.host, spec.port):
            return held
        try:
            sock = listener.bind_listener(spec.host, spec.port)
        except listener.ListenError as exc:
            raise _port_taken(spec.host, spec.port, exc) from None
        self._hold(sock)
        return sock

    def _shared(self, spec: GatewaySpec, pid: int) -> socket.socket | None:
        """For a reload: the socket held for this address, else the running process's (adopted),
        else one bound now (a new listen address); None when the running process holds the port
        and will not share it (the reload then takes its listeners over with `-x`)."""
        held = self._listener
        if held is not None and listener.listens_on(held, spec.host, spec.port):
            return held
        sock = self._adopted(spec, pid)
        if sock is None:
            try:
                sock = listener.bind_listener(spec.host, spec.port)
            except listener.ListenError:
                self._warn_unheld(spec)
        return sock

    def _adopt(self, spec: GatewaySpec, pid: int) -> None:
        """A running gateway this process did not start (a restart of `igniter run`): hold a
        duplicate of its listening socket, so a kill of it from now on refuses nothing."""
        held = self._listener
        if held is not None and listener.listens_on(held, spec.host, spec.port):
            return
        sock = self._adopted(spec, pid)
        if sock is None:
            self._warn_unheld(spec)
        self._hold(sock)

    def _adopted(self, spec: GatewaySpec, pid: int) -> socket.socket | None:
        try:
            fd = listener.fd_in_config(self.cfg.read_text(encoding="utf-8"))
        except OSError:
            return None
        return None if fd is None else listener.adopt(pid, fd, spec.host, spec.port)

    def _warn_unheld(self, spec: GatewaySpec) -> None:
        if not self._unheld_warned:
            self._unheld_warned = True
            log.warning(
                "the running gateway's socket on %s cannot be shared with this process (pidfd_getfd not "
                "permitted, or a gateway bound by address): if haproxy dies, clients are refused until it "
                "is started again",
                spec.listen,
            )

    def _binary(self) -> str:
        found = shutil.which(self.command)
        if found is None:
            raise GatewayError(
                f"cannot start the gateway: {self.command!r} is not installed "
                "(Debian/Ubuntu: apt-get install haproxy; or set gateway.kind: none)",
                retryable=False,
                field="gateway.haproxy_command",
            )
        return found

    def _write(self, spec: GatewaySpec, servers: Sequence[ServerSeen], binary: str, sock: socket.socket | None) -> None:
        """Render (bound to the held socket's descriptor, `bind fd@N`, when there is one),
        validate with `haproxy -c`, then move into place."""
        fd = None if sock is None else sock.fileno()
        text = f"# igniter-spec {spec_hash(spec)}\n" + render(spec, self.paths, servers, fd=fd)
        _write_errors(Path(self.paths.errors or self.dir / "errors"))
        tmp = self.cfg.with_suffix(".cfg.new")
        tmp.write_text(text, encoding="utf-8")
        self._run([binary, "-c", "-f", str(tmp)], "check the configuration of", sock)
        os.replace(tmp, self.cfg)

    def _run(self, argv: list[str], what: str, sock: socket.socket | None = None) -> None:
        """Run haproxy with the held socket inherited (at the same descriptor number)."""
        fds = () if sock is None else (sock.fileno(),)
        try:
            done = subprocess.run(
                argv, capture_output=True, text=True, timeout=30, check=False, cwd=self.dir, pass_fds=fds
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise GatewayError(f"cannot {what} the gateway: {exc}") from None
        if done.returncode != 0:
            raise GatewayError(f"cannot {what} the gateway: {alerts(done.stderr + done.stdout)}", retryable=False)

    def _wait_ready(self, old: int | None = None, timeout_s: float = 10.0) -> None:
        """Until a new process (not `old`) holds the pid file and answers on the runtime socket."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            pid = self.pid()
            if pid is not None and pid != old:
                try:
                    runtime.session(self.channel, ["show info"])
                    return
                except GatewayError:
                    pass
            time.sleep(0.02)
        raise GatewayError(f"the gateway did not answer on {self.paths.socket} within {timeout_s:g} s")

    def _undo(self, created: bool) -> None:
        """A start that failed leaves nothing behind."""
        pid = self.pid()
        if pid is not None:
            _signal(pid, signal.SIGTERM)
        if created:
            shutil.rmtree(self.dir, ignore_errors=True)
        else:
            for path in (self.cfg, self.cfg.with_suffix(".cfg.new"), self.pidfile):
                path.unlink(missing_ok=True)


def _write_errors(errors: Path) -> None:
    """The errorfiles the configuration names, each written whole before it is moved into place
    (a haproxy starting meanwhile never reads half a file)."""
    errors.mkdir(mode=0o700, exist_ok=True)
    for name, text in error_files().items():
        tmp = errors / f"{name}.new"
        tmp.write_bytes(text.encode())
        os.replace(tmp, errors / name)


def socket_path(state_dir: Path) -> Path:
    """`<dir>/admin.sock`, or a private directory under /tmp when that path is too long."""
    path = state_dir / "admin.sock"
    if len(str(path)) <= MAX_SOCKET_PATH:
        return path
    short = Path(tempfile.gettempdir()) / f"igniter-gw-{hashlib.sha256(str(state_dir).encode()).hexdigest()[:12]}"
    short.mkdir(mode=0o700, exist_ok=True)
    os.chmod(short, 0o700)
    return short / "admin.sock"


def check_port_free(host: str, port: int) -> None:
    """Bind the listen address once, as haproxy will (SO_REUSEADDR, not SO_REUSEPORT): a port
    another process listens on fails here, clearly; one that only has connections in TIME_WAIT
    (a gateway that died under load) is free, as it is for haproxy."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise _port_taken(host, port, exc) from None


def _port_taken(host: str, port: int, exc: OSError) -> GatewayError:
    return GatewayError(
        f"cannot start the gateway: cannot listen on {host}:{port}: {exc.strerror or exc} "
        "(another process holds it; set gateway.listen)",
        retryable=False,
        field="gateway.listen",
    )


def alerts(output: str) -> str:
    """HAProxy's [ALERT] lines, without their pid prefix; else the last line it printed."""
    found = [re.sub(r"^\[ALERT\]\s*(\(\d+\)\s*)?:\s*", "", ln).strip() for ln in output.splitlines() if "[ALERT]" in ln]
    lines = [ln for ln in output.splitlines() if ln.strip()]
    return "; ".join(found) or (lines[-1].strip() if lines else "no output")


def _state_dump(channel: runtime.Channel) -> str:
    (text,) = runtime.session(channel, ["show servers state"])
    return text + "\n"


def _signal(pid: int, sig: signal.Signals) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _wait_gone(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return not alive(pid)
