"""`igniter-agent apply` with malformed MIG slices, against the fake device in the state directory
(two A100 80GB, MIG mode off on GPU 1): exit 2, one line naming the field, nothing changed."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agents.node.mig_fake import FAKE_FILE, FakeMig
from tests.kit.agent import agent_cmd, server_spec

pytestmark = pytest.mark.e2e


def _apply(state_dir: Path, doc: dict[str, Any]) -> subprocess.CompletedProcess:
    argv = agent_cmd("apply", "--state-dir", str(state_dir), "-")
    return subprocess.run(argv, input=json.dumps(doc), capture_output=True, text=True, timeout=60)


def _server(cnn_dir: Path, i: int, gpu: int, profile: str, start: int, workload: str) -> dict[str, Any]:
    spec = server_spec(f"s{i}", cnn_dir, 8200 + i, gpu_index=gpu, mig_profile=profile, mig_start=start)
    return spec | {"workload": workload}


def _snapshot(state_dir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(state_dir)): p.read_bytes() for p in sorted(state_dir.rglob("*")) if p.is_file()}


@pytest.fixture
def state(tmp_path: Path, cnn_dir: Path) -> Path:
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    FakeMig.make(state_dir / FAKE_FILE, "a100-80gb", gpus=2, mig_off=(1,))
    first = {"generation": 1, "servers": [_server(cnn_dir, 0, 0, "3g.40gb", 4, "a")]}
    done = _apply(state_dir, first)
    assert done.returncode == 0, done.stderr
    return state_dir


@pytest.mark.parametrize(
    ("slices", "expected"),
    [
        (
            [(0, "3g.40gb", 0, "a"), (0, "4g.40gb", 0, "b")],
            "<stdin>: servers[1].mig_start: slice 4g.40gb@0 on GPU 0 overlaps slice 3g.40gb@0 (servers[0]) "
            "on memory unit 0",
        ),
        ([(0, "3g.40gb", 1, "a")], "<stdin>: servers[0].mig_start: 3g.40gb may start at 0, 4 on a100-80gb, not 1"),
        (
            [(0, "2g.20gb", 0, "a"), (0, "2g.20gb", 0, "b")],
            "<stdin>: servers[1].workload: slice 2g.20gb@0 on GPU 0 already runs workload 'a' (servers[0]); "
            "one workload per slice",
        ),
        ([(1, "7g.80gb", 0, "a")], "<stdin>: servers[0].mig_profile: GPU 1 (NVIDIA A100-SXM4-80GB) has MIG mode off"),
    ],
)
def test_a_malformed_cut_is_exit_2_naming_the_field_and_changes_nothing(
    state: Path, cnn_dir: Path, slices: list[tuple[int, str, int, str]], expected: str
) -> None:
    before = _snapshot(state)
    doc = {"generation": 2, "servers": [_server(cnn_dir, i, *s) for i, s in enumerate(slices)]}
    done = _apply(state, doc)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(expected) and "Traceback" not in done.stderr
    assert _snapshot(state) == before


def test_a_slice_on_a_vm_without_mig_is_refused(tmp_path: Path, cnn_dir: Path) -> None:
    done = _apply(tmp_path / "plain", {"generation": 1, "servers": [_server(cnn_dir, 0, 0, "3g.40gb", 0, "a")]})
    assert done.returncode == 2  # on a machine without GPUs; a GPU without MIG mode names mig_profile
    assert done.stderr.strip() in (
        "<stdin>: servers[0].gpu_index: a MIG slice on GPU 0, but this VM has no GPU",
        "<stdin>: servers[0].mig_profile: GPU 0 " + done.stderr.split("GPU 0 ", 1)[-1].strip(),
    )
    assert not (tmp_path / "plain" / "assignment.json").exists()


def test_a_bad_fake_mig_flag_is_exit_2_and_creates_nothing(tmp_path: Path) -> None:
    for extra, expected in (
        (["--no-gpu", "--fake-mig", "v100"], "igniter-agent run: --fake-mig: unknown GPU 'v100'"),
        (["--fake-mig", "a100-80gb"], "igniter-agent run: --fake-mig: needs --no-gpu"),
        (["--no-gpu", "--fake-mig", "h100-80gb", "--fake-gpus", "0"], "igniter-agent run: --fake-gpus: must be 1..16"),
        (["--fake-mps"], "igniter-agent run: --fake-mps: needs --no-gpu"),
    ):
        done = subprocess.run(
            agent_cmd("run", "--state-dir", str(tmp_path / "st"), *extra), capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 2 and done.stderr.startswith(expected), done.stderr
        assert not (tmp_path / "st").exists()
