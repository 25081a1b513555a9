"""Local agents get an allow-listed environment (issue 51): `igniter run`'s AWS keys and other
secrets never reach them, as the agent process's own /proc/PID/environ shows."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from agents.launch import AGENT_ENV, agent_env
from autoscaler.fleet.local import LocalProvider
from tests.conftest import ROOT

SECRETS = {
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI-test-secret",
    "AWS_ACCESS_KEY_ID": "AKIATESTKEYID0000000",
    "AWS_SESSION_TOKEN": "test-session-token",
    "GITHUB_TOKEN": "ghp_test_token",
}


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(entry.split("=", 1) for entry in raw.decode().split("\0") if "=" in entry)


@pytest.mark.e2e
def test_a_local_agent_holds_none_of_the_autoscalers_secrets(tmp_path: Path, monkeypatch) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("IGNITER_FLEET", "envtest")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    provider = LocalProvider("envtest", tmp_path / "instances", 30700)
    try:
        inst = provider.launch("envtest-0", "p3.2xlarge", 1)
        deadline = time.monotonic() + 20
        while [i.state for i in provider.list_instances()] != ["running"]:
            assert time.monotonic() < deadline, "the agent did not start"
            time.sleep(0.1)
        pid = int(json.loads((Path(inst.tags["igniter:state_dir"]) / "instance.json").read_text())["pid"])
        env = _environ(pid)
    finally:
        for running in provider.list_instances():
            provider.terminate(running.id)
    assert not SECRETS.keys() & env.keys(), sorted(env)
    assert not any(value in "\0".join(env.values()) for value in SECRETS.values())
    assert env["IGNITER_FLEET"] == "envtest" and "CUDA_VISIBLE_DEVICES" in env
    assert env["PATH"] and env["HOME"]


@pytest.mark.unit
def test_the_allow_list_keeps_the_basics_locale_and_gpu_stack_only() -> None:
    given = {
        "PATH": "/bin",
        "LC_ALL": "C.UTF-8",
        "CUDA_MPS_PIPE_DIRECTORY": "/p",
        "NVIDIA_VISIBLE_DEVICES": "all",
        "PYTHONPATH": "/x",
        "IGNITER_DEBUG": "1",
        **SECRETS,
        "IGNITER_SSH_KEY_SECRET": "arn:aws:secretsmanager:x",
        "LD_PRELOAD": "/evil.so",
        "HTTP_PROXY": "http://proxy",
    }
    kept = agent_env(given)
    assert kept.keys() == {
        "PATH",
        "LC_ALL",
        "CUDA_MPS_PIPE_DIRECTORY",
        "NVIDIA_VISIBLE_DEVICES",
        "PYTHONPATH",
        "IGNITER_DEBUG",
    }


@pytest.mark.unit
def test_every_igniter_variable_the_agent_reads_is_allowed() -> None:
    """A variable the agent code reads but the list drops would silently stop working locally."""
    read = set()
    for path in (ROOT / "agents").rglob("*.py"):
        read |= set(re.findall(r"environ(?:\.get\(|\[)\"(IGNITER_[A-Z_]+)\"", path.read_text()))
    assert read and read <= AGENT_ENV, read - AGENT_ENV
