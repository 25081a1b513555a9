"""`--version` on both commands, and `--log-format json`: one object per line, fleet and tick on each.

The e2e test runs `igniter run` for real (EC2 is moto on 127.0.0.1, agents are not contacted) for a
few one-second ticks, so APScheduler's per-tick INFO lines would show up if they were not silenced.
"""

from __future__ import annotations

import importlib.metadata
import io
import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agents import logs
from agents.cli import main as agent_main
from autoscaler.cli import main as igniter_main
from tests.fleet.test_ec2 import policy_file, setup_templates
from tests.kit.backends import Moto
from tests.kit.control import REPO

KEYS = {"time", "level", "logger", "message", "fleet", "tick"}
TEXT_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO|WARNING|ERROR|CRITICAL) [\w.\-]+: ")


@pytest.mark.unit
@pytest.mark.parametrize(("main", "prog"), [(igniter_main, "igniter"), (agent_main, "igniter-agent")])
def test_version_is_the_distributions(main: object, prog: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])  # type: ignore[operator]
    assert done.value.code == 0
    assert capsys.readouterr().out == f"{prog} {importlib.metadata.version('igniter-autoscaler')}\n"


@pytest.fixture
def restore_logging() -> object:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield None
    root.handlers[:] = handlers
    root.setLevel(level)
    logs.set_fleet(None)


@pytest.mark.unit
def test_json_lines_carry_fleet_and_tick(restore_logging: object, monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    monkeypatch.setattr(sys, "stderr", out)
    logs.configure("json")
    logs.set_fleet("prod")
    with logs.tick_context(7):
        logging.getLogger("autoscaler.loop.tick.controller").info("new layout:\n%d slot(s)", 3)
        try:
            raise ValueError("boom")
        except ValueError:
            logging.getLogger("igniter").exception("tick failed")
    logging.getLogger("apscheduler.executors.default").info("Running job")  # silenced
    first, second, *rest = [json.loads(line) for line in out.getvalue().splitlines()]
    assert not rest
    assert first.keys() == KEYS and first["fleet"] == "prod" and first["tick"] == 7
    assert first["message"] == "new layout:\n3 slot(s)" and first["level"] == "INFO"
    assert first["time"].endswith("+00:00")
    assert second["level"] == "ERROR" and "ValueError: boom" in second["exc"]


@pytest.mark.unit
def test_text_lines_name_the_level_once(restore_logging: object, monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    monkeypatch.setattr(sys, "stderr", out)
    logs.configure("text")
    logging.getLogger("igniter-agent").warning("server a: exited")
    (line,) = out.getvalue().splitlines()
    assert TEXT_LINE.match(line) and line.count("WARNING") == 1, line


@pytest.mark.unit
@pytest.mark.parametrize("argv", [["--log-format", "yaml", "validate", "x"], ["run", "x", "--log-format", "xml"]])
def test_unknown_log_format_is_a_usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        igniter_main(argv)
    assert done.value.code == 2 and "--log-format" in capsys.readouterr().err


@pytest.mark.e2e
@pytest.mark.parametrize("where", ["before", "after"])
def test_igniter_run_logs_json_lines_with_the_tick(moto: Moto, tmp_path: Path, where: str) -> None:
    setup_templates(moto)
    path = policy_file(tmp_path, moto, interval_s=1)
    flag = ["--log-format", "json"]
    run = ["run", str(path), "--state", str(tmp_path / "s.sqlite"), "--no-status"]
    argv = [*flag, *run] if where == "before" else [*run, *flag]
    log = tmp_path / "igniter.log"
    with log.open("wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "autoscaler", *argv], cwd=REPO, stderr=err, env=os.environ)
        try:
            deadline = time.monotonic() + 60
            while '"tick": 3' not in log.read_text() and time.monotonic() < deadline:
                time.sleep(0.2)
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=60) == 0
    entries = [json.loads(line) for line in log.read_text().splitlines()]  # every line is one object
    assert all(e.keys() == KEYS and e["fleet"] == "prod" for e in entries)
    ticks = {e["tick"] for e in entries if e["tick"] is not None}
    assert {1, 2, 3} <= ticks, ticks
    assert any(e["logger"] == "autoscaler.loop.tick.controller" and e["tick"] == 1 for e in entries)
    assert not [e for e in entries if e["logger"].startswith("apscheduler")], "scheduler noise per tick"
