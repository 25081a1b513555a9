"""Each input the hardening probe found ending in exit 1 and a traceback: now exit 2, one line
`FILE: field: what is wrong` on stderr, nothing written. In process (the `igniter` fixture) for
speed; the agent's assignment through `igniter-agent apply`."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.chaos.report import record
from tests.conftest import ROOT, Result
from tests.kit.agent import agent_cmd

pytestmark = [pytest.mark.e2e, pytest.mark.chaos]
EXAMPLE = ROOT / "policies" / "example.yaml"
NAMES = ["alexnet-a", "resnet50-a", "vgg19-a", "ssd-a"]


def _policy(tmp: Path, change: Callable[[str], str] = lambda t: t) -> Path:
    path = tmp / "policy.yaml"
    path.write_text(change(EXAMPLE.read_text()))
    return path


def _trace(tmp: Path, body: bytes) -> Path:
    path = tmp / "trace.csv"
    path.write_bytes(body)
    return path


def _profile_1e300(tmp: Path) -> Path:
    shutil.copytree(ROOT / "policies" / "profiles", tmp / "profiles")
    prof = tmp / "profiles" / "v100.yaml"
    data = yaml.safe_load(prof.read_text())
    data["models"]["alexnet"]["gpu_latency_ms"][0][0] = 1e300
    prof.write_text(yaml.safe_dump(data))
    return _policy(tmp, lambda t: t + "profiles_dir: profiles\n")


def _state_not_json(tmp: Path) -> list[str]:
    policy = tmp / "local.yaml"
    policy.write_text(
        yaml.safe_dump(
            {
                "fleet": "bad-state",
                "instance_types": [{"name": "p3.2xlarge", "gpu": "v100", "gpus": 1, "price_per_hour": 3.06}],
                "workloads": [{"name": "a", "model": "alexnet", "slo_ms": 15, "rate_rps": 0}],
                "agents": {"transport": "none"},
                "gateway": {"kind": "none"},
                "provider": {"kind": "local", "state_root": str(tmp / "inst")},
                "leader": {"kind": "local", "lock_dir": str(tmp / "locks")},
            }
        )
    )
    state = tmp / "state.sqlite"
    db = sqlite3.connect(state)
    db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    db.execute("INSERT INTO meta VALUES ('controller_state', '{not json')")
    db.commit()
    db.close()
    return ["run", str(policy), "--once", "--state", str(state)]


ROWS = b"0,10,1,1,1\n60,20,1,1,1\n"
HEADER = b"time_s," + ",".join(NAMES).encode() + b"\n"
CASES: dict[str, tuple[Callable[[Path], list[str]], str]] = {
    "5000-digit integer": (
        lambda t: ["validate", str(_policy(t, lambda x: x.replace("rate_rps: 500", "rate_rps: " + "9" * 5000)))],
        "policy.yaml: line 12: an integer of 5,000 digits",
    ),
    "YAML nested 5000 deep": (
        lambda t: ["validate", str(_policy(t, lambda x: x + "extra: " + "[" * 5000 + "]" * 5000 + "\n"))],
        "policy.yaml: line 20: nested more than 64 deep",
    ),
    "profile latency 1e300": (
        lambda t: ["validate", str(_profile_1e300(t))],
        "v100.yaml: models.alexnet.gpu_latency_ms[0][0]: 1e+300 is above the ceiling",
    ),
    "listen port 99999": (
        lambda t: ["validate", str(_policy(t, lambda x: x + "gateway: {listen: '127.0.0.1:99999'}\n"))],
        "policy.yaml: gateway.listen: port 99999 is not a TCP port",
    ),
    "agent_command unclosed quote": (
        lambda t: ["validate", str(_policy(t, lambda x: x + "agents: {agent_command: 'igniter-agent \"x'}\n"))],
        "policy.yaml: agents.agent_command: not a command line: No closing quotation",
    ),
    "controller_state not JSON": (_state_not_json, "state.sqlite: meta.controller_state: is not JSON"),
    "trace spanning 9.5 years": (
        lambda t: ["simulate", str(EXAMPLE), "--trace", str(_trace(t, HEADER + b"0,10,1,1,1\n299592000,20,1,1,1\n"))],
        "trace.csv: time_s: replaying it takes",
    ),
    "rate_rps: true": (
        lambda t: ["validate", str(_policy(t, lambda x: x.replace("rate_rps: 500", "rate_rps: true")))],
        "policy.yaml: workloads[0].rate_rps: Input should be a valid number",
    ),
}


def _files(tmp: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(tmp.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("case", CASES)
def test_bad_input_exits_2_with_one_line(case: str, tmp_path: Path, igniter: Callable[..., Result]) -> None:
    build, want = CASES[case]
    args = build(tmp_path)
    before = _files(tmp_path)
    got = igniter(*args)
    lines = got.err.strip().splitlines()
    record("bad_input", case=case, exit_code=got.code, tracebacks=got.err.count("Traceback"), lines=len(lines))
    assert got.code == 2, got.err
    assert len(lines) == 1 and "Traceback" not in got.err, got.err
    assert want in lines[0], lines[0]
    assert _files(tmp_path) == before  # nothing written, nothing changed


def test_a_trace_with_a_utf8_bom_is_read(tmp_path: Path, igniter: Callable[..., Result]) -> None:
    from autoscaler.sim.traces import read_wide

    trace = read_wide(_trace(tmp_path, b"\xef\xbb\xbf" + HEADER + ROWS))
    assert trace.names == NAMES and list(trace.times) == [0.0, 60.0]


@pytest.mark.e2e
def test_a_generation_given_as_a_string_is_refused(tmp_path: Path) -> None:
    state = tmp_path / "state"
    path = tmp_path / "assignment.json"
    path.write_text(json.dumps({"generation": "5", "servers": []}))
    done = subprocess.run(
        agent_cmd("apply", "--state-dir", str(state), str(path)), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().count("\n") == 0 and "generation" in done.stderr, done.stderr
    assert not state.exists() or not any(state.iterdir())
