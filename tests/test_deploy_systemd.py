"""deploy/systemd: the units ops install (and the Terraform cloud-init installs verbatim).

`systemd-analyze verify` checks them where systemd is installed, in a scratch root holding this
machine's own system units and stand-ins for the binaries they run (verify checks ExecStart paths
exist). Unknown keys are only warnings to systemd, so any output at all fails the test.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.unit
UNITS = ROOT / "deploy" / "systemd"
SANDBOX = {"NoNewPrivileges": "yes", "PrivateTmp": "yes", "ProtectKernelModules": "yes", "RestrictSUIDSGID": "yes"}


def keys(name: str) -> dict[str, list[str]]:
    parsed: dict[str, list[str]] = {}
    for line in (UNITS / name).read_text().splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, value = line.split("=", 1)
            parsed.setdefault(key.strip(), []).append(value.strip())
    return parsed


def test_the_autoscaler_reloads_on_sighup_and_is_sandboxed() -> None:
    unit = keys("igniter.service")
    assert unit["ExecReload"] == ["/bin/kill -HUP $MAINPID"]
    assert unit["ExecStart"][0].startswith("/opt/igniter/venv/bin/igniter run /etc/igniter/policy.yaml")
    assert unit["User"] == ["igniter"] and unit["ProtectSystem"] == ["strict"] and unit["ProtectHome"] == ["yes"]
    assert unit["CapabilityBoundingSet"] == [""], "the autoscaler needs no capability"
    assert all(unit[k] == [v] for k, v in SANDBOX.items())
    assert unit["RestartPreventExitStatus"] == ["2"], "a bad policy (exit 2) is not fixed by restarting"


def test_the_agent_is_sandboxed_but_sees_the_gpus() -> None:
    unit = keys("igniter-agent.service")
    assert "--state-dir ${IGNITER_STATE_DIR}" in unit["ExecStart"][0]
    assert unit["ProtectSystem"] == ["full"] and "PrivateDevices" not in unit, "the servers need /dev/nvidia*"
    assert all(unit[k] == [v] for k, v in SANDBOX.items())
    assert "igniter-gpu-setup.service" in unit["After"][0]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    system = Path("/usr/lib/systemd/system")
    if shutil.which("systemd-analyze") is None or not system.is_dir():
        pytest.skip("systemd-analyze is not installed (Debian's systemd package)")
    shutil.copytree(system, tmp_path / "usr" / "lib" / "systemd" / "system", symlinks=True)
    for binary in (
        "opt/igniter/venv/bin/igniter",
        "opt/igniter/venv/bin/igniter-agent",
        "usr/bin/nvidia-smi",
        "bin/kill",
    ):
        path = tmp_path / binary
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("#!/bin/sh\n")
        path.chmod(0o755)
    (tmp_path / "etc" / "systemd" / "system").mkdir(parents=True)
    return tmp_path


def verify(root: Path, *names: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["systemd-analyze", "verify", "--man=no", f"--root={root}", *names], capture_output=True, text=True, timeout=60
    )


def test_systemd_analyze_verify_passes_cleanly(root: Path) -> None:
    names = sorted(p.name for p in UNITS.glob("*.service"))
    for name in names:
        shutil.copy(UNITS / name, root / "etc" / "systemd" / "system" / name)
    done = verify(root, *names)
    assert done.returncode == 0 and not done.stdout.strip() and not done.stderr.strip(), done.stdout + done.stderr


def test_verify_would_catch_a_misspelt_key(root: Path) -> None:
    text = (UNITS / "igniter.service").read_text().replace("NoNewPrivileges=", "NoNewPrivilege=")
    (root / "etc" / "systemd" / "system" / "broken.service").write_text(text)
    assert "Unknown key" in verify(root, "broken.service").stderr
