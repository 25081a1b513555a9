"""HAProxy's configuration for one fleet's gateway, rendered from a GatewaySpec.

The frontend serves the KServe v2 REST API for every workload, routed by path to one backend per
workload (`/v2/models/{workload}`, `.../ready`, `.../infer`, and the same under `/versions/{v}`).
The gateway answers by itself what is about the whole fleet: `/v2/health/live`, `/v2/health/ready`
(200 when every workload has a server that takes requests, else 503 naming the first that has
none), `/v2` (server metadata), Triton's repository index (`POST /v2/repository/index`: every
workload, READY when a server of it takes requests, else UNAVAILABLE; `{"ready": true}` keeps the
ready ones), and a KServe v2 JSON 404 for an unknown workload or path. A model's Triton config
(`/v2/models/{workload}/config`) is routed to its servers like its metadata.

Each backend balances by weighted round robin (weights change at run time without a reload) over
servers health-checked with `GET /v2/health/ready`; a connection error marks a server down at
once (`observe layer4`), and a request that meets a dead server is retried once on another server
of the workload, and so is one that meets a server that is stopping (it answers 503 to what it
did not accept before its stop), or one that a server holds past `timeout server` (a hung
process: an MPS client whose daemon died may hang rather than exit): `retry-on conn-failure
empty-response response-timeout 503`, `option redispatch` (inference requests are idempotent).
A retry needs the whole request in HAProxy's buffer, so it waits for the body before it picks a
server (`option http-buffer-request`; a client that sends
headers and body in separate writes would otherwise be forwarded before its body is in). Servers
are added and removed through the runtime API; the ones running when the configuration is
rendered for a reload are written into it, with their state carried over by the server-state
file, so a reload drops nothing. Nor does it cut a client's idle keep-alive connection: by
default the old process closes those at once, racing a request the client is sending on one
(seen as a disconnect without a response, 1 of 107 requests in a test); with
`option idle-close-on-response` it answers that next request and then closes with
`Connection: close`.

Every error HAProxy itself answers comes from an errorfile in the KServe v2 error shape
(`{"error": "..."}`, application/json, its exact Content-Length; `error_files`), one for each status
HAProxy 2.6 lets an errorfile replace (ERROR_STATUSES). HAProxy 2.6's H1 layer still answers a
request it cannot parse (a malformed request line, headers over the buffer) with its built-in HTML
page, whatever the errorfiles say; HAProxy 3.2 uses the errorfile there (haproxy/haproxy#3032).
Without an errors directory (Paths.errors) the same bodies go inline as `http-error` lines.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from autoscaler.core.routing.routes import ServerSeen
from autoscaler.gateway.base import GatewaySpec, backend

FRONTEND = "kserve"
UNKNOWN = "gw_unknown"
METADATA = {"name": "igniter-gateway", "version": "0.1", "extensions": ["binary_tensor_data"]}


@dataclass(frozen=True, slots=True, kw_only=True)
class Paths:
    """Where the running gateway keeps its runtime socket and its servers' state across reloads."""

    socket: str
    state_file: str
    pidfile: str | None = None
    errors: str | None = None  # the directory of the errorfiles (`error_files`), NNN.http each


# Each status HAProxy 2.6 can generate and lets an errorfile replace (200 is left out: it only
# answers a monitor-uri, which this configuration has none of), with what its error says.
ERROR_STATUSES: dict[int, tuple[str, str]] = {
    400: ("Bad Request", "bad request: the gateway could not read it as HTTP"),
    401: ("Unauthorized", "unauthorized"),
    403: ("Forbidden", "forbidden"),
    404: ("Not Found", "not found"),
    405: ("Method Not Allowed", "method not allowed"),
    407: ("Proxy Authentication Required", "proxy authentication required"),
    408: ("Request Timeout", "the request did not arrive in full in time"),
    410: ("Gone", "gone"),
    413: ("Payload Too Large", "the request is too large"),
    425: ("Too Early", "too early: the request may be replayed"),
    429: ("Too Many Requests", "too many requests"),
    500: ("Internal Server Error", "the gateway failed on this request"),
    501: ("Not Implemented", "not implemented"),
    502: ("Bad Gateway", "bad gateway: the server answered badly"),
    503: ("Service Unavailable", "no server of this workload can take the request"),
    504: ("Gateway Timeout", "the server did not answer in time"),
}


