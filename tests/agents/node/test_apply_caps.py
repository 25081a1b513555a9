"""`igniter-agent apply` caps an assignment by the node (issue 51): processes by its memory, and,
where its GPUs are known (here: the fake MIG device), `gpu_index` by their count and the processes
on one MPS server by its 48 clients. Past a cap: exit 2 naming the field, nothing handed over."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from agents.node.caps import MPS_CLIENTS, PROCESS_BYTES, memory_bytes
from agents.node.mig_fake import FAKE_FILE, FakeMig
from tests.kit.agent import agent_cmd, server_spec

pytestmark = pytest.mark.e2e


def _apply(state_dir: Path, servers: list[dict]) -> subprocess.CompletedProcess[str]:
    doc = json.dumps({"generation": 1, "servers": servers})
    argv = agent_cmd("apply", "--state-dir", str(state_dir), "-")
    return subprocess.run(argv, input=doc, capture_output=True, text=True, timeout=60)


def _refused(done: subprocess.CompletedProcess[str], state_dir: Path, field: str, words: str) -> None:
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"<stdin>: {field}: ") and words in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert not (state_dir / "assignment.json").exists()


def _servers(cnn_dir: Path, processes: list[int], **extra: object) -> list[dict]:
    return [server_spec(f"s{i}", cnn_dir, 21000 + i, processes=n, **extra) for i, n in enumerate(processes)]


def _split(total: int) -> list[int]:
    """`total` processes in servers of at most 64 (a server's own ceiling)."""
    return [64] * (total // 64) + ([total % 64] if total % 64 else [])


def test_the_memory_cap_takes_exactly_its_processes_and_refuses_one_more(tmp_path: Path, cnn_dir: Path) -> None:
    cap = max(1, memory_bytes() // PROCESS_BYTES)
    over = tmp_path / "over"
    done = _apply(over, _servers(cnn_dir, _split(cap + 1)))
    last = len(_split(cap + 1)) - 1
    _refused(done, over, f"servers[{last}].processes", f"{cap + 1:,} processes by this server, more than the {cap:,}")
    at = tmp_path / "at"
    done = _apply(at, _servers(cnn_dir, _split(cap)))
    assert done.returncode == 0, done.stderr
    assert sum(s["processes"] for s in json.loads((at / "assignment.json").read_text())["servers"]) == cap


@pytest.fixture
def two_gpus(tmp_path: Path) -> Path:
    """A state directory whose agent has two (fake, MIG off) GPUs: the node's GPUs are known."""
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    FakeMig.make(state_dir / FAKE_FILE, "a100-80gb", gpus=2, mig_off=(0, 1))
    return state_dir


def test_a_gpu_the_node_does_not_have_is_refused(two_gpus: Path, cnn_dir: Path) -> None:
    servers = [*_servers(cnn_dir, [1]), server_spec("s1", cnn_dir, 21001, gpu_index=2)]
    _refused(_apply(two_gpus, servers), two_gpus, "servers[1].gpu_index", "GPU 2 is not on this node (2 GPUs)")
    assert _apply(two_gpus, [server_spec("s1", cnn_dir, 21001, gpu_index=1)]).returncode == 0


def test_one_gpus_mps_server_takes_at_most_48_processes(two_gpus: Path, cnn_dir: Path) -> None:
    if max(1, memory_bytes() // PROCESS_BYTES) <= MPS_CLIENTS:
        pytest.skip("this machine's memory caps processes below the MPS cap")
    done = _apply(two_gpus, _servers(cnn_dir, [40, 9]))
    _refused(done, two_gpus, "servers[1].processes", f"49 processes on GPU 0, more than the {MPS_CLIENTS} clients")
    done = _apply(two_gpus, [*_servers(cnn_dir, [40]), server_spec("s1", cnn_dir, 21001, processes=9, gpu_index=1)])
    assert done.returncode == 0, done.stderr


def test_a_cpu_node_checks_no_gpu_index(tmp_path: Path, cnn_dir: Path) -> None:
    """No NVML and no fake MIG: the GPUs are not known, gpu_index is a label (--no-gpu agents)."""
    done = _apply(tmp_path / "cpu", [server_spec("s0", cnn_dir, 21000, gpu_index=3)])
    assert done.returncode == 0, done.stderr
