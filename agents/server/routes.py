"""KServe v2 / Open Inference Protocol REST routes on starlette; every error is JSON `{"error": ...}`.

Handlers run on the event loop: decoding and encoding are short and CPU-bound, and the model runs
on the batcher's thread, which the handler awaits. Health checks touch nothing but a flag, so the
gateway's checks stay cheap under load.
"""

from __future__ import annotations

import time
import traceback
from typing import Any

import pydantic_core
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from agents.server import tensors, triton
from agents.server.app import App
from agents.server.batcher import BatchError

MAX_BODY_BYTES = 256 * 1024 * 1024
EXTENSIONS = ["binary_tensor_data"]
SERVER_VERSION = "0.2"
_CLOSE = {"Connection": "close"}


def json_response(code: int, obj: dict[str, Any], headers: dict[str, str] | None = None) -> Response:
    return Response(pydantic_core.to_json(obj), code, headers, media_type="application/json")


def error(code: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return json_response(code, {"error": message}, headers)


class Routes:
    """The handlers, bound to one App."""

    def __init__(self, app: App) -> None:
        self.app = app

    async def live(self, request: Request) -> Response:
        return json_response(200, {"live": True})

    async def ready(self, request: Request) -> Response:
        """What the gateway's health check calls: 503 while loading and while draining."""
        is_ready = self.app.ready.is_set()
        return json_response(200 if is_ready else 503, {"ready": is_ready})

    async def server_metadata(self, request: Request) -> Response:
        return json_response(200, {"name": "igniter-server", "version": SERVER_VERSION, "extensions": EXTENSIONS})

    async def model_metadata(self, request: Request) -> Response:
        name = request.path_params["model"]
        if name != self.app.spec.workload:
            return self._unknown(name)
        return json_response(200, tensors.metadata(self.app.config, name))

    async def model_ready(self, request: Request) -> Response:
        name = request.path_params["model"]
        if name != self.app.spec.workload:
            return self._unknown(name)
        is_ready = self.app.ready.is_set()
        return json_response(200 if is_ready else 503, {"name": name, "ready": is_ready})

    async def model_config(self, request: Request) -> Response:
        """Triton's `GET /v2/models/{m}/config` (agents/server/triton.py)."""
        name = request.path_params["model"]
        if name != self.app.spec.workload:
            return self._unknown(name)
        app = self.app
        return json_response(200, triton.model_config(app.spec, app.config, app.device, app.limits.max_request_items))

    async def repository_index(self, request: Request) -> Response:
        """Triton's `POST /v2/repository/index`: this server's one model and its state."""
        try:
            ready_only = triton.wants_ready_only(await request.body())
        except ValueError as exc:
            return error(400, f"repository index: {exc}")
        ready = self.app.ready.is_set()
        entry = triton.index_entry(self.app.spec.workload, ready=ready, draining=self.app.draining)
        return Response(
            pydantic_core.to_json([] if ready_only and not ready else [entry]), media_type="application/json"
        )

    async def metrics(self, request: Request) -> Response:
        return Response(self.app.metrics.exposition(), media_type="text/plain; version=0.0.4")

    def _unknown(self, name: str) -> Response:
        return error(404, f"unknown model {name!r}; this server serves {self.app.spec.workload!r}")

    async def infer(self, request: Request) -> Response:
        """Refuse what will not be served (no body read), else count it in flight until answered."""
        started = time.perf_counter()
        name = request.path_params["model"]
        refusal = self._refusal(request, name)
        if refusal is not None:
            self.app.metrics.observe_request(refusal.status_code, time.perf_counter() - started)
            return refusal
        self.app.in_flight += 1
        try:
            response, items = await self._serve(request, name)
        finally:
            self.app.in_flight -= 1
        self.app.metrics.observe_request(response.status_code, time.perf_counter() - started, items)
        return response

    def _refusal(self, request: Request, name: str) -> Response | None:
        length = request.headers.get("content-length")
        if length is None or not length.isdigit():
            code = 411 if length is None else 400
            return error(code, "a numeric Content-Length header is required", _CLOSE)
        if int(length) > MAX_BODY_BYTES:
            return error(413, f"body of {length} bytes exceeds {MAX_BODY_BYTES}", _CLOSE)
        if name != self.app.spec.workload:
            return self._unknown(name)
        if self.app.draining:
            return error(503, "server is draining: it accepts no new requests", _CLOSE)
        if not self.app.ready.is_set():
            return error(503, "model is not ready yet")
        return None

    async def _serve(self, request: Request, name: str) -> tuple[Response, int]:
        """Decode, batch, encode; map each failure to its HTTP code."""
        app = self.app
        try:
            body = await request.body()
            decoded = tensors.decode(body, app.config, app.limits.max_request_items, _header_length(request))
            outputs = await app.batcher.infer(decoded.tensors, decoded.n)
            return _reply(tensors.encode(outputs, app.config, decoded, name)), decoded.n
        except ClientDisconnect:
            return error(400, "client disconnected before sending the whole body", _CLOSE), 0
        except tensors.BadRequest as exc:
            return error(400, str(exc)), 0
        except BatchError as exc:
            return error(exc.status, str(exc)), 0
        except tensors.NotRepresentable as exc:
            return error(500, str(exc)), 0
        except Exception as exc:  # a bug of ours: answer 500 and log it, never drop the connection
            traceback.print_exc()
            return error(500, f"internal error: {type(exc).__name__}: {exc}"), 0


def _header_length(request: Request) -> int | None:
    """The binary tensor extension's JSON header size, if the client uses it."""
    value = request.headers.get("inference-header-content-length")
    if value is None:
        return None
    if not value.strip().isdigit():
        raise tensors.BadRequest(f"Inference-Header-Content-Length must be a number, got {value!r}")
    return int(value)


def _reply(encoded: tensors.Encoded) -> Response:
    """JSON alone, or the JSON header then the raw output bytes (binary tensor extension)."""
    header = pydantic_core.to_json(encoded.header)
    if not encoded.blobs:
        return Response(header, 200, media_type="application/json")
    headers = {"Inference-Header-Content-Length": str(len(header))}
    return Response(b"".join([header, *encoded.blobs]), 200, headers, media_type="application/octet-stream")


async def _no_route(request: Request, exc: Exception) -> Response:
    code = exc.status_code if isinstance(exc, HTTPException) else 500
    return error(code, f"no route {request.method} {request.url.path}")


class CloseWhileDraining:
    """ASGI middleware: while the server drains, every response closes its connection, so clients
    reconnect (and reach another server) instead of reusing one that is about to go away."""

    def __init__(self, app: App, inner: Any) -> None:
        self.app, self.inner = app, inner

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        async def send_closing(message: Any) -> None:
            if message["type"] == "http.response.start" and self.app.draining:
                message = {**message, "headers": [*message.get("headers", []), (b"connection", b"close")]}
            await send(message)

        await self.inner(scope, receive, send_closing)


def build(app: App) -> CloseWhileDraining:
    """The ASGI application for one server."""
    r = Routes(app)
    model = "/v2/models/{model}"
    version = "/v2/models/{model}/versions/{version}"
    routes = [  # matched in order: the hot path first
        *(Route(f"{base}/infer", r.infer, methods=["POST"]) for base in (model, version)),
        Route("/v2/health/ready", r.ready),
        Route("/v2/health/live", r.live),
        Route("/v2", r.server_metadata),
        Route("/metrics", r.metrics),
        *(Route(base, r.model_metadata) for base in (model, version)),
        *(Route(f"{base}/ready", r.model_ready) for base in (model, version)),
        *(Route(f"{base}/config", r.model_config) for base in (model, version)),
        Route("/v2/repository/index", r.repository_index, methods=["POST"]),
    ]
    return CloseWhileDraining(app, Starlette(routes=routes, exception_handlers={404: _no_route, 405: _no_route}))