def error_files() -> dict[str, str]:
    """Each errorfile by its name (`NNN.http`): a whole HTTP response, sent as it is, so its
    Content-Type and Content-Length are written here (HAProxy computes neither for an errorfile)."""
    files = {}
    for status, (reason, message) in ERROR_STATUSES.items():
        body = json.dumps({"error": message}, separators=(",", ":"))
        head = (
            f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body.encode())}\r\ncache-control: no-cache\r\n\r\n"
        )
        files[f"{status}.http"] = head + body
    return files


def server_options(spec: GatewaySpec, weight: int) -> str:
    """The options of one server line; `add server` takes the same (it ignores default-server).

    Three failed checks in a row take a server out (a busy server answering one check late is no
    reason to), one passed check brings it back; a refused or reset connection in live traffic
    takes it out at once (`observe layer4`: a dead server is not waited for). Idle connections are
    kept for reuse (`pool-max-conn -1`, `pool-purge-delay`): a server added at run time has no
    pool unless told, and HAProxy 2.6 then opens a new connection for every request."""
    inter = max(100, round(spec.check_interval_s * 1000))
    return (
        f"weight {weight} check inter {inter} fall 3 rise 1 observe layer4 error-limit 1 on-error mark-down "
        "pool-max-conn -1 pool-purge-delay 2s"
    )


def render(spec: GatewaySpec, paths: Paths, servers: Sequence[ServerSeen] = (), *, fd: int | None = None) -> str:
    """The whole configuration text (deterministic: the same inputs give the same bytes). With
    `fd`, the frontend listens on that inherited descriptor (`bind fd@N`: the socket the local
    gateway's owner holds, gateway/listener.py) rather than binding spec.listen itself."""
    parts = [_global(spec, paths), _defaults(spec, paths), _frontend(spec, fd), _unknown()]
    parts += [_backend(spec, w, [s for s in servers if s.workload == w]) for w in spec.workloads]
    return "\n".join(parts)


def _global(spec: GatewaySpec, paths: Paths) -> str:
    lines = [
        "global",
        f"    stats socket {_quoted(paths.socket)} mode 600 level admin expose-fd listeners",
        "    stats timeout 30s",
        "    noreuseport",
        f"    maxconn {spec.max_connections}",
        f"    nbthread {spec.threads}" if spec.threads else "",
        f"    tune.bufsize {spec.buffer_kb * 1024}",
        f"    server-state-file {_quoted(paths.state_file)}",
    ]
    if paths.pidfile:
        lines.append(f"    pidfile {_quoted(paths.pidfile)}")
    return "\n".join(ln for ln in lines if ln) + "\n"


def _defaults(spec: GatewaySpec, paths: Paths) -> str:
    connect = max(1, round(spec.connect_timeout_s * 1000))
    server = max(1, round(spec.timeout_s * 1000))
    return f"""defaults
    mode http
    load-server-state-from-file global
    timeout connect {connect}
    timeout client {server}
    timeout server {server}
    timeout http-request 10s
    timeout http-keep-alive 60s
    timeout queue 10s
    timeout check {max(1, round(spec.check_timeout_s * 1000))}
    retries 1
    option redispatch 1
    option http-buffer-request
    option idle-close-on-response
    retry-on conn-failure empty-response response-timeout 503
    http-reuse safe
{_errors(paths)}
"""


def _errors(paths: Paths) -> str:
    """An errorfile per status, or without their directory the same bodies as `http-error` lines."""
    if paths.errors is not None:
        return "\n".join(f"    errorfile {s} {_quoted(f'{paths.errors}/{s}.http')}" for s in ERROR_STATUSES)
    return "\n".join(
        f"    http-error status {s} content-type application/json string '{_json({'error': m})}'"
        for s, (_, m) in ERROR_STATUSES.items()
    )


