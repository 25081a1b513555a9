"""SSH transport against a real OpenSSH sshd on 127.0.0.1 and a real igniter-agent."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from agents.fsutil import atomic_write_json
from agents.launch import resolve_agent_command
from autoscaler.config.policy import AgentsConfig
from autoscaler.fleet.base import Instance
from autoscaler.transport.base import TransportError, TransportFault, parse_status
from autoscaler.transport.ssh import SshTransport
from tests.kit import web
from tests.kit.backends import Sshd, free_port

pytestmark = pytest.mark.e2e


AGENT = resolve_agent_command("igniter-agent")
INSTANCE = Instance(
    id="i-0123", instance_type="p3.2xlarge", slot="f-p3-0", state="running", launched_at=0.0, address="10.1.2.3"
)


@contextmanager
def running_agent(state_dir: Path) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(
        [*AGENT, "run", "--state-dir", str(state_dir), "--no-gpu"],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=open(state_dir.parent / "agent.log", "wb"),
    )
    try:
        yield proc
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def config(sshd: Sshd, state_dir: Path, **kw: object) -> AgentsConfig:
    base = {
        "transport": "ssh",
        "user": sshd.user,
        "key_file": str(sshd.key_file),
        "known_hosts": str(sshd.known_hosts),
        "port": sshd.port,
        "connect_timeout_s": 5,
        "command_timeout_s": 60,
        "host_override": "127.0.0.1",
        "agent_command": shlex.join(AGENT),
        "state_dir": str(state_dir),
    }
    return AgentsConfig.model_validate({**base, **kw})


def test_applies_an_assignment_to_a_real_agent_and_reads_status(
    sshd: Sshd, tiny_model_dir: Path, tmp_path: Path
) -> None:
    state = tmp_path / "agent"
    state.mkdir()
    port = free_port()
    transport = SshTransport(config(sshd, state))
    assignment = {
        "generation": 1,
        "servers": [
            {
                "name": "tiny-0",
                "workload": "tiny",
                "model_dir": str(tiny_model_dir),
                "batch": 2,
                "mps_percent": 50.0,
                "gpu_index": 0,
                "port": port,
                "max_queue_delay_ms": 2.0,
            }
        ],
    }
    with running_agent(state):
        transport.apply(INSTANCE, assignment)
        client = transport._pool[(INSTANCE.id, "127.0.0.1", sshd.port)]
        deadline = time.monotonic() + 60
        status = parse_status(transport.status(INSTANCE))
        while status.ready_names() != {"tiny-0"} and time.monotonic() < deadline:
            time.sleep(0.3)
            status = parse_status(transport.status(INSTANCE))
        assert status.ready_names() == {"tiny-0"} and status.assignment_generation == 1 and status.running
        assert list(transport._pool.values()) == [client]  # one pooled connection, reused
        reply = web.post(
            f"http://127.0.0.1:{port}/v2/models/tiny/infer",
            timeout=10,
            json={"inputs": [{"name": "x", "shape": [1, 8], "datatype": "FP32", "data": [0.5] * 8}]},
        )
        assert reply.status_code == 200 and reply.json()["outputs"][0]["shape"] == [1, 4]
        with pytest.raises(TransportError) as bad:  # an older generation: exit 2
            transport.apply(INSTANCE, {**assignment, "generation": 0})
        assert bad.value.retryable is False and "exited 2" in str(bad.value)
    transport.close()


def test_status_is_the_agents_file_at_a_quoted_path(sshd: Sshd, tmp_path: Path) -> None:
    """Status over real SSH reads status.json (`cat`, no agent process) at a quoted path, on one
    pooled connection and one session kept open for the reads: none yet is an agent not ready, a
    fresh one is the document, a stale heartbeat (by the node's clock) is a silent agent; a file
    that is no JSON is a garbled reply, which closes the session, and the next read opens another."""
    marker = tmp_path / "pwned"
    evil = tmp_path / f"dir with space; touch {marker}"
    transport = SshTransport(config(sshd, evil))
    assert "'" in transport.command("apply")
    with pytest.raises(TransportError) as none_yet:
        transport.status(INSTANCE)
    assert none_yet.value.kind is TransportFault.NOT_READY and none_yet.value.retryable
    assert not marker.exists()
    doc = {"generation": 4, "servers": [{"name": "a-0", "workload": "a", "state": "ready"}], "agent_running": True}
    atomic_write_json(evil / "status.json", {**doc, "heartbeat_at": time.time()})
    [(key, (_, _, session))] = transport._readers.items()
    got = transport.status(INSTANCE)
    assert parse_status(got).ready_names() == {"a-0"} and got["generation"] == 4
    for _ in range(3):
        assert transport.status(INSTANCE) == got
    assert transport._readers[key][2] is session and not session.closed  # one session for every read
    (evil / "status.json").write_text('{"generation": 4, "serv\x1e')  # torn, with a frame end in it
    with pytest.raises(TransportError) as garbled:
        transport.status(INSTANCE)
    assert garbled.value.kind is TransportFault.UNREACHABLE and session.closed and key not in transport._readers
    atomic_write_json(evil / "status.json", {**doc, "heartbeat_at": time.time()})
    assert transport.status(INSTANCE)["generation"] == 4
    assert transport._readers[key][2] is not session  # a new session, the same connection
    atomic_write_json(evil / "status.json", {**doc, "heartbeat_at": time.time() - transport.stale_s - 5})
    with pytest.raises(TransportError) as silent:
        transport.status(INSTANCE)
    assert silent.value.kind is TransportFault.UNREACHABLE and "silent" in str(silent.value)
    assert len(transport._pool) == 1 and not marker.exists()
    transport.close()


def test_unknown_host_key_is_refused(sshd: Sshd, tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    transport = SshTransport(config(sshd, tmp_path, known_hosts=str(empty)))
    with pytest.raises(TransportError) as err:
        transport.status(INSTANCE)
    assert err.value.retryable is False and "known_hosts" in str(err.value)
    assert empty.read_text() == "" and not transport._pool  # never added


def test_changed_host_key_is_refused(sshd: Sshd, tmp_path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "other")], check=True)
    other = " ".join((tmp_path / "other.pub").read_text().split()[:2])
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{sshd.port} {other}\n")
    with pytest.raises(TransportError) as err:
        SshTransport(config(sshd, tmp_path, known_hosts=str(known))).status(INSTANCE)
    assert err.value.retryable is False


def test_unreachable_host_is_retryable(sshd: Sshd, tmp_path: Path) -> None:
    transport = SshTransport(config(sshd, tmp_path, port=free_port(), connect_timeout_s=2))
    with pytest.raises(TransportError) as err:
        transport.status(INSTANCE)
    assert err.value.retryable is True
