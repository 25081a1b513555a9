"""An agent on a VM without torch: it says once which extra to install and refuses every server
(failed, with that reason in status.json) instead of crash-looping them. A real `igniter-agent run`
process whose imports of torch fail, as on a VM where only the base install went in."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.kit.agent import agent_cmd, free_port, server_spec, wait_until
from tests.test_packaging import BLOCKER

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[3]


def _status(state: Path) -> dict:
    try:
        return json.loads((state / "status.json").read_text())
    except (OSError, ValueError):
        return {}


def test_no_torch_refuses_servers_once_without_a_crash_loop(tmp_path: Path) -> None:
    site, state = tmp_path / "site", tmp_path / "state"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCKER)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}
    log = tmp_path / "agent.log"
    cmd = agent_cmd("run", "--state-dir", str(state), "--no-gpu", "--interval", "0.1", "--backoff-initial", "0.1")
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        for generation in (1, 2):
            specs = [server_spec(n, tmp_path / "no-model", free_port()) for n in (f"a{generation}", f"b{generation}")]
            doc = json.dumps({"generation": generation, "servers": specs})
            apply = agent_cmd("apply", "--state-dir", str(state), "--skip-model-check", "-")
            subprocess.run(apply, input=doc, text=True, check=True, capture_output=True, env=env, timeout=60)
            status = wait_until(lambda g=generation: (s := _status(state)).get("generation") == g and s, 20, "status")
        failed_at = status["updated_at"]
        wait_until(lambda: _status(state).get("updated_at", 0) > failed_at + 1.0, 20, "a second of agent loops")
        servers = _status(state)["servers"]
        assert [s["state"] for s in servers] == ["failed", "failed"]
        assert all("pip install 'igniter-autoscaler[agent]'" in s["last_error"] for s in servers)
        assert all(s["restarts"] == 0 and not s.get("pid") for s in servers), servers
        assert proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    text = log.read_text()
    assert text.count("torch is not installed") == 1, text
    assert "started, pid" not in text and "restarting in" not in text
