"""The status endpoint's routes, on starlette: every answer is JSON, errors too, but for /metrics
(Prometheus text) and /livez and /readyz (kube-apiserver's text: `ok`, or one line per check).

`V1` maps each /v1/* path to the snapshot it serves; a new view of the controller adds one entry
here and one schema in openapi.py (tests/loop/test_openapi.py checks the two agree). With a token,
every /v1/* path answers 401 without `Authorization: Bearer TOKEN` (unknown ones too, so the
listing of routes is not shown to strangers), and two Authorization headers are a 400; /healthz, /livez, /readyz, /metrics and
/openapi.json stay open: they are what a load balancer and Prometheus need, and they show no
addresses or assignments.

Handlers only copy the latest snapshot under the state's lock: a slow scrape never blocks a tick.
"""

from __future__ import annotations

import hmac
import json
import threading
from collections.abc import Callable
from typing import Any, Protocol

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from autoscaler.loop.status import paging
from autoscaler.loop.status.metrics import Metrics
from autoscaler.loop.status.openapi import openapi


class Served(Protocol):
    """What the app serves (loop/status/server.py's StatusState is the one implementation): the routes
    depend on this shape, not on the module that fills it, so imports run status -> status_app."""

    lock: threading.Lock
    metrics: Metrics
    plan: dict[str, Any]
    fleet: dict[str, Any]
    headroom: dict[str, Any]
    gateway: dict[str, Any]
    leader: dict[str, Any]
    advice: dict[str, Any]

    def health(self) -> tuple[int, dict[str, Any]]: ...

    def probe(self, kind: str, verbose: bool, exclude: list[str], only: str | None = None) -> tuple[int, str]: ...


V1: dict[str, Callable[[Served], Any]] = {
    "/v1/plan": lambda s: s.plan,
    "/v1/fleet": lambda s: s.fleet,
    "/v1/leader": lambda s: s.leader,
    "/v1/headroom": lambda s: s.headroom,
    "/v1/gateway": lambda s: s.gateway,
    "/v1/advice": lambda s: s.advice,
}
OPEN = ("/healthz", "/livez", "/readyz", "/metrics", "/openapi.json")


def json_response(code: int, body: Any, headers: dict[str, str] | None = None) -> Response:
    """Indented: people read these with curl as often as programs do."""
    return Response(json.dumps(body, indent=1, default=str), code, headers, media_type="application/json")


def error(code: int, message: str, **extra: Any) -> Response:
    return json_response(code, {"error": message, **extra})


def routes_listing() -> list[str]:
    return sorted([*OPEN, *V1])


def build_app(state: Served, token: bytes | None) -> ASGIApp:
    """The ASGI app over one served state; `token` guards /v1/*."""

    def view(get: Callable[[Served], Any]) -> Callable[[Request], Any]:
        async def handler(request: Request) -> Response:
            with state.lock:
                return json_response(200, get(state))

        return handler

    async def fleet(request: Request) -> Response:
        """/v1/fleet, whole or a page (loop/status/paging.py); written outside the lock: the
        snapshot it reads is replaced after each tick, never changed."""
        try:
            limit, after = paging.parse(request.query_params)
        except paging.BadPage as exc:
            return error(400, str(exc))
        with state.lock:
            view = state.fleet
        return json_response(200, paging.page(view, limit, after))

    async def health(request: Request) -> Response:
        with state.lock:
            code, body = state.health()
        return json_response(code, body)

    def probe(kind: str) -> Callable[[Request], Any]:
        async def handler(request: Request) -> Response:
            verbose = "verbose" in request.query_params
            exclude = request.query_params.getlist("exclude")
            with state.lock:
                code, text = state.probe(kind, verbose, exclude, request.path_params.get("check"))
            return Response(text, code, media_type="text/plain; charset=utf-8")

        return handler

    async def metrics(request: Request) -> Response:
        with state.lock:
            body = generate_latest(state.metrics.registry)
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    async def spec(request: Request) -> Response:
        return json_response(200, openapi())

    routes = [
        Route("/healthz", health, methods=["GET"]),
        *(Route(f"/{kind}", probe(kind), methods=["GET"]) for kind in ("livez", "readyz")),
        *(Route(f"/{kind}/{{check}}", probe(kind), methods=["GET"]) for kind in ("livez", "readyz")),
        Route("/metrics", metrics, methods=["GET"]),
        Route("/openapi.json", spec, methods=["GET"]),
        Route("/v1/fleet", fleet, methods=["GET"]),
        *(Route(path, view(get), methods=["GET"]) for path, get in V1.items() if path != "/v1/fleet"),
    ]
    app = Starlette(routes=routes, exception_handlers={HTTPException: _http_error, Exception: _internal_error})
    app.router.redirect_slashes = False  # `/v1/fleet/` is a 404, not a redirect built from the Host header
    return BearerGuard(app, token)


async def _http_error(request: Request, exc: Exception) -> Response:
    """404 and 405 as JSON, naming what exists (starlette's own answer is plain text)."""
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        return error(404, f"no route {request.url.path}", routes=routes_listing())
    headers = dict(exc.headers or {})
    return json_response(exc.status_code, {"error": f"{request.method} {request.url.path}: {exc.detail}"}, headers)


async def _internal_error(request: Request, exc: Exception) -> Response:
    return error(500, f"internal error: {type(exc).__name__}: {exc}")


class BearerGuard:
    """ASGI middleware: /v1/* needs the bearer token (compared in constant time); a request with
    two Authorization headers is refused (400) on every path, not read as the last (or first) one."""

    def __init__(self, app: ASGIApp, token: bytes | None) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and sum(1 for k, _ in scope["headers"] if k == b"authorization") > 1:
            await error(400, "more than one Authorization header")(scope, receive, send)  # which one counts?
            return
        if scope["type"] == "http" and scope["path"].startswith("/v1/") and not self._authorized(scope):
            response = error(401, "/v1/* needs the bearer token (Authorization: Bearer TOKEN)")
            response.headers["WWW-Authenticate"] = 'Bearer realm="igniter"'
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _authorized(self, scope: Scope) -> bool:
        if self.token is None:
            return True
        given = dict(scope["headers"]).get(b"authorization", b"")
        scheme, _, value = given.partition(b" ")
        return scheme.lower() == b"bearer" and hmac.compare_digest(value.strip(), self.token)
