"""The real NvidiaMps class against a stand-in `nvidia-cuda-mps-control` executable.

The stand-in behaves like the documented tool: `-d` starts the daemon, commands come on stdin,
and the exit status is non-zero when no daemon answers. It records every call with its env.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from agents.node.mps import MpsError, NoMps, NvidiaMps, share_text
from agents.spec import ServerSpec

FAKE_CONTROL = r"""#!/usr/bin/env python3
import json, os, sys
state = os.environ["FAKE_MPS_STATE"]
running = os.path.join(state, "running")
call = {"argv": sys.argv[1:], "pipe": os.environ.get("CUDA_MPS_PIPE_DIRECTORY"),
        "log": os.environ.get("CUDA_MPS_LOG_DIRECTORY"), "cvd": os.environ.get("CUDA_VISIBLE_DEVICES")}
if sys.argv[1:] == ["-d"]:
    open(running, "w").close()
else:
    call["stdin"] = sys.stdin.read().strip()
with open(os.path.join(state, "calls.jsonl"), "a") as f:
    f.write(json.dumps(call) + "\n")
if sys.argv[1:] == ["-d"]:
    sys.exit(0)
if not os.path.exists(running):
    print("Cannot find MPS control daemon process")
    sys.exit(1)
if call["stdin"] == "quit":
    os.remove(running)
"""


@pytest.fixture
def fake_control(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    binary = tmp_path / "bin" / "nvidia-cuda-mps-control"
    binary.parent.mkdir()
    binary.write_text(FAKE_CONTROL)
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    (tmp_path / "mpsstate").mkdir()
    monkeypatch.setenv("FAKE_MPS_STATE", str(tmp_path / "mpsstate"))
    monkeypatch.setenv("PATH", f"{binary.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")  # must not leak into the control daemon
    return tmp_path / "mpsstate"


def _calls(state: Path) -> list[dict]:
    return [json.loads(line) for line in (state / "calls.jsonl").read_text().splitlines()]


@pytest.mark.e2e
def test_starts_its_own_daemon_once_with_its_own_directories(tmp_path: Path, fake_control: Path) -> None:
    mps = NvidiaMps(tmp_path / "agent" / "mps")
    mps.ensure_running()
    mps.ensure_running()
    calls = _calls(fake_control)
    starts = [c for c in calls if c["argv"] == ["-d"]]
    assert len(starts) == 1
    assert starts[0]["pipe"] == str(tmp_path / "agent" / "mps" / "pipe") and starts[0]["cvd"] is None
    assert (tmp_path / "agent" / "mps" / "pipe").is_dir() and (tmp_path / "agent" / "mps" / "log").is_dir()
    assert mps.describe() == {
        "enabled": True,
        "pipe_dir": str(mps.pipe_dir),
        "log_dir": str(mps.log_dir),
        "running": True,
        "started_by_agent": True,
    }
    mps.stop()
    assert _calls(fake_control)[-1]["stdin"] == "quit"
    assert not (fake_control / "running").exists()


@pytest.mark.e2e
def test_a_daemon_already_answering_is_reused_and_left_running(tmp_path: Path, fake_control: Path) -> None:
    (fake_control / "running").touch()
    mps = NvidiaMps(tmp_path / "mps")
    mps.ensure_running()
    mps.stop()
    assert [c for c in _calls(fake_control) if c["argv"] == ["-d"] or c.get("stdin") == "quit"] == []


@pytest.mark.e2e
def test_missing_binary_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(MpsError, match="not found on PATH"):
        NvidiaMps(tmp_path, binary="no-such-mps-control").ensure_running()


@pytest.mark.unit
def test_server_env_carries_gpu_pipe_and_share(tmp_path: Path) -> None:
    spec = ServerSpec(name="s", workload="w", model_dir="/m", batch=4, mps_percent=37.5, gpu_index=2, port=9)
    env = NvidiaMps(tmp_path).server_env(spec)
    assert env["CUDA_VISIBLE_DEVICES"] == "2" and env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "37.5"
    assert env["CUDA_MPS_PIPE_DIRECTORY"] == str(tmp_path / "pipe") and env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert NoMps().server_env(spec) == {"CUDA_VISIBLE_DEVICES": ""}
    assert (share_text(30.0), share_text(100.0), share_text(12.5)) == ("30", "100", "12.5")
