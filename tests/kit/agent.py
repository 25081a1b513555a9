"""Helpers shared by the agent tests: free ports, polling, process checks, a real agent process."""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agents.node.status import read_status


def load_scripted(model_dir: Path) -> Any:
    """The model as torch itself runs it, to compare served outputs with."""
    import warnings

    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return torch.jit.load(str(model_dir / "model.pt"))


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def ask_live(port: int) -> socket.socket:
    """Connect to a gateway and send `GET /v2/health/live` without reading the reply (raises
    ConnectionRefusedError when refused): a client that is waiting while nothing serves."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n")
    return sock


def status_line(sock: socket.socket) -> bytes:
    """The reply's status line, read to the end; the socket is closed."""
    with sock:
        data = b""
        while chunk := sock.recv(4096):
            data += chunk
    return data.split(b"\r\n", 1)[0]


def wait_until(predicate: Callable[[], Any], timeout: float, what: str, poll: float = 0.05) -> Any:
    """Poll until predicate() is truthy; fail the test with `what` on timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def alive(pid: int) -> bool:
    """True while pid exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def server_argv(pid: int) -> list[str]:
    """A server's command line as its arguments: NUL-separated for an exec'd server, one
    shell-quoted title for a forked one (agents/node/zygote.py)."""
    raw = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").decode()
    return raw.split("\0") if "\0" in raw else shlex.split(raw)


def agent_cmd(*args: str) -> list[str]:
    """The installed console script when present (it is what systemd runs), else the module."""
    script = Path(sys.executable).parent / "igniter-agent"
    return [str(script), *args] if script.exists() else [sys.executable, "-m", "agents.cli", *args]


def server_spec(name: str, model_dir: Path, port: int, **extra: Any) -> dict[str, Any]:
    spec = {
        "name": name,
        "workload": f"{name}-w",
        "model_dir": str(model_dir),
        "batch": 8,
        "mps_percent": 50.0,
        "port": port,
    }
    spec.update(extra)
    return spec


class Agent:
    """A real `igniter-agent run --no-gpu` process on a temp state directory."""

    def __init__(self, state_dir: Path, *extra: str) -> None:
        self.state_dir = state_dir
        self.log = open(state_dir.parent / f"{state_dir.name}-agent.log", "wb")
        cmd = agent_cmd("run", "--state-dir", str(state_dir), "--no-gpu", "--interval", "0.1", *extra)
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        self.generation = 0

    def cli(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(agent_cmd(*args), input=stdin, capture_output=True, text=True, timeout=60)

    def apply(self, servers: list[dict[str, Any]], wait: float | None = 30.0) -> subprocess.CompletedProcess:
        self.generation += 1
        doc = json.dumps({"generation": self.generation, "servers": servers})
        extra = ["--wait", str(wait)] if wait else []
        done = self.cli("apply", "--state-dir", str(self.state_dir), "-", *extra, stdin=doc)
        assert done.returncode == 0, done.stderr + self.read_log()
        return done

    def status(self) -> dict[str, Any]:
        """The document `igniter-agent status --json` prints (agents/node/status.py read_status,
        through JSON as the CLI gives it), read in this process: a CLI process per read cost the
        suite ~0.2 s of CPU each, hundreds of times. tests/agents/node/test_cli.py runs the CLI."""
        return json.loads(json.dumps(read_status(self.state_dir), sort_keys=True))

    def servers(self) -> dict[str, dict[str, Any]]:
        return {s["name"]: s for s in self.status()["servers"]}

    def read_log(self) -> str:
        self.log.flush()
        return (self.state_dir.parent / f"{self.state_dir.name}-agent.log").read_text(errors="replace")

    def server_pids(self) -> list[int]:
        return [s["pid"] for s in self.status()["servers"] if s.get("pid")]

    def close(self) -> None:
        """SIGKILL whatever is left: the agent, and (defensively) any server it reported."""
        pids = self.server_pids() if self.proc.poll() is None else []
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        for pid in pids:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        self.log.close()
