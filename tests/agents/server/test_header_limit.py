"""A request whose line and headers pass --max-header-kb gets 431 and the connection closes: the
server does not buffer a header of any size (httptools keeps it whole until it ends). Headers
under the limit, and a large body, are served."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.agents.server.helpers import Served, start_server, stop_server
from tests.kit import web

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def small_headers(tmp_path_factory: pytest.TempPathFactory, log_dir: Path) -> Iterator[Served]:
    served = start_server(tmp_path_factory.mktemp("srv"), log_dir, "log", "--max-header-kb", "16")
    yield served
    stop_server(served)


def test_a_header_past_the_limit_gets_431(small_headers: Served) -> None:
    with socket.create_connection(("127.0.0.1", small_headers.port), timeout=10) as sock:
        sock.sendall(b"GET /v2/health/ready HTTP/1.1\r\nHost: x\r\nX-Big: ")
        sent, reply = 0, b""
        try:
            while sent < 8 * 1024 * 1024:  # far past the limit, in pieces, never ending the header
                sock.sendall(b"a" * 65536)
                sent += 65536
        except (BrokenPipeError, ConnectionResetError):
            pass
        try:
            while chunk := sock.recv(65536):
                reply += chunk
        except ConnectionResetError:
            pass
    assert reply.startswith(b"HTTP/1.1 431 "), reply[:200]
    assert b"larger than 16 KiB" in reply and sent < 8 * 1024 * 1024


def test_headers_under_the_limit_and_a_large_body_are_served(small_headers: Served) -> None:
    headers = {f"x-h{i}": "v" * 100 for i in range(80)}  # about 9 KiB
    assert web.get(f"{small_headers.url}/v2/health/ready", headers=headers, timeout=10).status_code == 200
    body = {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [0.5] * 4}], "pad": "p" * 200_000}
    reply = web.post(f"{small_headers.url}/v2/models/log/infer", json=body, timeout=10)
    assert reply.status_code in (200, 400), reply.text  # parsed as a request either way, not a 431
