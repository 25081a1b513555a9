"""The status endpoint under the inputs issue 51 (item 5) found, through the real server on
127.0.0.1 and raw sockets: a slowloris of 300 trickling connections while the probes still answer
at once (the connection cap never refuses /livez, /readyz, /healthz, and a request head has 10 s);
a 70,000-byte header refused with 431 whatever the chunks it arrives in; `/v1/fleet/` a JSON 404
with no Location (no redirect built from the Host header); two Authorization headers refused."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from agents.spec import ServerLimits
from autoscaler.loop.status.server import HEADER_TIMEOUT_S, STATUS_LIMITS, StatusServer, StatusState
from tests.loop.test_status_http import parse, raw, read_all

pytestmark = pytest.mark.unit
TOKEN = "s3cret-token"


@pytest.fixture
def server() -> Iterator[StatusServer]:
    srv = StatusServer(StatusState(), 0, token=TOKEN).start()  # the production limits
    try:
        yield srv
    finally:
        srv.close()


def get(port: int, path: str, *headers: str) -> tuple[int, dict[str, str], bytes]:
    lines = "".join(f"{h}\r\n" for h in headers)
    return raw(port, f"GET {path} HTTP/1.1\r\nHost: evil.example\r\n{lines}Connection: close\r\n\r\n".encode())


def test_probes_answer_at_once_under_a_slowloris_of_300_connections(server: StatusServer) -> None:
    assert STATUS_LIMITS.max_connections < 300 and HEADER_TIMEOUT_S > 5  # the cap is taken; none is cut yet
    trickling: list[socket.socket] = []
    try:
        for i in range(300):
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
            sock.sendall(b"GET /v1/plan HTTP/1.1\r\nHost: x\r\nX-Slow-%d: " % i)  # the headers never end
            trickling.append(sock)
        for sock in trickling:
            sock.sendall(b"a")  # still trickling
        code, _, body = get(server.port, "/metrics")
        assert code == 503 and b"too many open connections" in body  # the cap holds for the rest
        for path in ("/livez", "/healthz", "/readyz", "/livez/ping"):
            started = time.monotonic()
            code, _, body = get(server.port, path)
            took = time.monotonic() - started
            assert b"too many open connections" not in body and code in (200, 503), (path, code, body)
            assert took < 1.0, (path, took)
        code, _, body = get(server.port, "/livez")
        assert code == 200 and body == b"ok\n", body
        code, _, body = get(server.port, "/healthz")
        assert code == 200, body
    finally:
        for sock in trickling:
            sock.close()


def test_a_request_head_must_come_within_the_header_timeout() -> None:
    """A head trickled past header_timeout_s gets 408 before the whole-request read timeout; a
    connection that sends nothing is closed without a byte, before the idle timer."""
    limits = ServerLimits(read_timeout_s=20.0, idle_timeout_s=20.0, max_connections=8, drain_timeout_s=0)
    srv = StatusServer(StatusState(), 0, limits=limits, header_timeout_s=0.5).start()
    try:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as sock:
            started = time.monotonic()
            sock.sendall(b"GET /livez HTTP/1.1\r\nHost: x\r\n")
            code, headers, body = parse(read_all(sock))
        assert code == 408 and headers["content-type"] == "application/json" and b"within 0.5 s" in body
        assert time.monotonic() - started < 4
        with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as sock:
            started = time.monotonic()
            assert sock.recv(1) == b""
        assert time.monotonic() - started < 4
    finally:
        srv.close()


@pytest.mark.parametrize("size", [70_000, 66_000])
def test_a_header_past_64_kib_is_refused_with_431(server: StatusServer, size: int) -> None:
    code, headers, body = get(server.port, "/livez", "X-Big: " + "a" * size)
    assert code == 431 and headers["content-type"] == "application/json" and b"64 KiB" in body, (code, body)


def test_a_header_under_the_limit_is_served(server: StatusServer) -> None:
    code, _, body = get(server.port, "/livez", "X-Big: " + "a" * 60_000)
    assert code == 200 and body == b"ok\n"


def test_a_trailing_slash_is_a_json_404_with_no_location(server: StatusServer) -> None:
    for auth in ([f"Authorization: Bearer {TOKEN}"], []):
        code, headers, body = get(server.port, "/v1/fleet/", *auth)
        assert "location" not in headers and headers["content-type"] == "application/json", headers
        assert code == (404 if auth else 401) and body, body
    code, headers, body = get(server.port, "/healthz/")
    assert code == 404 and "location" not in headers and b"no route /healthz/" in body


def test_two_authorization_headers_are_refused(server: StatusServer) -> None:
    good, bad = f"Authorization: Bearer {TOKEN}", "Authorization: Bearer wrong"
    assert get(server.port, "/v1/leader", good)[0] == 200
    for pair in ((bad, good), (good, bad), (good, good)):
        code, headers, body = get(server.port, "/v1/leader", *pair)
        assert code == 400 and headers["content-type"] == "application/json", (pair, code)
        assert b"more than one Authorization header" in body
