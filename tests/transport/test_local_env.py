"""The local transport's short `igniter-agent apply` runs get the agent's allow-listed
environment, not `igniter run`'s: AWS keys and tokens stay behind (issue 51, item 8); status
runs no process at all."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from autoscaler.fleet.base import Instance
from autoscaler.transport.local import LocalTransport

pytestmark = pytest.mark.unit

SECRETS = {"AWS_SECRET_ACCESS_KEY": "s3cr3t", "AWS_SESSION_TOKEN": "t0ken", "IGNITER_STATUS_TOKEN": "x"}


def _recorder(tmp_path: Path) -> Path:
    """A stand-in agent command: writes its environment to env-ACTION.json, answers status with {}."""
    script = tmp_path / "fake-agent"
    script.write_text(
        "#!/usr/bin/env python3\n"
        "import json, os, sys\n"
        f"open({str(tmp_path)!r} + '/env-' + sys.argv[1] + '.json', 'w').write(json.dumps(dict(os.environ)))\n"
        "sys.stdin.read()\n"
        "print('{}')\n",
        encoding="utf-8",
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def test_agent_runs_hold_no_secret_of_the_caller(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in SECRETS.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    transport = LocalTransport(agent_command=str(_recorder(tmp_path)), state_dir=str(tmp_path))
    inst = Instance(id="i-1", instance_type="t", slot="s", state="running", launched_at=0.0)
    transport.apply(inst, {"generation": 1, "servers": []})
    seen = json.loads((tmp_path / "env-apply.json").read_text(encoding="utf-8"))
    assert not set(SECRETS) & set(seen), sorted(set(SECRETS) & set(seen))
    assert seen["LC_ALL"] == "C.UTF-8" and "PATH" in seen


def test_status_runs_no_agent_process(tmp_path: Path) -> None:
    """Status reads the agent's status.json in this process (transport/status_file.py): the agent
    command is never run for it, so no environment (and no secret) goes anywhere."""
    transport = LocalTransport(agent_command=str(_recorder(tmp_path)), state_dir=str(tmp_path))
    inst = Instance(id="i-1", instance_type="t", slot="s", state="running", launched_at=0.0)
    (tmp_path / "status.json").write_text(json.dumps({"generation": 1, "servers": [], "heartbeat_at": 0.0}))
    assert transport.status(inst)["agent_running"] is False  # no agent holds the lock
    assert not (tmp_path / "env-status.json").exists()
