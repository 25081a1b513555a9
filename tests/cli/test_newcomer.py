"""What a newcomer met on a first try (issue 51, the newcomer's list): `igniter example` with no
NAME lists the choices; `igniter down` with nothing running says so; `--advisory` with no fleet
running says there is no gateway; `igniter --version` answers on an agent-only install."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autoscaler.cli.example import EXAMPLES
from tests.conftest import ROOT
from tests.test_packaging import SERVICE_MODULES, _run_blocked, _script

POLICY = ROOT / "policies" / "example.yaml"


@pytest.mark.unit
def test_example_without_a_name_lists_the_choices_in_one_line(igniter) -> None:
    done = igniter("example")
    assert done.code == 2 and done.out == ""
    assert done.err.count("\n") == 1
    for name, (_, what) in EXAMPLES.items():
        assert f"{name} - {what}" in done.err


@pytest.mark.unit
def test_down_with_nothing_running_says_nothing_was_running(igniter, tmp_path: Path) -> None:
    done = igniter("down", POLICY, "--state", tmp_path / "fleet.sqlite")
    assert done.code == 0
    assert "no instance of the fleet was running" in done.err
    assert "no gateway was running (127.0.0.1:8000)" in done.err
    assert "gateway stopped" not in done.err and "0 of 0" not in done.err


@pytest.mark.e2e
def test_advisory_with_no_fleet_running_says_there_is_no_gateway(tmp_path: Path) -> None:
    """Its first line says why the ticks' gateway steps will fail, before the first tick says
    "2 failed"; it starts nothing (no gateway directory, no instance)."""
    state = tmp_path / "fleet.sqlite"
    argv = [sys.executable, "-m", "autoscaler", "run", str(POLICY), "--advisory", "--state", str(state), "--no-status"]
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    lines: list[str] = []
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + 25
        while time.monotonic() < deadline and not any("tick 1:" in ln for ln in lines):
            line = proc.stderr.readline()
            if not line:
                break
            lines.append(line)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
    said = [ln for ln in lines if "no gateway is running for fleet example" in ln]
    assert said, "".join(lines)
    assert str(tmp_path / "example-gateway") in said[0] and "igniter run" in said[0]
    assert lines.index(said[0]) < next(i for i, ln in enumerate(lines) if "tick 1:" in ln)
    assert not (tmp_path / "example-instances").exists() or not any((tmp_path / "example-instances").iterdir())


@pytest.mark.e2e
def test_version_answers_without_the_service_extra(tmp_path: Path) -> None:
    """An agent-only install has the `igniter` script but not the service's libraries (scipy,
    APScheduler, boto3, ...): `--version` still answers; a command still names the extra."""
    for argv in (["--version"], ["--log-format", "json", "--version"]):
        done = _run_blocked(tmp_path, _script("igniter"), *argv, blocked=SERVICE_MODULES)
        assert done.returncode == 0 and done.stdout.startswith("igniter "), done.stderr
    done = _run_blocked(tmp_path, _script("igniter"), "plan", str(POLICY), blocked=SERVICE_MODULES)
    assert done.returncode == 2 and "pip install 'igniter-autoscaler[service]'" in done.stderr
