"""The inference server's HTTP side: uvicorn on httptools (and uvloop), guarded by guard.py (read
timeout, idle timer, connection cap, JSON errors for malformed HTTP), with signals and a drain of
our own.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import socket
from collections.abc import Iterator

import uvicorn

from agents.server.app import App
from agents.server.guard import GuardedProtocol, ServerConfig, bind
from agents.server.routes import build

__all__ = ["DrainingServer", "bind", "make_server"]

GRACE_AFTER_DRAIN_S = 2.0  # uvicorn's own wait for connections once the drain has answered everything


class DrainingServer(uvicorn.Server):
    """A uvicorn server whose signals are ours (SIGTERM starts a drain in lifecycle.py, it does not
    make uvicorn exit at once, and no signal is re-raised after a clean exit), and whose listener
    closes without resetting the connections the kernel has already accepted for it."""

    def __init__(self, config: ServerConfig, listener: socket.socket) -> None:
        super().__init__(config)
        self.listener = listener

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        await self._adopt_backlog()
        await super().shutdown(sockets)

    async def _adopt_backlog(self) -> None:
        """Closing a listener resets every connection still in its accept queue, requests included.
        Take them in first, so they get their answer (503, draining) and a clean close."""
        loop = asyncio.get_running_loop()
        factory = functools.partial(
            self.config.http_protocol_class,  # type: ignore[arg-type]
            config=self.config,
            server_state=self.server_state,
            app_state=self.lifespan.state,
        )
        self.listener.setblocking(False)
        adopted = []
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:  # BlockingIOError: the queue is empty
                break
            adopted.append(loop.connect_accepted_socket(factory, conn))
        await asyncio.gather(*adopted, return_exceptions=True)


def make_server(app: App, listener: socket.socket) -> DrainingServer:
    """uvicorn for one App; the event loop is the caller's (lifecycle.py creates it, uvloop if present)."""
    limits = app.limits
    config = ServerConfig(
        build(app),
        limits,
        http=GuardedProtocol,
        loop="none",
        lifespan="off",
        access_log=False,
        proxy_headers=False,  # clients' addresses matter to nothing here; skip the per-request rewrite
        log_config=None,  # the server's logging (--log-format) applies to uvicorn's loggers too
        log_level="warning",
        timeout_keep_alive=limits.idle_timeout_s,  # type: ignore[arg-type]  # a float works: call_later
        timeout_graceful_shutdown=int(GRACE_AFTER_DRAIN_S),
        server_header=False,
        headers=[("server", "igniter-server")],
    )
    return DrainingServer(config, listener)
