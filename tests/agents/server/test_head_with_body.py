"""A response's head and body leave the server in one write (agents/server/guard.py HeadWithBody):
a server killed between two writes would hand the gateway a head with no body, which it cannot
retry. Driven through uvicorn's real protocol with a transport that records each write."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from uvicorn.server import ServerState

from agents.server.guard import GuardedProtocol, ServerConfig
from agents.spec import ServerLimits

pytestmark = pytest.mark.unit

REQUEST = b"GET /x HTTP/1.1\r\nhost: t\r\n\r\n"


class Recording(asyncio.Transport):
    """A transport that keeps each write apart, as the socket would see them."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.writes.append(bytes(data))

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 40000), "sockname": ("127.0.0.1", 8000)}.get(name, default)

    def pause_reading(self) -> None:
        return None

    def resume_reading(self) -> None:
        return None


def _connect(app: Any) -> tuple[GuardedProtocol, Recording]:
    """A connection to `app` through GuardedProtocol, on the running loop."""
    config = ServerConfig(app, ServerLimits(), lifespan="off", log_config=None)
    protocol = GuardedProtocol(config, ServerState(), {}, _loop=asyncio.get_running_loop())
    transport = Recording()
    protocol.connection_made(transport)
    return protocol, transport


async def _settle() -> None:
    for _ in range(50):  # the app's task runs on this loop
        await asyncio.sleep(0)


def _serve(app: Any, request: bytes = REQUEST) -> Recording:
    """One request through GuardedProtocol on a fresh loop; the writes the app's response made."""

    async def run() -> Recording:
        protocol, transport = _connect(app)
        protocol.data_received(request)
        await _settle()
        protocol.connection_lost(None)
        return transport

    return asyncio.run(run())


async def _two_sends(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"5")]})
    await send({"type": "http.response.body", "body": b"hello"})


def test_a_response_head_and_body_leave_in_one_write() -> None:
    (write,) = _serve(_two_sends).writes
    assert write.startswith(b"HTTP/1.1 200 OK\r\n") and write.endswith(b"\r\n\r\nhello")


def test_a_streamed_response_sends_its_head_with_the_first_chunk_and_then_each_chunk() -> None:
    async def streamed(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"one", "more_body": True})
        await send({"type": "http.response.body", "body": b"two", "more_body": False})

    first, second = _serve(streamed).writes
    assert b"transfer-encoding: chunked" in first and first.endswith(b"\r\n\r\n3\r\none\r\n")
    assert second == b"3\r\ntwo\r\n0\r\n\r\n"


def test_a_response_abandoned_after_its_head_sends_nothing_so_the_gateway_can_retry() -> None:
    async def dies(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"5")]})
        raise RuntimeError("the GPU went away")

    transport = _serve(dies)
    assert transport.writes == [] and transport.closed


def test_each_keep_alive_request_gets_its_own_single_write() -> None:
    writes = _serve(_two_sends, REQUEST * 2).writes
    assert len(writes) == 2 and all(w.endswith(b"hello") for w in writes)


def test_a_head_request_gets_its_head_at_once_though_no_body_is_written() -> None:
    (write,) = _serve(_two_sends, b"HEAD /x HTTP/1.1\r\nhost: t\r\n\r\n").writes
    assert write.startswith(b"HTTP/1.1 200 OK\r\n") and write.endswith(b"\r\n\r\n")


def test_a_response_that_closes_the_connection_sends_head_and_body_before_it_closes() -> None:
    for method in (b"GET", b"HEAD"):
        transport = _serve(_two_sends, method + b" /x HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n")
        (write,) = transport.writes
        assert b"connection: close" in write.lower() and transport.closed
        assert write.endswith(b"hello" if method == b"GET" else b"\r\n\r\n")


def test_a_100_continue_is_not_held_back_as_a_head() -> None:
    async def reads_body(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        await _two_sends(scope, receive, send)

    request = b"POST /x HTTP/1.1\r\nhost: t\r\ncontent-length: 2\r\nexpect: 100-continue\r\n\r\n"

    async def run() -> Recording:
        protocol, transport = _connect(reads_body)
        protocol.data_received(request)
        await _settle()
        assert transport.writes == [b"HTTP/1.1 100 Continue\r\n\r\n"]  # the client may now send the body
        protocol.data_received(b"ok")
        await _settle()
        protocol.connection_lost(None)
        return transport

    writes = asyncio.run(run()).writes
    assert len(writes) == 2 and writes[1].endswith(b"\r\n\r\nhello")
