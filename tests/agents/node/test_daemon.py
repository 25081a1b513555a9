"""The daemon in-process: the pure diff, and convergence with a recording MPS stand-in, checking the
environment each real server process was started with (read back from /proc)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agents.node.apply import apply_assignment
from agents.node.daemon import ASSIGNMENT_FILE, HEARTBEAT_S, Daemon, server_changes
from agents.node.gpu import NoGpu
from agents.node.mps import share_text
from agents.node.supervisor import launch_server
from agents.spec import ServerSpec
from tests.kit.agent import free_port, wait_until


def _spec(name: str, **extra: Any) -> ServerSpec:
    return ServerSpec.model_validate(
        {"name": name, "workload": "w", "model_dir": "/m", "batch": 1, "mps_percent": 10, "port": 1, **extra}
    )


@pytest.mark.unit
def test_diff_starts_stops_restarts_and_keeps() -> None:
    running = {"a": _spec("a"), "b": _spec("b"), "c": _spec("c")}
    desired = {"a": _spec("a"), "b": _spec("b", mps_percent=20), "d": _spec("d")}
    changes = server_changes(running, desired)
    assert [s.name for s in changes.start] == ["d"]
    assert changes.stop == ("c",)
    assert [s.name for s in changes.restart] == ["b"]
    assert changes.keep == ("a",)


class FakeMps:
    """Records what the daemon asks of MPS; hands out the env a GPU server would get."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def ensure_running(self) -> None:
        self.calls.append("ensure_running")

    def server_env(self, spec: ServerSpec) -> dict[str, str]:
        return {
            "CUDA_VISIBLE_DEVICES": str(spec.gpu_index),
            "CUDA_MPS_PIPE_DIRECTORY": "/tmp/fake-mps-pipe",
            "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": share_text(spec.mps_percent),
        }

    def stop(self) -> None:
        self.calls.append("stop")

    def describe(self) -> dict[str, Any]:
        return {"enabled": True, "fake": True}


def _environ(daemon: Daemon, server: dict[str, Any]) -> dict[str, str]:
    """The GPU environment a server runs with, as it reports it (status `gpu_env`); for an exec'd
    server also as the kernel shows it (/proc/PID/environ: a forked server's is the zygote's)."""
    env: dict[str, str] = server["gpu_env"]
    if daemon.starter is launch_server:
        raw = Path(f"/proc/{server['pid']}/environ").read_bytes().split(b"\0")
        proc = dict(item.decode().split("=", 1) for item in raw if b"=" in item)
        assert {k: proc.get(k) for k in env} == env
    return env


@pytest.fixture
def daemon(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[Daemon, FakeMps]]:
    """A daemon on the CPU; its servers forked from the zygote (agents/node/zygote.py), or started
    as the indirect parameter says (`exec`)."""
    mps = FakeMps()
    running = Daemon(tmp_path / "state", mps, NoGpu(), device="cpu", start=getattr(request, "param", "auto"))
    yield running, mps
    running.shutdown()


def _apply(daemon: Daemon, generation: int, servers: list[dict[str, Any]]) -> None:
    apply_assignment(daemon.state_dir, json.dumps({"generation": generation, "servers": servers}), "test")


def _step_until_ready(daemon: Daemon, generation: int) -> dict[str, Any]:
    def ready() -> dict[str, Any] | None:
        daemon.step()
        status = daemon.status()
        states = [s["state"] for s in status["servers"]]
        return status if status["generation"] == generation and set(states) == {"ready"} else None

    return wait_until(ready, 30, f"generation {generation} ready", poll=0.1)


