"""uvicorn's httptools protocol with what it leaves out: a read timeout, an idle timer from the
connect, a cap on open connections, JSON errors for malformed HTTP, and a response's head and
body in one write.

uvicorn owns HTTP parsing, keep-alive and the graceful shutdown of connections. It has no read
timeout and arms its idle timer only after a first response, so a client that connects and sends
nothing, or trickles a request byte by byte (slowloris), would hold a connection forever.
GuardedProtocol adds those two timers and a bound on open connections (503 past it), and answers
malformed HTTP (for example Content-Length together with chunked framing, a request-smuggling
vector that llhttp refuses) with a JSON 400, and a request line and headers past max_header_kb
with a JSON 431 (httptools keeps a header of any size in memory until it ends). The limits are
agents.spec.ServerLimits.

uvicorn writes a response's status line and headers as soon as the app starts the response, and
the body in a second write. A server that dies between the two (an MPS fault kills every client of
a GPU at once) leaves the gateway a head whose body never comes: HAProxy has already passed it on,
so it cannot retry, and the client gets a truncated answer. HeadWithBody holds the head until the
first body bytes and writes both at once, so the gateway sees a whole response or none, and retries
none (`retry-on empty-response`).

It imports no torch: the inference server (http.py) and the autoscaler's status endpoint
(autoscaler/loop/status/server.py) both serve through it.
"""

from __future__ import annotations

import socket
from asyncio import TimerHandle, Transport
from typing import Any

import httptools
import pydantic_core
import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from agents.spec import ServerLimits

LINGER_S = 0.2  # how long an idle connection stays open at shutdown for a request already on its way
_REASONS = {
    400: b"Bad Request",
    408: b"Request Timeout",
    431: b"Request Header Fields Too Large",
    503: b"Service Unavailable",
}


class ServerConfig(uvicorn.Config):
    """uvicorn's config plus the limits GuardedProtocol reads. `probes`: the paths (and their
    sub-paths) of health probes, which the connection cap never refuses: up to `probe_reserve` of
    them in flight at once are served however many connections are open. `header_timeout_s`: a
    request line and headers must arrive within it, from the connect for a connection's first
    request and from the first byte for later ones (None: only read_timeout_s bounds them)."""

    def __init__(
        self,
        app: Any,
        limits: ServerLimits,
        *,
        probes: tuple[str, ...] = (),
        probe_reserve: int = 16,
        header_timeout_s: float | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(app, **kwargs)
        self.limits = limits
        self.probes = tuple(p.encode() for p in probes)
        self.probe_reserve = probe_reserve
        self.header_timeout_s = header_timeout_s


class _Shared:
    """What the connections of one server count together (kept on uvicorn's ServerState)."""

    def __init__(self) -> None:
        self.probes_in_flight = 0


class HeadTooLarge(Exception):
    """Raised from a parser callback: the request line and headers passed max_header_kb."""


def raw_response(code: int, message: str) -> bytes:
    """A complete HTTP/1.1 error response with a JSON body, written before any ASGI app runs."""
    body = pydantic_core.to_json({"error": message})
    head = b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n" % (
        code,
        _REASONS[code],
        len(body),
    )
    return head + body


async def _too_many_connections(scope: Any, receive: Any, send: Any) -> None:
    """The ASGI app a request over the connection limit gets instead of the real one."""
    await send(
        {
            "type": "http.response.start",
            "status": 503,
            "headers": [(b"content-type", b"application/json"), (b"connection", b"close")],
        }
    )
    await send({"type": "http.response.body", "body": b'{"error":"too many open connections; try again"}'})


class GuardedProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with an idle timer from the connect, a per-request read deadline,
    a connection limit and JSON errors for unparseable requests."""

    def __init__(self, config: ServerConfig, *args: Any, **kwargs: Any) -> None:
        super().__init__(config, *args, **kwargs)
        self.limits = config.limits
        self.probes, self.probe_reserve = config.probes, config.probe_reserve
        self.header_timeout_s = config.header_timeout_s
        self._read_deadline: TimerHandle | None = None
        self._head_deadline: TimerHandle | None = None
        self._head_bytes = 0  # of the request whose headers are being read (the chunks received)
        self._head_size = 0  # the same, from the parser: request target, header names and values
        self._head_started = False  # a byte of the request being read has come
        self._in_head = True
        self._head_reset = False  # a message ended inside the chunk being fed
        self._probe = False  # the request being served is a probe counted in probes_in_flight
        self._shared: _Shared = _Shared()

    def connection_made(self, transport: Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        shared = getattr(self.server_state, "igniter_guard", None)
        if shared is None:
            shared = self.server_state.igniter_guard = _Shared()  # type: ignore[attr-defined]
        self._shared = shared
        self.timeout_keep_alive_task = self.loop.call_later(self.timeout_keep_alive, self.timeout_keep_alive_handler)
        self._arm_head_deadline()  # from the connect: a connection that sends nothing, or trickles

    def data_received(self, data: bytes) -> None:
        self._unset_keepalive_if_required()
        self._head_reset = False
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            pass  # no WebSocket here: the request is served as plain HTTP
        except httptools.HttpParserError as exc:
            if isinstance(exc.__context__, HeadTooLarge):
                self._refuse(431, str(exc.__context__))
            else:
                self._refuse(400, f"invalid HTTP request: {exc}")
            return
        self._count_head(len(data))

    def on_url(self, url: bytes) -> None:
        super().on_url(url)
        self._add_head(len(url) + 16)  # the method, the version, spaces and CRLF: 16 at most

    def on_header(self, name: bytes, value: bytes) -> None:
        super().on_header(name, value)
        self._add_head(len(name) + len(value) + 4)  # ": " and CRLF

    def _add_head(self, size: int) -> None:
        """The request line and headers as the parser hands them over, whatever the chunks: past
        max_header_kb, the parse stops (data_received answers 431)."""
        self._head_size += size
        if self._head_size > self.limits.max_header_kb * 1024:
            raise HeadTooLarge(f"request line and headers larger than {self.limits.max_header_kb} KiB")

    def _count_head(self, size: int) -> None:
        """A chunk that leaves the headers unfinished is all header bytes (one in which a request
        ended is not counted: at most one chunk is missed); past the limit the request gets 431."""
        if not self._in_head or self._head_reset:
            return
        self._head_bytes += size
        if self._head_bytes > self.limits.max_header_kb * 1024:
            self._refuse(431, f"request line and headers larger than {self.limits.max_header_kb} KiB")

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._cancel_read_deadline()
        self._read_deadline = self.loop.call_later(self.limits.read_timeout_s, self._read_timed_out)
        self._head_size, self._head_started = 0, True
        if self._head_deadline is None:  # a later request on the connection: from its first byte
            self._arm_head_deadline()

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._cancel_head_deadline()
        if self._admitted():
            super().on_headers_complete()
        else:
            app, self.app = self.app, _too_many_connections
            try:
                super().on_headers_complete()
            finally:
                self.app = app
        cycle = self.cycle
        if cycle is not None and not isinstance(cycle.transport, HeadWithBody):
            HeadWithBody(cycle)

    def _admitted(self) -> bool:
        """Under the connection cap; a probe is admitted by its own reserve instead, which no
        number of open connections takes (each of them counts before its request line is read,
        so a slowloris would otherwise hold the probes off for as long as it trickles)."""
        if not self._is_probe():
            return len(self.connections) <= self.limits.max_connections
        if self._probe or self._shared.probes_in_flight >= self.probe_reserve:
            return False
        self._probe = True
        self._shared.probes_in_flight += 1
        return True

    def _is_probe(self) -> bool:
        path = self.url.split(b"?", 1)[0]
        return any(path == p or path.startswith(p + b"/") for p in self.probes)

    def on_response_complete(self) -> None:
        self._probe_done()
        super().on_response_complete()

    def _probe_done(self) -> None:
        if self._probe:
            self._probe = False
            self._shared.probes_in_flight -= 1

    def on_message_complete(self) -> None:
        self._cancel_read_deadline()
        self._in_head, self._head_bytes, self._head_reset = True, 0, True
        super().on_message_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_read_deadline()
        self._cancel_head_deadline()
        self._probe_done()
        super().connection_lost(exc)

    def _arm_head_deadline(self) -> None:
        if self.header_timeout_s is not None:
            self._head_deadline = self.loop.call_later(self.header_timeout_s, self._head_timed_out)

    def _cancel_head_deadline(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_timed_out(self) -> None:
        """No whole request line and headers in time: 408, or a silent close for a connection
        that sent nothing at all (as the idle timer does)."""
        self._head_deadline = None
        if not self._head_started:
            if not self.transport.is_closing():
                self.transport.close()
            return
        self._refuse(408, f"request headers not received within {self.header_timeout_s:g} s")

    def shutdown(self) -> None:
        """uvicorn's graceful close, without its race: an idle keep-alive connection may have a request
        on the wire, so it closes only after a short linger in which such a request is still answered
        (503 while draining, with Connection: close)."""
        if self.cycle is not None and not self.cycle.response_complete:
            self.cycle.keep_alive = False
        elif self._read_deadline is None:
            self.loop.call_later(LINGER_S, self._close_if_idle)

    def _close_if_idle(self) -> None:
        idle = (self.cycle is None or self.cycle.response_complete) and self._read_deadline is None
        if idle and not self.transport.is_closing():
            self.transport.close()

    def _cancel_read_deadline(self) -> None:
        if self._read_deadline is not None:
            self._read_deadline.cancel()
            self._read_deadline = None

    def _read_timed_out(self) -> None:
        self._read_deadline = None
        self._refuse(408, f"request not received within {self.limits.read_timeout_s:g} s")

    def _refuse(self, code: int, message: str) -> None:
        """Answer (unless a response already began) and close; the app, if running, sees a disconnect."""
        if self.transport.is_closing():
            return
        active = self.cycle if self.cycle is not None and not self.cycle.response_complete else None
        if active is not None:  # its headers were read: the app is waiting for the rest of the body
            active.disconnected = True
            active.message_event.set()
        if active is None or not active.response_started:
            self.transport.write(raw_response(code, message))
        self.transport.close()


class HeadWithBody:
    """One response's transport: the head (the one write uvicorn makes once the response has
    started and before any body) waits for the first body bytes, and both leave in one write. A
    response with no body write (HEAD) sends its head once it is complete. A response abandoned
    after its head (the app failed, the connection is refused or closed) closes with nothing sent,
    which the gateway retries. Everything else is the real transport's."""

    def __init__(self, cycle: RequestResponseCycle) -> None:
        self._cycle = cycle
        self._transport: Transport = cycle.transport  # type: ignore[assignment]
        self._head: bytes | None = None
        self._head_done = False
        self._send = cycle.send
        cycle.send = self.send  # type: ignore[method-assign]
        cycle.transport = self  # type: ignore[assignment]

    async def send(self, message: Any) -> None:
        """The cycle's ASGI send; a response it completed leaves nothing held."""
        await self._send(message)
        if self._cycle.response_complete:
            self._flush()

    def write(self, data: bytes) -> None:
        if not self._head_done and self._cycle.response_started:
            self._head, self._head_done = data, True
            return
        if self._head is not None:
            data, self._head = self._head + data, None
        self._transport.write(data)

    def close(self) -> None:
        if self._cycle.response_complete:  # uvicorn closes before it reports the response done
            self._flush()
        self._head = None
        self._transport.close()

    def _flush(self) -> None:
        if self._head is not None:
            head, self._head = self._head, None
            self._transport.write(head)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def bind(host: str, port: int, reuse_port: bool = False) -> socket.socket:
    """Listen before the model loads, so a port conflict fails the start at once. `reuse_port`:
    the copies of one server (`processes` > 1) share the port, the kernel spreading connections."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen(1024)
    sock.set_inheritable(True)
    return sock
