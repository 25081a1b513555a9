"""`make demo` end to end, shortened: real agents, servers and requests on 127.0.0.1; it must end by
itself (or on SIGINT) and leave no process behind."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest

from autoscaler.demo.procs import pids_with, sweep
from tests.conftest import ROOT
from tests.kit.agent import free_port

pytestmark = pytest.mark.e2e


def _start(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "autoscaler.demo",
            "--plain",
            "--port",
            str(free_port()),
            *args,
        ],  # not 8000 (the MIG demo's)
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _root(text: str) -> str:
    match = re.search(r"\(state in (\S+?)\)", text.replace("\n", ""))
    assert match, text
    return match.group(1)


def _sweep_from(text: str) -> None:
    """A demo that had to be killed leaves its agents: stop them so no test run leaks processes."""
    match = re.search(r"\(state in (\S+?)\)", text.replace("\n", ""))
    if match:
        sweep(match.group(1))


def test_short_demo_serves_requests_and_cleans_up():
    proc = _start("--duration", "8")
    try:
        out, _ = proc.communicate(timeout=150)
    finally:
        if proc.poll() is None:
            proc.kill()
    root = _root(out)
    try:
        assert proc.returncode == 0, out
        assert "demo summary" in out and "processes left behind: none" in out
        assert re.search(r"m-mid\s+.*resnet50", out)
        sent_ok = [int(m) for m in re.findall(r"resnet50\s+│?\s*\d+\s+│?\s*(\d+)\s+│?\s*(\d+)", out)[0]]
        assert sent_ok[1] > 0, out  # real requests were answered
        assert pids_with(root) == [] and not os.path.exists(root)
    finally:
        sweep(root)


def test_sigint_stops_everything():
    proc = _start("--duration", "60")
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            lines.append(line)
            if line.startswith("t=") and "tick 2" in line:
                break
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            _sweep_from("".join(lines))
    out = "".join(lines) + rest
    root = _root(out)
    try:
        assert proc.returncode == 130, out
        assert "demo interrupted" in out and "processes left behind: none" in out
        assert pids_with(root) == []
    finally:
        sweep(root)
