"""One server's life: bind, load the model while health checks answer 503, serve, drain, exit.

A stop (SIGTERM from the agent) is a drain, as Triton does it: readiness turns 503 at once so the
gateway stops sending, new infer requests get 503, and every request already accepted (read,
queued or running) is answered; then the listener closes and the process exits 0. The drain is
bounded by ServerLimits.drain_timeout_s, after which what is still queued gets 503.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agents.fsutil import atomic_write_json
from agents.server.app import App, load_torchscript, pick_device
from agents.server.http import bind, make_server
from agents.spec import ServerLimits, ServerSpec, load_model_config

log = logging.getLogger("igniter-server")

STATS_INTERVAL_S = 0.5
POLL_S = 0.01


def _every(interval_s: float, stop: threading.Event, fn: Callable[[], Any]) -> threading.Thread:
    """Run fn every interval until stop is set, on a daemon thread."""

    def loop() -> None:
        while not stop.wait(interval_s):
            fn()

    thread = threading.Thread(target=loop, name="stats", daemon=True)
    thread.start()
    return thread


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def serve(spec: ServerSpec, device: str, stats_file: Path | None, limits: ServerLimits, stop: threading.Event) -> None:
    """Bind, load, warm up, serve until stop, drain; stats go to stats_file every half second."""
    sock = bind(spec.host, spec.port, reuse_port=spec.processes > 1)
    app = App(spec, load_model_config(spec.model_dir), pick_device(device), limits)
    write_stats = (lambda: atomic_write_json(stats_file, app.stats())) if stats_file else (lambda: None)
    done = threading.Event()
    write_stats()
    _every(STATS_INTERVAL_S, done, write_stats)
    try:
        with asyncio.Runner(loop_factory=_loop_factory()) as runner:
            runner.run(_lifecycle(app, sock, stop))
    finally:
        done.set()
        write_stats()


async def _lifecycle(app: App, sock: socket.socket, stop: threading.Event) -> None:
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):  # wake the loop at once; main.py's handlers set the same event
        loop.add_signal_handler(signum, stop.set)
    server = make_server(app, sock)
    serving = loop.create_task(server.serve(sockets=[sock]))
    try:
        if await _load(app, stop):
            spec = app.spec
            log.info("%s: ready on %s:%d (%s)", spec.name, spec.host, spec.port, app.device)
        while not stop.is_set() and not serving.done():
            await asyncio.sleep(POLL_S * 5)
        await _drain(app)
    finally:
        await asyncio.to_thread(app.batcher.stop)
        server.should_exit = True
        await serving


async def _load(app: App, stop: threading.Event) -> bool:
    """Load on a daemon thread while the loop answers health checks; False when stopped first."""
    loop = asyncio.get_running_loop()
    loaded: asyncio.Future[None] = loop.create_future()

    def work() -> None:
        try:
            load_torchscript(app)
            app.batcher.start()
            if not app.draining:
                app.ready.set()
            loop.call_soon_threadsafe(_settle, loaded, None)
        except BaseException as exc:  # the start-up error main.py reports as the fatal line
            loop.call_soon_threadsafe(_settle, loaded, exc)

    threading.Thread(target=work, name="load", daemon=True).start()
    while not loaded.done() and not stop.is_set():
        await asyncio.wait({loaded}, timeout=POLL_S * 5)
    if loaded.done():
        loaded.result()
        return True
    return False


def _settle(future: asyncio.Future[None], exc: BaseException | None) -> None:
    if not future.done():
        future.set_exception(exc) if exc is not None else future.set_result(None)


async def _drain(app: App) -> None:
    """Refuse new work, then wait (bounded) until everything accepted has been answered."""
    app.begin_drain()
    deadline = time.monotonic() + app.limits.drain_timeout_s
    while app.busy() and time.monotonic() < deadline:
        await asyncio.sleep(POLL_S)
    if app.busy():
        log.warning(
            "%s: drain timeout (%g s) with %d request(s) in flight; the rest get 503",
            app.spec.name,
            app.limits.drain_timeout_s,
            app.in_flight,
        )
