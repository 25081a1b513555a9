"""The local gateway's listening socket is held by its owner and lent to haproxy (gateway/listener.py):
a killed haproxy refuses nobody (the kernel queues the connections, the next haproxy on the same
socket answers them), a reload hands the same socket on, a later owner adopts it from the running
haproxy, and stop and a failed start release the port. Real haproxy on 127.0.0.1."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autoscaler.gateway import listener
from autoscaler.gateway.base import GatewayError, GatewaySpec
from autoscaler.gateway.local import LocalHaproxy, check_port_free
from tests.kit.agent import ask_live, free_port, status_line, wait_until

pytestmark = pytest.mark.e2e


def _spec(port: int, workloads: tuple[str, ...] = ("a",)) -> GatewaySpec:
    return GatewaySpec(listen=f"127.0.0.1:{port}", workloads=workloads)


def _kill(gw: LocalHaproxy) -> int:
    pid = gw.pid()
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    assert gw.wait_gone(5)
    return pid


def test_clients_of_a_killed_gateway_wait_for_its_successor(tmp_path: Path) -> None:
    port = free_port()
    gw = LocalHaproxy(tmp_path / "gw")
    try:
        gw.ensure(_spec(port))
        assert gw.holds_listener()
        assert f"bind fd@{listener.fd_in_config(gw.cfg.read_text())}" in gw.cfg.read_text()
        killed = _kill(gw)
        waiting = [ask_live(port) for _ in range(20)]  # bind by address instead, and these are refused
        assert gw.revive()
        assert gw.pid() not in (None, killed)
        assert [status_line(s) for s in waiting] == [b"HTTP/1.1 200 OK"] * 20
        assert not gw.revive()  # it runs: nothing to do
    finally:
        gw.stop()


def test_a_reload_hands_the_same_socket_on(tmp_path: Path) -> None:
    port = free_port()
    gw = LocalHaproxy(tmp_path / "gw")
    try:
        gw.ensure(_spec(port))
        held = os.fstat(gw._listener.fileno()).st_ino  # type: ignore[union-attr]
        old = gw.pid()
        waiting = [ask_live(port) for _ in range(5)]
        assert gw.ensure(_spec(port, ("a", "b")))
        assert gw.pid() != old
        assert os.fstat(gw._listener.fileno()).st_ino == held  # type: ignore[union-attr]
        assert [status_line(s) for s in waiting] == [b"HTTP/1.1 200 OK"] * 5
        wait_until(lambda: not gw.running() or gw.pid() != old, 10, "the old process to go")
        _kill(gw)  # the reloaded process, too, is replaced without refusing anyone
        waiting = [ask_live(port) for _ in range(5)]
        assert gw.revive()
        assert [status_line(s) for s in waiting] == [b"HTTP/1.1 200 OK"] * 5
    finally:
        gw.stop()


def test_a_later_owner_adopts_the_running_gateways_socket(tmp_path: Path) -> None:
    """A restart of `igniter run`: the new process finds haproxy running and takes a duplicate of
    its socket; the first owner's copy is gone, and a kill still refuses nobody."""
    port = free_port()
    first, later = LocalHaproxy(tmp_path / "gw"), LocalHaproxy(tmp_path / "gw")
    try:
        first.ensure(_spec(port))
        first.close()
        assert not first.holds_listener()
        assert not later.ensure(_spec(port))  # running with this configuration: nothing to start
        assert later.holds_listener()
        _kill(later)
        waiting = [ask_live(port) for _ in range(5)]
        assert later.revive()
        assert [status_line(s) for s in waiting] == [b"HTTP/1.1 200 OK"] * 5
    finally:
        later.stop()


def test_stop_closes_the_port(tmp_path: Path) -> None:
    port = free_port()
    gw = LocalHaproxy(tmp_path / "gw")
    gw.ensure(_spec(port))
    gw.stop()
    assert not gw.holds_listener()
    with pytest.raises(ConnectionRefusedError):
        ask_live(port)
    check_port_free("127.0.0.1", port)


def test_a_start_that_fails_releases_the_port(tmp_path: Path) -> None:
    port = free_port()
    gw = LocalHaproxy(tmp_path / "gw", command="false")  # found, and fails whatever it is asked
    with pytest.raises(GatewayError):
        gw.ensure(_spec(port))
    assert not gw.holds_listener()
    check_port_free("127.0.0.1", port)


def test_a_taken_port_is_a_clear_error(tmp_path: Path) -> None:
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        with pytest.raises(GatewayError, match=r"cannot listen on 127\.0\.0\.1:\d+: .*another process holds it"):
            LocalHaproxy(tmp_path / "gw").ensure(_spec(port))
    assert not (tmp_path / "gw").exists()


def test_adopt_takes_a_listening_socket_from_another_process() -> None:
    sock = listener.bind_listener("127.0.0.1", 0)
    port = sock.getsockname()[1]
    code = "import sys, time; sys.stdout.write('up\\n'); sys.stdout.flush(); time.sleep(60)"
    child = subprocess.Popen([sys.executable, "-c", code], pass_fds=(sock.fileno(),), stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline() == b"up\n"
        fd = sock.fileno()
        sock.close()  # only the child holds it now
        got = listener.adopt(child.pid, fd, "127.0.0.1", port)
        assert got is not None and listener.listens_on(got, "127.0.0.1", port)
        got.close()
        assert listener.adopt(child.pid, fd, "127.0.0.1", port + 1) is None  # not the address asked for
        assert listener.adopt(child.pid, 999, "127.0.0.1", port) is None  # no such descriptor
        started = time.monotonic()
        assert not listener.wait_exit(child.pid, 0.2)
        assert time.monotonic() - started >= 0.15
        child.kill()
        assert listener.wait_exit(child.pid, 5)
    finally:
        child.kill()
        child.wait()


def test_the_descriptor_a_configuration_binds() -> None:
    assert listener.fd_in_config("frontend kserve\n    bind fd@7\n    acl x path /\n") == 7
    assert listener.fd_in_config("frontend kserve\n    bind 127.0.0.1:8000\n") is None
