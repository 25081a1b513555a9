"""The local gateway's port check treats a port as haproxy does: one another process listens on
is taken; one that only has connections in TIME_WAIT (a gateway that died under load) is free."""

from __future__ import annotations

import socket

import pytest

from autoscaler.gateway.base import GatewayError
from autoscaler.gateway.local import check_port_free

pytestmark = pytest.mark.unit


def _time_wait_on(port_sock: socket.socket) -> None:
    """Accept one connection and close it from the listening side first: that side keeps the
    connection in TIME_WAIT on the listen port, as a gateway's accepted connections are kept."""
    client = socket.create_connection(port_sock.getsockname())
    conn, _ = port_sock.accept()
    conn.close()
    client.recv(1)
    client.close()


def test_a_port_with_time_wait_connections_is_free() -> None:
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        for _ in range(3):
            _time_wait_on(listener)
    with socket.socket() as plain, pytest.raises(OSError):  # what the old check did
        plain.bind(("127.0.0.1", port))
    check_port_free("127.0.0.1", port)


def test_a_port_another_process_listens_on_is_taken() -> None:
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        with pytest.raises(GatewayError, match="another process holds it"):
            check_port_free("127.0.0.1", listener.getsockname()[1])
