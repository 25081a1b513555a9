"""SSH transport (paramiko): runs `igniter-agent apply -` on each instance and reads its status.

- Status starts no Python on the node: `cat` of the status.json the agent's daemon keeps current,
  with the node's clock to judge its heartbeat, in a shell loop on a session kept open on the
  pooled connection, so a read is one round trip (transport/status_file.py reader_command). A
  reply that is not a clean frame closes that session (the next read opens another); no answer
  within connect_timeout_s drops the connection, as any failed call does. Apply (rare) still
  runs `igniter-agent apply -`.

- Key authentication only (agents.key_file); no agent forwarding, no password fallback.
- Host keys are checked with paramiko's RejectPolicy: an unknown or changed key is refused, never
  added. With pins (a provider that publishes host keys, e.g. EC2's console; transport/pins.py) an
  instance is trusted with exactly the keys pinned for it, and not contacted at all before it has
  any; without pins, against agents.known_hosts (else the user's ~/.ssh/known_hosts).
- A host presenting a key other than the pinned one is refused (TransportFault.AUTH: the controller
  quarantines the node, transport/base.py) and logged as an error: the node was replaced behind our back, or someone is in the middle.
- One pooled connection per instance, reopened after any failure; calls to different instances
  run side by side (loop/tick/observe.py and the actuator ask them in a bounded pool).
- Every argument is shell-quoted; connect and command timeouts bound every call.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import paramiko

from autoscaler.config.policy import AgentsConfig
from autoscaler.fleet.base import Instance
from autoscaler.transport.base import TransportError, TransportFault
from autoscaler.transport.local import agent_args, parse_reply
from autoscaler.transport.pins import PinnedHostKeys, host_pattern
from autoscaler.transport.status_file import FRAME_END, STALE_AFTER_S, parse_frame, reader_command

log = logging.getLogger(__name__)

PoolKey = tuple[str, str, int]  # (instance id, host, port): a reused address never reuses a connection
T = TypeVar("T")
END = FRAME_END.encode()


class SshTransport:
    def __init__(self, cfg: AgentsConfig, pins: PinnedHostKeys | None = None) -> None:
        self.cfg = cfg
        self.pins = pins
        self._pool: dict[PoolKey, paramiko.SSHClient] = {}
        self._locks: dict[PoolKey, threading.Lock] = {}  # one call at a time per connection
        self._readers: dict[PoolKey, tuple[paramiko.SSHClient, str, paramiko.Channel]] = {}  # status sessions
        self._lock = threading.Lock()  # guards the dicts
        self.stale_s = STALE_AFTER_S  # a status whose heartbeat is older is an agent gone silent

    def apply(self, instance: Instance, assignment: dict[str, Any]) -> None:
        self._call(instance, "apply", json.dumps(assignment))

    def status(self, instance: Instance) -> dict[str, Any]:
        """The agent's status.json over the pooled connection's status session (no agent process
        started); a reply other than a document or "none yet" closes the session."""
        where = f"{self._host(instance)}:{self.cfg.port}"
        state_dir = instance.state_dir or self.cfg.state_dir

        def read(key: PoolKey, client: paramiko.SSHClient) -> dict[str, Any]:
            frame, err = self._ask(self._reader(key, client, state_dir))
            try:
                return parse_frame(frame, err, where, self.stale_s)
            except TransportError as exc:
                if exc.kind is not TransportFault.NOT_READY:
                    self._close_reader(key)
                raise

        return self._locked(instance, "status", read)

    def close(self) -> None:
        with self._lock:
            for client in self._pool.values():
                client.close()
            self._pool.clear()
            self._readers.clear()

    def command(self, action: str, state_dir: str | None = None) -> str:
        """The remote command line, each argument quoted; the instance's own state directory
        where it has one (a local instance reached over SSH), else agents.state_dir."""
        argv = [*shlex.split(self.cfg.agent_command), *agent_args(action, state_dir or self.cfg.state_dir)]
        return " ".join(shlex.quote(a) for a in argv)

    def _call(self, instance: Instance, action: str, stdin: str | None) -> Any:
        rc, out, err = self.run(instance, self.command(action, instance.state_dir), stdin, action)
        return parse_reply(action, rc, out, err, f"{self._host(instance)}:{self.cfg.port}")

    def run(self, instance: Instance, command: str, stdin: str | None, what: str = "command") -> tuple[int, str, str]:
        """Run one (already quoted) command on the instance over the pooled, host-key-checked
        connection: (exit status, stdout, stderr). The gateway's runtime API goes this way too."""
        return self._locked(instance, what, lambda _key, client: self._exec(client, command, stdin))

    def _locked(self, instance: Instance, what: str, call: Callable[[PoolKey, paramiko.SSHClient], T]) -> T:
        """`call` on the instance's pooled connection, holding its lock; a failure of the
        connection drops it (the next call connects again)."""
        host = self._host(instance)
        key = (instance.id, host, self.cfg.port)
        lock = self._lock_of(key)
        if not lock.acquire(timeout=self.cfg.connect_timeout_s + self.cfg.command_timeout_s):
            raise TransportError(f"{host}:{self.cfg.port}: {what}: an earlier call to it has not returned")
        try:
            client = self._client(key)
            try:
                return call(key, client)
            except (OSError, paramiko.SSHException, EOFError) as exc:
                self._drop(key)
                raise TransportError(f"{host}:{self.cfg.port}: {what} failed: {exc or type(exc).__name__}") from None
        finally:
            lock.release()

    def _reader(self, key: PoolKey, client: paramiko.SSHClient, state_dir: str) -> paramiko.Channel:
        """The connection's status session (reader_command), opened on first use; one of another
        connection or directory, one that ended, or one with output nobody asked for is replaced."""
        with self._lock:
            held = self._readers.get(key)
        if held is not None:
            owner, where, chan = held
            if owner is client and where == state_dir and not chan.closed and not chan.exit_status_ready():
                if not chan.recv_ready() and not chan.recv_stderr_ready():
                    return chan
            self._close_reader(key)
        transport = client.get_transport()
        if transport is None:
            raise paramiko.SSHException("no transport")
        chan = transport.open_session(timeout=self.cfg.connect_timeout_s)
        chan.exec_command(reader_command(state_dir))
        with self._lock:
            self._readers[key] = (client, state_dir, chan)
        return chan

    def _ask(self, chan: paramiko.Channel) -> tuple[str, str]:
        """One read on the status session: a newline sent, the frame up to FRAME_END back within
        connect_timeout_s (else TimeoutError); what came on stderr meanwhile. A round trip and a
        `cat`: bounded as reaching the node is (opening a session for each read was), so a hung
        node costs a status read connect_timeout_s, not the longer command_timeout_s."""
        limit = self.cfg.connect_timeout_s
        deadline = time.monotonic() + limit
        chan.settimeout(limit)
        chan.sendall(b"\n")
        buf = bytearray()
        while END not in buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no status within {limit:g} s")
            chan.settimeout(left)
            chunk = chan.recv(65536)
            if not chunk:
                raise EOFError("the status session ended")
            buf += chunk
        err = bytearray()
        while chan.recv_stderr_ready():
            err += chan.recv_stderr(65536)
        frame, _, rest = bytes(buf).partition(END)
        if rest:  # more than one frame: not an answer to this read
            err += b"output after the end of the status: " + rest[:100]
        return frame.decode(errors="replace"), err.decode(errors="replace")

    def _close_reader(self, key: PoolKey) -> None:
        with self._lock:
            held = self._readers.pop(key, None)
        if held is not None:
            held[2].close()

    def _lock_of(self, key: PoolKey) -> threading.Lock:
        """One call at a time per connection; calls to different instances run side by side
        (transport/bounded.py), so one slow node holds only its own lock."""
        with self._lock:
            return self._locks.setdefault(key, threading.Lock())

    def _host(self, instance: Instance) -> str:
        host = self.cfg.host_override or instance.address
        if not host:
            raise TransportError(f"{instance.id}: no address to reach it", TransportFault.NOT_READY)
        return host

    def _client(self, key: PoolKey) -> paramiko.SSHClient:
        """The key's pooled connection, or a new one (connected outside the pool's lock: a node
        that is slow to answer holds up only calls to itself)."""
        with self._lock:
            client = self._pool.get(key)
            if client is not None and _active(client):
                return client
            stale = [k for k, c in self._pool.items() if k == key or not _active(c)]
            for k in stale:  # a dead connection's lock goes with it, unless a call holds it
                if k != key and not self._locks[k].locked():
                    del self._locks[k]
        for k in stale:
            self._drop(k)
        client = self._connect(*key)
        with self._lock:
            self._pool[key] = client
        return client

    def _trust(self, client: paramiko.SSHClient, instance_id: str, host: str, port: int) -> None:
        """The host keys this connection accepts: the instance's pins, else the known_hosts file."""
        if self.pins is None:
            known = os.path.expanduser(self.cfg.known_hosts or "~/.ssh/known_hosts")
            if os.path.exists(known):
                client.load_host_keys(known)
            return
        keys = self.pins.keys_for(instance_id)
        if not keys:
            raise TransportError(
                f"{instance_id}: no host key pinned yet (not published on its console); not contacted",
                TransportFault.NOT_READY,
            )
        for key in keys:
            client.get_host_keys().add(host_pattern(host, port), key.get_name(), key)

    def _connect(self, instance_id: str, host: str, port: int) -> paramiko.SSHClient:
        client = paramiko.SSHClient()
        self._trust(client, instance_id, host, port)
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
        timeout = self.cfg.connect_timeout_s
        try:
            client.connect(
                host,
                port=port,
                username=self.cfg.user,
                key_filename=os.path.expanduser(self.cfg.key_file) if self.cfg.key_file else None,
                timeout=timeout,
                banner_timeout=timeout,
                auth_timeout=timeout,
                allow_agent=False,
                look_for_keys=self.cfg.key_file is None,
            )
        except paramiko.BadHostKeyException as exc:
            client.close()
            _log_mismatch(instance_id, host, port, exc)
            raise TransportError(
                f"{instance_id} at {host}:{port}: host key mismatch: {exc}", TransportFault.AUTH
            ) from None
        except paramiko.AuthenticationException as exc:
            client.close()
            raise TransportError(f"{host}:{port}: {exc}", TransportFault.AUTH) from None
        except paramiko.SSHException as exc:
            client.close()
            refused = "known_hosts" in str(exc)
            kind = TransportFault.AUTH if refused else TransportFault.UNREACHABLE
            raise TransportError(f"{host}:{port}: {exc}", kind) from None
        except (OSError, EOFError) as exc:
            client.close()
            raise TransportError(f"{host}:{port}: cannot connect: {exc}") from None
        return client

    def _exec(self, client: paramiko.SSHClient, command: str, stdin: str | None) -> tuple[int, str, str]:
        transport = client.get_transport()
        if transport is None:
            raise paramiko.SSHException("no transport")
        chan = transport.open_session(timeout=self.cfg.connect_timeout_s)
        try:
            chan.settimeout(self.cfg.command_timeout_s)
            chan.exec_command(command)
            if stdin:
                chan.sendall(stdin.encode())
            chan.shutdown_write()
            out, err = _drain(chan)
            if not chan.status_event.wait(self.cfg.command_timeout_s):
                raise TimeoutError("no exit status")
            while chan.recv_stderr_ready():
                err += chan.recv_stderr(65536).decode(errors="replace")
            return chan.recv_exit_status(), out, err
        finally:
            chan.close()

    def _drop(self, key: PoolKey) -> None:
        with self._lock:
            client = self._pool.pop(key, None)
            self._readers.pop(key, None)  # its session goes with the connection
        if client is not None:
            client.close()


def _active(client: paramiko.SSHClient) -> bool:
    transport = client.get_transport()
    return transport is not None and transport.is_active()


def _log_mismatch(instance_id: str, host: str, port: int, exc: paramiko.BadHostKeyException) -> None:
    """Loud on purpose: a pinned key that no longer matches is what a man-in-the-middle looks like."""
    log.error(
        "HOST KEY MISMATCH: %s at %s:%d presented %s %s, but %s %s is the key it must have; refusing to connect. "
        "Either the node's host key changed or someone is intercepting the connection.",
        instance_id,
        host,
        port,
        exc.key.get_name(),
        exc.key.fingerprint,
        exc.expected_key.get_name(),
        exc.expected_key.fingerprint,
    )


def _drain(chan: paramiko.Channel) -> tuple[str, str]:
    """Read stdout and stderr to EOF without letting either fill its window (timeouts raise)."""
    out, err = bytearray(), bytearray()
    while True:
        if chan.recv_stderr_ready():
            err += chan.recv_stderr(65536)
            continue
        chunk = chan.recv(65536)
        if not chunk:
            break
        out += chunk
    return out.decode(errors="replace"), err.decode(errors="replace")
