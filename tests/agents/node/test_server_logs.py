"""`igniter-agent --log-format json` reaches the inference servers it starts: a real agent process,
a real server on the tiny model and one whose model is broken; every line of both servers' logs is
one JSON object with the agent's fields, and the broken one's last_error is its message, not the
JSON line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agents.node.supervisor import last_line
from tests.kit.agent import Agent, free_port, server_spec, wait_until

pytestmark = pytest.mark.e2e
KEYS = {"time", "level", "logger", "message", "fleet", "tick"}


def _entries(path: Path) -> list[dict]:
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    assert lines, f"{path} is empty"
    return [json.loads(line) for line in lines]  # a line that is not one object fails here


def test_servers_log_in_the_agents_json_format(tmp_path: Path, tiny_model_dir: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "model.yaml").write_text((tiny_model_dir / "model.yaml").read_text())
    (broken / "model.pt").write_bytes(b"not a zip")
    state = tmp_path / "state"
    agent = Agent(state, "--log-format", "json")
    try:
        good, bad = server_spec("good", tiny_model_dir, free_port()), server_spec("bad", broken, free_port())
        agent.apply([good, bad], wait=None)
        wait_until(lambda: agent.servers().get("good", {}).get("state") == "ready", 90, "good ready")
        wait_until(lambda: agent.servers().get("bad", {}).get("last_error"), 30, "bad's error")
        last_error = agent.servers()["bad"]["last_error"]
        own = agent.read_log()
    finally:
        agent.close()
    ready = _entries(state / "logs" / "good.log")
    assert all(set(e) == KEYS and e["tick"] is None for e in ready)
    assert any(e["logger"] == "igniter-server" and e["message"].startswith("good: ready on") for e in ready), ready
    failed = _entries(state / "logs" / "bad.log")
    assert any(e["level"] == "ERROR" and "is not a TorchScript archive" in e["message"] for e in failed), failed
    assert "is not a TorchScript archive" in last_error and not last_error.startswith("{")
    assert all(json.loads(line) for line in own.splitlines() if line.strip())  # the agent's own


def test_last_line_reports_a_json_lines_message(tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    entry = {"time": "t", "level": "ERROR", "logger": "igniter-server", "message": "fatal: boom"}
    log.write_text("plain first\n" + json.dumps(entry) + "\n\n")
    assert last_line(log) == "fatal: boom"
    log.write_text('{"not": "a log entry"}\n')
    assert last_line(log) == '{"not": "a log entry"}'
