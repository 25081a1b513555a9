"""The status endpoint's HTTP side (uvicorn + agents.server.guard): JSON for every error, malformed
requests included; a read timeout; an idle timer; a cap on open connections; and idle connections
that cost no thread each (the old ThreadingHTTPServer took one per connection)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from agents.spec import ServerLimits
from autoscaler.loop.status.server import STATUS_LIMITS, StatusServer, StatusState
from tests.kit import web

pytestmark = pytest.mark.unit

TIGHT = ServerLimits(read_timeout_s=0.5, idle_timeout_s=1.0, max_connections=8, drain_timeout_s=0)


@pytest.fixture
def server() -> Iterator[StatusServer]:
    srv = StatusServer(StatusState(), 0, limits=TIGHT).start()
    try:
        yield srv
    finally:
        srv.close()


def raw(port: int, data: bytes, timeout: float = 5.0) -> tuple[int, dict[str, str], bytes]:
    """Send bytes on a fresh connection; the status line, headers and body of the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        return parse(read_all(sock))


def read_all(sock: socket.socket) -> bytes:
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def parse(reply: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, body = reply.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), headers, body


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"GARBAGE\r\n\r\n",
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"GET /he llo HTTP/1.1\r\n\r\n",
    ],
    ids=["not-http", "length-and-chunked", "space-in-target"],
)
def test_malformed_requests_get_a_json_400(server: StatusServer, request_bytes: bytes) -> None:
    code, headers, body = raw(server.port, request_bytes)
    assert code == 400 and headers["content-type"] == "application/json", body
    assert httpx.Response(400, content=body).json()["error"].startswith("invalid HTTP request")


def test_unknown_routes_and_methods_answer_json(server: StatusServer) -> None:
    url = f"http://127.0.0.1:{server.port}"
    missing = web.get(url + "/nope", timeout=5)
    assert missing.status_code == 404 and missing.headers["content-type"] == "application/json"
    assert "/v1/plan" in missing.json()["routes"] and "/openapi.json" in missing.json()["routes"]
    post = web.post(url + "/v1/plan", json={}, timeout=5)
    assert post.status_code == 405 and post.json()["error"] == "POST /v1/plan: Method Not Allowed"
    assert sorted(m.strip() for m in post.headers["allow"].split(",")) == ["GET", "HEAD"]
    head = web.head(url + "/healthz", timeout=5)
    assert head.status_code == 200 and head.content == b""


def test_a_request_trickled_past_the_read_timeout_gets_408(server: StatusServer) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # the headers never end
        started = time.monotonic()
        code, headers, body = parse(read_all(sock))
    assert code == 408 and headers["content-type"] == "application/json" and b"within 0.5 s" in body
    assert time.monotonic() - started < 4  # closed by the server, not by the client's 5 s timeout


def test_an_idle_connection_is_closed_after_the_idle_timer(server: StatusServer) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        started = time.monotonic()
        assert sock.recv(1) == b""  # the server closed it without a byte
    assert time.monotonic() - started < 4


def test_past_the_connection_cap_a_request_gets_a_json_503_and_a_probe_is_served(server: StatusServer) -> None:
    held = [socket.create_connection(("127.0.0.1", server.port), timeout=5) for _ in range(TIGHT.max_connections)]
    try:
        code, headers, body = raw(server.port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        assert code == 503 and headers["content-type"] == "application/json" and b"too many open connections" in body
        code, _, body = raw(server.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert code == 200, body  # the probes have a reserve the cap cannot take
    finally:
        for sock in held:
            sock.close()
    ok = web.get(f"http://127.0.0.1:{server.port}/healthz", timeout=5)  # once they are gone, served again
    assert ok.status_code == 200


def test_three_hundred_idle_connections_take_no_thread_each() -> None:
    """The probe that held 300 idle connections against http.server took 307 threads. Now they
    cost no thread, the ones past the cap (256) get a JSON 503, and once they go all is served."""
    srv = StatusServer(StatusState(), 0).start()
    url = f"http://127.0.0.1:{srv.port}"
    held: list[socket.socket] = []
    try:
        assert web.get(url + "/healthz", timeout=5).status_code == 200
        before = threading.active_count()
        held = [socket.create_connection(("127.0.0.1", srv.port), timeout=5) for _ in range(300)]
        refused = web.get(url + "/v1/leader", timeout=5)
        assert refused.status_code == 503 and refused.json() == {"error": "too many open connections; try again"}
        assert threading.active_count() == before
        for sock in held:
            sock.close()
        assert wait_served(url + "/v1/leader"), "still refused after the idle connections closed"
    finally:
        for sock in held:
            sock.close()
        srv.close()
    assert STATUS_LIMITS.max_connections == 256 and STATUS_LIMITS.read_timeout_s == 30.0


def wait_served(url: str, timeout: float = 5.0) -> bool:
    """True once a GET is answered 200 (closed sockets leave the server's count asynchronously)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if web.get(url, timeout=5).status_code == 200:
            return True
        time.sleep(0.05)
    return False


def test_a_port_in_use_fails_at_construction_and_close_frees_it() -> None:
    first = StatusServer(StatusState(), 0).start()
    port = first.port
    with pytest.raises(OSError):
        StatusServer(StatusState(), port)
    first.close()
    again = StatusServer(StatusState(), port).start()  # the port is free once closed
    try:
        assert web.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200
    finally:
        again.close()