@pytest.mark.e2e
@pytest.mark.parametrize("daemon", ["exec", "fork"], indirect=True)
def test_servers_get_their_gpu_share_env_and_a_share_change_restarts_only_that_server(
    daemon: tuple[Daemon, FakeMps], cnn_dir: Path
) -> None:
    agent, mps = daemon
    a = {
        "name": "a",
        "workload": "wa",
        "model_dir": str(cnn_dir),
        "batch": 2,
        "mps_percent": 30.0,
        "gpu_index": 1,
        "port": free_port(),
    }
    b = dict(a, name="b", workload="wb", mps_percent=70.0, port=free_port())
    _apply(agent, 1, [a, b])
    first = {s["name"]: s for s in _step_until_ready(agent, 1)["servers"]}
    env = _environ(agent, first["a"])
    assert (env["CUDA_VISIBLE_DEVICES"], env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"], env["CUDA_MPS_PIPE_DIRECTORY"]) == (
        "1",
        "30",
        "/tmp/fake-mps-pipe",
    )
    assert _environ(agent, first["b"])["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "70"
    assert mps.calls == ["ensure_running", "ensure_running"]
    _apply(agent, 2, [dict(a, mps_percent=40.0), b])
    second = {s["name"]: s for s in _step_until_ready(agent, 2)["servers"]}
    assert second["b"]["pid"] == first["b"]["pid"]
    assert second["a"]["pid"] != first["a"]["pid"]
    assert _environ(agent, second["a"])["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "40"


@pytest.mark.e2e
def test_a_corrupt_assignment_file_is_reported_and_changes_nothing(
    daemon: tuple[Daemon, FakeMps], cnn_dir: Path
) -> None:
    agent, _ = daemon
    server = {
        "name": "a",
        "workload": "wa",
        "model_dir": str(cnn_dir),
        "batch": 1,
        "mps_percent": 30.0,
        "port": free_port(),
    }
    _apply(agent, 1, [server])
    pid = _step_until_ready(agent, 1)["servers"][0]["pid"]
    (agent.state_dir / ASSIGNMENT_FILE).write_text('{"generation": 2, "servers": [{"name": "a"}]}')
    agent.step()
    status = agent.status()
    assert status["generation"] == 1 and status["servers"][0]["pid"] == pid and status["servers"][0]["state"] == "ready"
    assert "servers[0].workload: required field is missing" in status["assignment_error"]


@pytest.mark.e2e
def test_shutdown_stops_servers_and_mps(daemon: tuple[Daemon, FakeMps], cnn_dir: Path) -> None:
    agent, mps = daemon
    _apply(
        agent,
        1,
        [
            {
                "name": "a",
                "workload": "wa",
                "model_dir": str(cnn_dir),
                "batch": 1,
                "mps_percent": 30.0,
                "port": free_port(),
            }
        ],
    )
    _step_until_ready(agent, 1)
    proc = agent.servers["a"].proc
    agent.shutdown()
    assert proc is not None and proc.returncode is not None
    assert mps.calls[-1] == "stop"
    last = json.loads((agent.state_dir / "status.json").read_text())
    assert [s["state"] for s in last["servers"]] == ["stopped"] and last["agent_running"] is False


@pytest.mark.unit
def test_heartbeat_refreshes_the_status_only_while_the_loop_is_late(daemon: tuple[Daemon, FakeMps]) -> None:
    agent, _ = daemon
    path = agent.state_dir / "status.json"
    agent.write_status()
    first = json.loads(path.read_text())
    agent.heartbeat()  # the loop just wrote it: nothing to do
    assert json.loads(path.read_text()) == first
    assert agent._written is not None
    agent._written = (agent._written[0], time.monotonic() - HEARTBEAT_S)  # the loop is busy
    agent.heartbeat()
    beat = json.loads(path.read_text())
    assert beat["heartbeat_at"] > first["heartbeat_at"]
    assert {**beat, "heartbeat_at": 0} == {**first, "heartbeat_at": 0}  # the same status, a fresh heartbeat


@pytest.mark.unit
def test_run_beats_then_leaves_a_status_that_says_it_stopped(daemon: tuple[Daemon, FakeMps]) -> None:
    agent, _ = daemon
    path = agent.state_dir / "status.json"
    stop = threading.Event()
    loop = threading.Thread(target=agent.run, args=(stop, 0.01))
    loop.start()
    wait_until(lambda: path.exists() and json.loads(path.read_text())["agent_running"], 5, "a first status")
    stop.set()
    loop.join(10)
    assert not loop.is_alive() and json.loads(path.read_text())["agent_running"] is False


@pytest.mark.unit
def test_a_new_generation_is_in_status_while_its_first_start_blocks(
    daemon: tuple[Daemon, FakeMps], cnn_dir: Path
) -> None:
    """A start may hold the loop for seconds (the first fork waits for the zygote's imports); what
    status says meanwhile, the heartbeat's copy, is the taken assignment with its servers starting."""
    agent, _ = daemon
    entered, release = threading.Event(), threading.Event()

    def slow_start(*_: object) -> Any:
        entered.set()
        release.wait(10)
        raise RuntimeError("not started here")

    agent.starter = slow_start
    agent.step()  # a status before the assignment
    server = {"name": "a", "workload": "wa", "model_dir": str(cnn_dir), "batch": 1, "mps_percent": 50}
    _apply(agent, 3, [server | {"port": free_port()}])
    loop = threading.Thread(target=agent.step)
    loop.start()
    try:
        assert entered.wait(10)
        assert agent._written is not None
        agent._written = (agent._written[0], time.monotonic() - HEARTBEAT_S)  # the loop is late
        agent.heartbeat()
        status = json.loads((agent.state_dir / "status.json").read_text())
    finally:
        release.set()
        loop.join(10)
    assert status["generation"] == 3
    assert [(s["name"], s["state"]) for s in status["servers"]] == [("a", "starting")]
