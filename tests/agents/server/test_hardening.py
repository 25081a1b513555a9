"""What a hostile or broken client can do to a real server process, and what the server does back:
read and idle timeouts, a connection limit, request smuggling, NaN/Inf in and out."""

from __future__ import annotations

import json
import math
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

from tests.agents.server.helpers import Served, start_server, stop_server
from tests.kit import web

# the module's tests share one costly module-scoped fixture: under --dist loadgroup they run on one worker
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("test_hardening")]


READ_TIMEOUT_S = 2.0


def _strict_json(body: bytes) -> object:
    """RFC 8259 JSON only: the bare NaN / Infinity that Python's json would accept are errors."""

    def refuse(token: str) -> object:
        raise ValueError(f"not JSON: {token}")

    return json.loads(body, parse_constant=refuse)


def _connect(served: Served) -> socket.socket:
    return socket.create_connection(("127.0.0.1", served.port), timeout=10)


def _read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def _read_response(sock: socket.socket) -> bytes:
    """One whole response (headers, then Content-Length bytes of body): the server may send the
    headers and the body in separate segments, so one recv() can return only the headers."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1]) for line in head.lower().split(b"\r\n") if line.startswith(b"content-length:")
    )
    while len(body) < length:
        body += sock.recv(65536)
    return head + b"\r\n\r\n" + body


def _infer_body(values: list[float]) -> dict:
    return {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": values}]}


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory, log_dir: Path) -> Iterator[Served]:
    """A server with a short read timeout and a long idle timeout, so each test sees the one it means."""
    served = start_server(
        tmp_path_factory.mktemp("srv"),
        log_dir,
        "log",
        "--read-timeout",
        str(READ_TIMEOUT_S),
        "--idle-timeout",
        "30",
        batch=4,
        max_queue_delay_ms=0.0,
    )
    yield served
    stop_server(served)


def _infer(served: Served, values: list[float], **extra: object) -> httpx.Response:
    body = {**_infer_body(values), **extra}
    return web.post(f"{served.url}/v2/models/log/infer", json=body, timeout=10)


def test_content_length_with_chunked_framing_is_refused_and_the_connection_closed(guarded: Served) -> None:
    """Request smuggling: a proxy and the server could disagree on where this request ends."""
    body = json.dumps(_infer_body([1.0, 2.0, 3.0, 4.0])).encode()
    with _connect(guarded) as sock:
        sock.sendall(
            b"POST /v2/models/log/infer HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
        )
        reply = _read_until_closed(sock)
    head, _, payload = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 ")
    assert "Transfer-Encoding" in _strict_json(payload)["error"]  # type: ignore[index]
    assert _infer(guarded, [1.0, 2.0, 3.0, 4.0]).status_code == 200


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_nan_and_inf_inputs_get_400_naming_the_input(guarded: Served, literal: str) -> None:
    body = json.dumps(_infer_body([1.0, 2.0, 3.0, 0.5])).replace("0.5", literal)
    reply = web.post(f"{guarded.url}/v2/models/log/infer", content=body, timeout=10)
    assert reply.status_code == 400
    assert _strict_json(reply.content) == {
        "error": "inputs[0].data: 1 value(s) are NaN, Inf or beyond FP32's range; inputs must be finite"
    }


def test_outputs_are_always_valid_json_and_binary_carries_nan(guarded: Served) -> None:
    """log(-1) is NaN: a JSON reply says why it cannot carry it; a binary output carries it exactly."""
    reply = _infer(guarded, [-1.0, 1.0, 2.0, 3.0])
    assert reply.status_code == 500
    assert "output 'y': the model returned NaN or Inf" in _strict_json(reply.content)["error"]  # type: ignore[index]
    binary = _infer(guarded, [-1.0, 1.0, 2.0, 3.0], outputs=[{"name": "y", "parameters": {"binary_data": True}}])
    assert binary.status_code == 200, binary.text
    size = int(binary.headers["inference-header-content-length"])
    header = _strict_json(binary.content[:size])
    assert header["outputs"][0]["parameters"] == {"binary_data_size": 16}  # type: ignore[index]
    values = np.frombuffer(binary.content[size:], dtype=np.float32)
    assert math.isnan(values[0]) and values[1:].tolist() == pytest.approx([0.0, math.log(2), math.log(3)])


def test_a_request_that_never_completes_is_answered_408_and_closed(guarded: Served) -> None:
    with _connect(guarded) as sock:
        sock.sendall(b'POST /v2/models/log/infer HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n{"inp')
        started = time.monotonic()
        reply = _read_until_closed(sock)
        waited = time.monotonic() - started
    assert reply.startswith(b"HTTP/1.1 408 ") and b"not received within 2 s" in reply
    assert READ_TIMEOUT_S - 0.2 <= waited < READ_TIMEOUT_S + 3


def test_a_stalled_second_request_on_a_keep_alive_connection_is_timed_out_too(guarded: Served) -> None:
    with _connect(guarded) as sock:
        sock.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: t\r\n\r\n")
        first = _read_response(sock)
        sock.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: t\r\n")  # never finished
        second = _read_until_closed(sock)
    assert first.startswith(b"HTTP/1.1 200 ") and second.startswith(b"HTTP/1.1 408 ")


def test_a_body_that_stops_halfway_is_timed_out_and_the_server_keeps_serving(guarded: Served) -> None:
    with _connect(guarded) as sock:
        sock.sendall(b'POST /v2/models/log/infer HTTP/1.1\r\nHost: t\r\nContent-Length: 500\r\n\r\n{"inputs": [')
        reply = _read_until_closed(sock)
    assert reply.startswith(b"HTTP/1.1 408 ")
    assert _infer(guarded, [1.0, 2.0, 3.0, 4.0]).status_code == 200


def test_slowloris_200_half_open_connections_neither_block_a_request_nor_stay_open(guarded: Served) -> None:
    """The bound the issue asks for: a normal request within 100 ms while 200 connections hang
    half-way through their headers, and all 200 closed once the read timeout has passed."""
    half_open = [_connect(guarded) for _ in range(200)]
    sent = time.monotonic()
    for i, sock in enumerate(half_open):
        sock.sendall(b"GET /v2/health/ready HTTP/1.1\r\nHost: t\r\nX-Slow-%d: " % i)
    body = _infer_body([1.0, 2.0, 3.0, 4.0])
    fresh = httpx.Client(limits=httpx.Limits(max_keepalive_connections=0), timeout=10)  # a new connection each
    try:
        latencies = []
        for _ in range(3):  # the fastest of three discounts this shared machine's scheduler
            started = time.perf_counter()
            assert fresh.post(f"{guarded.url}/v2/models/log/infer", json=body).status_code == 200
            latencies.append(time.perf_counter() - started)
        assert min(latencies) < 0.100, latencies
        replies = [_read_until_closed(sock) for sock in half_open]
        closed_after = time.monotonic() - sent
    finally:
        fresh.close()
        for sock in half_open:
            sock.close()
    assert all(r.startswith(b"HTTP/1.1 408 ") for r in replies), {r[:40] for r in replies}
    assert closed_after < READ_TIMEOUT_S + 5, closed_after


def test_connections_beyond_the_limit_get_503_and_a_connection_that_sends_nothing_is_closed(
    tmp_path: Path, log_dir: Path
) -> None:
    served = start_server(tmp_path, log_dir, "log", "--max-connections", "4", "--idle-timeout", "1.5", batch=4)
    try:
        connecting = time.monotonic()  # each idle timer starts at its accept, after this
        idle = [_connect(served) for _ in range(4)]
        time.sleep(0.2)  # the server has accepted them
        refused = _infer(served, [1.0, 2.0, 3.0, 4.0])
        assert refused.status_code == 503 and "too many open connections" in refused.json()["error"]
        assert all(_read_until_closed(sock) == b"" for sock in idle)  # closed by the idle timeout
        # not at once, and not never: 1.4, not 1.5, as an event loop's timer may fire a clock tick early
        assert 1.4 <= time.monotonic() - connecting < 6
        for sock in idle:
            sock.close()
        assert _infer(served, [1.0, 2.0, 3.0, 4.0]).status_code == 200
    finally:
        stop_server(served)
