"""`igniter run`'s gateway keeper, wired as the service wires it (loop/service/keeper.py through the lease's
fence): the leader's first tick starts the local gateway on a socket the leader holds; a kill -9
of haproxy is answered by a new one on that socket, the clients in between queued; a standby
starts nothing, and a leader that becomes a standby lets go of the socket. Real haproxy; no
instances (the workload's rate is 0)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from autoscaler.loop.service.scheduler import Service
from tests.kit.agent import ask_live, free_port, status_line, wait_until
from tests.kit.control import write_policy

pytestmark = pytest.mark.e2e


def service(tmp_path: Path, port: int, state: str) -> Service:
    path = write_policy(
        tmp_path / "policy.yaml",
        workloads=[{"name": "alex", "model": "alexnet", "slo_ms": 15, "rate_rps": 0}],
        agents={"transport": "none"},
        provider={"kind": "local", "state_root": str(tmp_path / "instances")},
        leader={"kind": "local", "lock_dir": str(tmp_path / "locks")},
        gateway={"kind": "haproxy", "listen": f"127.0.0.1:{port}", "state_dir": str(tmp_path / "gw")},
    )
    return Service(path, tmp_path / state, None)


def test_the_leader_keeps_its_gateway_and_a_standby_lets_go(tmp_path: Path) -> None:
    port = free_port()
    leader = service(tmp_path, port, "state.sqlite")
    gateway = leader.controller.deps.gateway
    assert gateway is not None and leader.keeper is not None
    try:
        leader.tick_job()
        pid = gateway.pid()
        assert pid is not None and gateway.holds_listener()
        standby = service(tmp_path, port, "standby.sqlite")
        try:
            assert not standby.fence.held and standby.keeper is not None
            standby.keeper.start()
            leader.keeper.start()
            os.kill(pid, signal.SIGKILL)
            waiting = [ask_live(port) for _ in range(5)]
            wait_until(lambda: leader.keeper.revived == 1, 10, "the leader's keeper to start haproxy again")  # type: ignore[union-attr]
            assert gateway.pid() not in (None, pid)
            assert [status_line(s) for s in waiting] == [b"HTTP/1.1 200 OK"] * 5
            assert standby.keeper.revived == 0
            assert not standby.controller.deps.gateway.holds_listener()  # type: ignore[union-attr]
        finally:
            standby.close()
        leader._role_changed(False)  # it lost the lease: the socket goes, haproxy keeps serving
        assert not gateway.holds_listener()
        assert status_line(ask_live(port)) == b"HTTP/1.1 200 OK"
    finally:
        gateway.stop()
        leader.close()
