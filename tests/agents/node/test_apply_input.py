"""`igniter-agent apply` on malformed input: exit 2, one line naming the file and the field or line,
no traceback, and the state directory exactly as it was. Also: what the agent writes is private."""

from __future__ import annotations

import json
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from tests.kit.agent import Agent, agent_cmd, free_port, server_spec

pytestmark = pytest.mark.e2e


def _doc(cnn_dir: Path, **server: object) -> dict:
    return {"generation": 2, "servers": [{**server_spec("a", cnn_dir, 8101), **server}]}


def _apply(state_dir: Path, data: bytes, *, stdin: bool = False) -> subprocess.CompletedProcess:
    if stdin:
        argv, given = agent_cmd("apply", "--state-dir", str(state_dir), "-"), data
    else:
        path = state_dir.parent / "assignment.json"
        path.write_bytes(data)
        argv, given = agent_cmd("apply", "--state-dir", str(state_dir), str(path)), None
    return subprocess.run(argv, input=given, capture_output=True, timeout=60)


def _snapshot(state_dir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(state_dir)): p.read_bytes() for p in sorted(state_dir.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def generation_1(tmp_path_factory: pytest.TempPathFactory, cnn_dir: Path) -> Path:
    """A state directory that a real `apply` brought to generation 1, once for the module: what it
    holds names no path of its own, so a copy is the state that apply would leave in another place."""
    state_dir = tmp_path_factory.mktemp("generation-1") / "state"
    first = json.dumps({"generation": 1, "servers": [server_spec("a", cnn_dir, 8101)]}).encode()
    assert _apply(state_dir, first).returncode == 0
    return state_dir


@pytest.fixture
def state(tmp_path: Path, generation_1: Path) -> Path:
    """A state directory that already holds generation 1, so `nothing changed` means something:
    a copy of `generation_1`, modes included (copytree keeps them)."""
    state_dir = tmp_path / "state"
    shutil.copytree(generation_1, state_dir)
    return state_dir


def _bad(cnn_dir: Path, **server: object) -> bytes:
    return json.dumps(_doc(cnn_dir, **server)).encode()


def _swap(data: bytes, old: bytes, new: bytes) -> bytes:
    assert old in data, (old, data)
    return data.replace(old, new)


CASES = {
    "not-utf8": (
        lambda d: b'{"generation": 2,\n "servers": [{"name": "caf\xe9"}]}',
        "line 2: not UTF-8 text (byte 0xe9 at offset 44)",
    ),
    "deep-nesting": (lambda d: b"[" * 100_000 + b"]" * 100_000, "line 1: JSON nested deeper than 32 levels"),
    "deep-object": (
        lambda d: b'{"generation": 2, "servers": ' + b'{"a": ' * 50_000 + b"1" + b"}" * 50_001,
        "line 1: JSON nested deeper than 32 levels",
    ),
    "duplicate-key": (
        lambda d: _swap(json.dumps(_doc(d), indent=1).encode(), b'"port": 8101', b'"port": 8101,\n   "port": 8102'),
        "servers[0].port: duplicate key on line 11 (first on line 10)",
    ),
    "duplicate-top-level": (
        lambda d: b'{"generation": 2,\n"servers": [],\n"generation": 3}',
        "generation: duplicate key on line 3 (first on line 1)",
    ),
    "host-not-ip": (
        lambda d: _bad(d, host="gpu-node.internal"),
        "servers[0].host: must be an IP address such as 127.0.0.1 or 0.0.0.0, got 'gpu-node.internal'",
    ),
    "nan": (
        lambda d: _swap(_bad(d), b'"mps_percent": 50.0', b'"mps_percent": NaN'),
        "servers[0].mps_percent: Input should be a finite number",
    ),
    "infinity": (
        lambda d: _swap(
            _bad(d, max_queue_delay_ms=5.0), b'"max_queue_delay_ms": 5.0', b'"max_queue_delay_ms": Infinity'
        ),
        "servers[0].max_queue_delay_ms: Input should be a finite number",
    ),
    "overflow": (
        lambda d: _swap(_bad(d, drain_timeout_s=1.0), b'"drain_timeout_s": 1.0', b'"drain_timeout_s": 1e999'),
        "servers[0].drain_timeout_s: Input should be a finite number",
    ),
    "huge-integer": (
        lambda d: b'{"generation": ' + b"9" * 5000 + b', "servers": []}',
        "invalid JSON: Exceeds the limit (4300 digits) for integer string conversion",
    ),
    # strict types (issue 51): a boolean or a string is no number, a float no whole number
    "mig-start-true": (lambda d: _bad(d, mig_start=True), "servers[0].mig_start: Input should be a valid integer"),
    "port-true": (lambda d: _bad(d, port=True), "servers[0].port: Input should be a valid integer"),
    "port-string": (lambda d: _bad(d, port="24001"), "servers[0].port: Input should be a valid integer"),
    "batch-true": (lambda d: _bad(d, batch=True), "servers[0].batch: Input should be a valid integer"),
    "batch-float": (lambda d: _bad(d, batch=8.0), "servers[0].batch: Input should be a valid integer"),
    "gpu-index-false": (lambda d: _bad(d, gpu_index=False), "servers[0].gpu_index: Input should be a valid integer"),
    "processes-true": (lambda d: _bad(d, processes=True), "servers[0].processes: Input should be a valid integer"),
    "mps-percent-true": (lambda d: _bad(d, mps_percent=True), "servers[0].mps_percent: Input should be a valid number"),
    "name-number": (lambda d: _bad(d, name=7), "servers[0].name: Input should be a valid string"),
    "host-public": (
        lambda d: _bad(d, host="8.8.8.8"),
        "servers[0].host: 8.8.8.8 is a public address: a server binds a loopback or private one",
    ),
    "host-public-v6-mapped": (lambda d: _bad(d, host="::ffff:8.8.8.8"), "servers[0].host: ::ffff:808:808 is a public"),
    "thousand-servers-of-64-processes": (
        lambda d: json.dumps(
            {
                "generation": 2,
                "servers": [server_spec(f"s{i}", d, 20000 + i, processes=64) for i in range(1000)],
            }
        ).encode(),
        "processes by this server, more than the",
    ),
    "generation-past-int64": (
        lambda d: b'{"generation": ' + str(2**63).encode() + b', "servers": []}',
        "generation: Input should be less than or equal to 9223372036854775807",
    ),
}


@pytest.mark.parametrize("stdin", [False, True], ids=["file", "stdin"])
@pytest.mark.parametrize("case", list(CASES))
def test_malformed_assignments_exit_2_naming_the_place_and_change_nothing(
    state: Path, cnn_dir: Path, case: str, stdin: bool
) -> None:
    make, expected = CASES[case]
    before = _snapshot(state)
    done = _apply(state, make(cnn_dir), stdin=stdin)
    source = "<stdin>" if stdin else str(state.parent / "assignment.json")
    stderr = done.stderr.decode()
    assert done.returncode == 2, stderr
    assert stderr.startswith(f"{source}: ") and expected in stderr, stderr
    assert stderr.count("\n") == 1 and "Traceback" not in stderr
    assert _snapshot(state) == before


@pytest.mark.parametrize("host", ["127.0.0.1", "10.0.1.5", "172.31.0.9", "192.168.1.1", "100.64.0.1", "::1", "fd00::5"])
def test_loopback_and_private_hosts_are_taken(state: Path, cnn_dir: Path, host: str) -> None:
    done = _apply(state, _bad(cnn_dir, host=host))
    assert done.returncode == 0, done.stderr


def test_a_valid_host_is_normalised_and_kept(state: Path, cnn_dir: Path) -> None:
    done = _apply(state, _bad(cnn_dir, host="0.0.0.0", drain_timeout_s=12.5))
    assert done.returncode == 0, done.stderr
    server = json.loads((state / "assignment.json").read_text())["servers"][0]
    assert (server["host"], server["drain_timeout_s"]) == ("0.0.0.0", 12.5)


def _modes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)) or ".": stat.S_IMODE(p.stat().st_mode) for p in [root, *root.rglob("*")]}


def test_every_state_file_is_0600_and_every_directory_0700(tmp_path: Path, cnn_dir: Path) -> None:
    """Even from a permissive umask, and even for a state directory that exists with wider modes."""
    state_dir = tmp_path / "state"
    state_dir.mkdir(mode=0o755)
    state_dir.chmod(0o755)
    running = Agent(state_dir)
    try:
        running.apply([server_spec("a", cnn_dir, free_port())])
        modes = _modes(state_dir)
    finally:
        running.close()
    expected = {"assignment.json", "status.json", "agent.lock", "apply.lock", "run/a.stats.json", "logs/a.log"}
    assert expected <= modes.keys(), sorted(modes)
    wrong = {
        name: oct(mode)
        for name, mode in modes.items()
        if mode != (0o700 if (state_dir / name).is_dir() or name == "." else 0o600)
    }
    assert not wrong, wrong
