"""Agent status read from the daemon's status.json (issue 50 item 2): the same document the CLI
prints, a missing file is an agent not ready, a stale heartbeat an agent gone silent, and a
reader never sees half a document while the daemon rewrites it."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agents.node.daemon import Daemon, lock_state_dir
from agents.node.gpu import NoGpu
from agents.node.mps_fake import FakeMps
from agents.node.status import read_status
from autoscaler.fleet.base import Instance
from autoscaler.transport.base import TransportFault, parse_status
from autoscaler.transport.local import LocalTransport
from autoscaler.transport.status_file import (
    STALE_AFTER_S,
    TransportError,
    parse_frame,
    parse_remote,
    reader_command,
)

pytestmark = pytest.mark.unit


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[Daemon]:
    """A daemon that holds its state directory's lock, as a running agent does."""
    state = tmp_path / "state"
    state.mkdir()
    lock = lock_state_dir(state)
    yield Daemon(state, FakeMps(tmp_path / "mps"), NoGpu(), device="cpu")
    lock.close()


def _status(state_dir: Path) -> dict:
    inst = Instance(id="i-1", instance_type="t", slot="s", state="running", launched_at=0.0, state_dir=str(state_dir))
    return LocalTransport(agent_command="true", state_dir="/nonexistent").status(inst)


def test_fresh_status_is_the_document_the_cli_prints(agent: Daemon) -> None:
    agent.write_status()
    doc = _status(agent.state_dir)
    assert doc == read_status(agent.state_dir)  # the same keys and values as `igniter-agent status --json`
    assert doc["agent_running"] is True and parse_status(doc).running


def test_missing_file_locally_is_the_clis_empty_document(agent: Daemon, tmp_path: Path) -> None:
    """Over SSH a missing file is NOT_READY (test_remote_reply...); here, where the lock says
    whether an agent lives, it is what `igniter-agent status --json` prints, as before."""
    starting = _status(agent.state_dir)  # the lock is held, nothing written yet
    assert starting == read_status(agent.state_dir) and starting["agent_running"] is True
    assert starting["generation"] is None and starting["servers"] == []
    nobody = _status(tmp_path / "none")
    assert nobody == read_status(tmp_path / "none") and not parse_status(nobody).running


def test_stale_heartbeat_is_a_silent_agent(agent: Daemon) -> None:
    agent.write_status()
    doc = json.loads((agent.state_dir / "status.json").read_text())
    doc["heartbeat_at"] = time.time() - STALE_AFTER_S - 5  # the lock is held: alive, but frozen
    (agent.state_dir / "status.json").write_text(json.dumps(doc))
    with pytest.raises(TransportError) as err:
        _status(agent.state_dir)
    assert err.value.kind is TransportFault.UNREACHABLE and "silent" in str(err.value)


def test_a_stopped_agent_says_so_and_its_servers_are_stopped(tmp_path: Path) -> None:
    doc = {"generation": 3, "servers": [{"name": "a", "state": "ready", "pid": 7}], "heartbeat_at": 0.0}
    (tmp_path / "status.json").write_text(json.dumps(doc))  # nobody holds the lock
    got = _status(tmp_path)
    assert got["agent_running"] is False and got["servers"] == [{"name": "a", "state": "stopped", "pid": None}]
    assert got == read_status(tmp_path)


@pytest.mark.parametrize("kind", ["fifo", "garbled", "list"])
def test_odd_files_are_a_garbled_reply_never_a_blocking_read(agent: Daemon, kind: str) -> None:
    path = agent.state_dir / "status.json"
    if kind == "fifo":
        os.mkfifo(path, 0o600)  # an open for reading would block until a writer came
    else:
        path.write_text('{"generation": 1, "serv' if kind == "garbled" else "[]")
    with pytest.raises(TransportError) as err:
        _status(agent.state_dir)
    assert err.value.kind is TransportFault.UNREACHABLE


def test_reads_never_see_a_torn_file_while_the_daemon_rewrites_it(agent: Daemon) -> None:
    """The daemon's write path (temp file + rename) under a reader in a tight loop: every read
    parses, and each document is whole (its servers list has the length its generation says)."""
    stop = threading.Event()

    def write() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            agent.applied = None
            status = agent.status()
            status["generation"] = n
            status["servers"] = [{"name": f"s{i}", "state": "ready", "pad": "x" * 200} for i in range(n % 50 * 20)]
            with agent._write_lock:
                agent._write(status)

    agent.write_status()
    writer = threading.Thread(target=write)
    writer.start()
    reads = 0
    try:
        deadline = time.monotonic() + 0.4
        while time.monotonic() < deadline:
            doc = _status(agent.state_dir)
            assert doc["generation"] is None or len(doc["servers"]) == doc["generation"] % 50 * 20
            reads += 1
    finally:
        stop.set()
        writer.join()
    assert reads > 20


def test_remote_reply_is_judged_by_the_nodes_clock() -> None:
    doc = {"generation": 2, "servers": [], "heartbeat_at": 1000.0}
    assert parse_remote(0, "1005\n" + json.dumps(doc), "", "h:22") == doc  # fresh by the node's clock
    with pytest.raises(TransportError) as stale:
        parse_remote(0, f"{1001 + STALE_AFTER_S:.0f}\n" + json.dumps(doc), "", "h:22")
    assert stale.value.kind is TransportFault.UNREACHABLE and "silent" in str(stale.value)
    with pytest.raises(TransportError) as missing:
        parse_remote(3, "", "", "h:22")
    assert missing.value.kind is TransportFault.NOT_READY
    with pytest.raises(TransportError) as garbled:
        parse_remote(0, "1005\n{", "", "h:22")
    assert garbled.value.kind is TransportFault.UNREACHABLE


def test_reader_command_quotes_the_state_directory() -> None:
    line = reader_command("/var/lib/a dir; touch x")
    assert "'/var/lib/a dir; touch x/status.json'" in line and "python" not in line


def test_a_frame_is_the_document_none_yet_or_a_failed_read() -> None:
    doc = {"generation": 2, "servers": [], "heartbeat_at": 1000.0}
    assert parse_frame("1005\n" + json.dumps(doc), "", "h:22") == doc
    with pytest.raises(TransportError) as missing:
        parse_frame("none\n", "", "h:22")
    assert missing.value.kind is TransportFault.NOT_READY
    with pytest.raises(TransportError) as failed:
        parse_frame("1005\n", "cat: status.json: Permission denied\n", "h:22")
    assert failed.value.kind is TransportFault.UNREACHABLE and "Permission denied" in str(failed.value)
