"""`igniter run` with a gateway that cannot start (exit 2, a clear line, nothing changed), and
`igniter down` (every instance of the fleet terminated by tag, the gateway stopped)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from autoscaler.config.policy import load_policy
from autoscaler.fleet.local import LocalProvider
from autoscaler.gateway.local import LocalHaproxy
from autoscaler.loop.service.wiring import gateway_dir
from tests.conftest import run_cli
from tests.kit.agent import free_port, port_open
from tests.kit.control import write_policy
from tests.kit.fleet import free_base

pytestmark = pytest.mark.e2e


def policy_file(tmp_path: Path, model_dir: Path | None = None, **gateway: object) -> Path:
    return write_policy(
        tmp_path / "policy.yaml",
        fleet="downtest",
        workloads=[
            {"name": "alex", "model": "alexnet", "slo_ms": 15, "rate_rps": 50, "model_dir": str(model_dir or tmp_path)}
        ],
        provider={"kind": "local", "base_port": free_base(), "state_root": str(tmp_path / "instances")},
        agents={"transport": "local"},
        gateway={"kind": "haproxy", "listen": f"127.0.0.1:{free_port()}", **gateway},
    )


@pytest.mark.parametrize("once", [True, False], ids=["once", "serve"])
def test_a_taken_port_is_exit_2_and_changes_nothing(tmp_path: Path, once: bool) -> None:
    port = free_port()
    holder = socket.socket()
    holder.bind(("127.0.0.1", port))
    holder.listen()
    try:
        path = policy_file(tmp_path, listen=f"127.0.0.1:{port}")
        state = tmp_path / "state" / "s.sqlite"
        done = run_cli("run", path, "--state", state, *(["--once"] if once else ["--no-status"]), timeout=60)
    finally:
        holder.close()
    assert done.code == 2, done.err
    lines = [ln for ln in done.err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in done.err
    assert f"{path}: gateway.listen: cannot start the gateway: cannot listen on 127.0.0.1:{port}" in lines[0]
    assert "Address already in use" in lines[0]
    assert not state.exists() and not (tmp_path / "instances").exists() and not (tmp_path / "state").exists()


def test_a_missing_haproxy_is_exit_2(tmp_path: Path) -> None:
    path = policy_file(tmp_path, haproxy_command="/nonexistent/haproxy")
    done = run_cli("run", path, "--once", "--state", tmp_path / "s.sqlite", timeout=60)
    assert done.code == 2 and "Traceback" not in done.err
    assert "gateway.haproxy_command: cannot start the gateway: '/nonexistent/haproxy' is not installed" in done.err
    assert not (tmp_path / "s.sqlite").exists()


def test_down_terminates_the_fleet_and_stops_its_gateway(tmp_path: Path, tiny_model_dir: Path) -> None:
    path = policy_file(tmp_path, tiny_model_dir)
    policy = load_policy(path)
    state = tmp_path / "s.sqlite"
    provider = LocalProvider(policy.fleet, tmp_path / "instances", policy.provider.base_port)
    gateway = LocalHaproxy(gateway_dir(policy, state))
    try:
        up = run_cli("run", path, "--once", "--state", state, timeout=120)
        assert up.code == 0, up.err
        assert provider.list_instances() and gateway.running() and port_open(int(policy.gateway.listen.split(":")[1]))
        pid = gateway.pid()
        again = run_cli("run", path, "--once", "--state", state, timeout=120)  # its own gateway holds the port: fine
        assert again.code == 0, again.err
        assert gateway.pid() == pid  # found and kept, not restarted
        stray = provider.launch("stray-slot", "p3.2xlarge", 0)  # not in the state file: ownership is by tag
        down = run_cli("down", path, "--state", state, timeout=120)
        assert down.code == 0, down.err
        assert provider.list_instances() == [] and not gateway.running()
        assert not port_open(int(policy.gateway.listen.split(":")[1]))
        assert stray.id in down.err and "gateway stopped" in down.err
        again = run_cli("down", path, "--state", state, timeout=60)  # idempotent
        assert again.code == 0 and "no instance of the fleet was running" in again.err
        assert "no gateway was running" in again.err and "gateway stopped" not in again.err
    finally:
        for inst in provider.list_instances():
            provider.terminate(inst.id)
        gateway.stop()