def _frontend(spec: GatewaySpec, fd: int | None = None) -> str:
    lines = [
        f"frontend {FRONTEND}",
        f"    bind {spec.listen if fd is None else f'fd@{fd}'}",
        "    acl health_ready path /v2/health/ready",
        f"    http-request return status 200 content-type application/json string '{_json({'live': True})}' "
        "if { path /v2/health/live }",
        f"    http-request return status 200 content-type application/json string '{_json(METADATA)}' if {{ path /v2 }}",
    ]
    for w in spec.workloads:
        body = _json({"ready": False, "error": f"workload {w} has no server that takes requests"})
        lines.append(
            f"    http-request return status 503 content-type application/json string '{body}' "
            f"if health_ready !{{ nbsrv({backend(w)}) gt 0 }}"
        )
    lines.append(
        f"    http-request return status 200 content-type application/json string '{_json({'ready': True})}' "
        "if health_ready"
    )
    lines += _repository_index(spec)
    for w in spec.workloads:
        b, prefix = backend(w), f"/v2/models/{w}"
        lines.append(f"    acl {b} path {prefix} {prefix}/ready {prefix}/infer {prefix}/config")
        lines.append(f"    acl {b} path_beg {prefix}/versions/")
        lines.append(f"    use_backend {b} if {b}")
    lines.append(f"    default_backend {UNKNOWN}")
    return "\n".join(lines) + "\n"


def _repository_index(spec: GatewaySpec) -> list[str]:
    """Triton's index, built per request from each backend's count of usable servers: entries are
    appended to a variable (a comma before all but the first), then returned as one JSON array."""
    lines = [
        "    acl repo_index path /v2/repository/index",
        "    acl repo_index_ready_only req.body -m reg '\"ready\"[[:space:]]*:[[:space:]]*true'",
    ]
    for w in spec.workloads:
        up = f"{{ nbsrv({backend(w)}) gt 0 }}"
        ready = _json({"name": w, "version": "1", "state": "READY"})
        down = _json({"name": w, "version": "1", "state": "UNAVAILABLE", "reason": "no server takes requests"})
        append = "http-request set-var-fmt(txn.index) '%[var(txn.index)]%[var(txn.comma)]"
        lines.append(f"    {append}{ready}' if METH_POST repo_index {up}")
        lines.append(f"    {append}{down}' if METH_POST repo_index !{up} !repo_index_ready_only")
        lines.append("    http-request set-var-fmt(txn.comma) ',' if METH_POST repo_index { var(txn.index) -m found }")
    lines.append(
        "    http-request return status 200 content-type application/json lf-string '[%[var(txn.index)]]' "
        "if METH_POST repo_index"
    )
    return lines


def _unknown() -> str:
    model = '{"error":"unknown model %[path,field(4,/),json(utf8s)]"}'
    route = '{"error":"no route %[method] %[path,json(utf8s)]"}'
    return f"""backend {UNKNOWN}
    http-request return status 404 content-type application/json lf-string '{model}' if {{ path_beg /v2/models/ }}
    http-request return status 404 content-type application/json lf-string '{route}'
"""


def _backend(spec: GatewaySpec, workload: str, servers: Sequence[ServerSeen]) -> str:
    lines = [
        f"backend {backend(workload)}",
        "    balance roundrobin",
        "    option httpchk GET /v2/health/ready",
        "    http-check expect status 200",
    ]
    for s in sorted(servers, key=lambda v: v.name):
        lines.append(f"    server {s.name} {s.address} {server_options(spec, s.weight)}")
    return "\n".join(lines) + "\n"


def _quoted(path: str) -> str:
    """A path as one HAProxy argument: double-quoted, so a state directory with a space (or a #)
    is one word, with the characters HAProxy interprets inside double quotes escaped."""
    escaped = "".join("\\" + ch if ch in '"\\$' else ch for ch in path)
    return f'"{escaped}"'


def _json(value: object) -> str:
    """JSON for a single-quoted HAProxy string (names are [A-Za-z0-9._-], so no quote to escape)."""
    return json.dumps(value, separators=(",", ":"))
