"""The Gateway contract: the controller's one handle on the data plane.

- `ensure(spec)` makes the gateway run with this configuration (the listen address, one backend
  per workload): it starts it when it is not running and reloads it, without dropping a
  connection, when the configuration changed. Idempotent; cheap when nothing changed. A gateway
  that cannot start (the port is taken, haproxy is missing) raises GatewayError with a message
  an operator can act on, and leaves nothing behind.
- `observe()` reports what runs: every backend's counters and every server's address, admin
  state, health, weight and sessions (core.routing.routes.GatewayView).
- `apply(ops)` carries out runtime operations in order (core.routing.routes.Op: add, weight, state, del),
  without a reload; it returns one message per operation that failed (errors as data: the next
  tick diffs again and retries what is still wanted).
  A delete HAProxy refuses because connections are still attached to the server (keep-alive
  connections close a moment after its process exits) is *deferred*, not failed: `deferred`
  tells the two apart, and the next tick deletes it.
- `route(desired, seen)` makes the gateway route as `desired` says: the operations that take what
  it runs there (core.routing.routes.route_ops), applied; it returns them and the failures. A gateway of
  several hosts diffs each host against what that host runs, so one that missed an operation (it
  was down, or replaced) catches up on its own.
- `clear_maxima()` starts the maxima `observe()` reports again (each backend's rate_max, its
  busiest second); the counters are untouched. The rate source clears after each read, so the
  next read's rate_max is the busiest second between the two.
- `stop()` stops the gateway (`igniter down`); `close()` releases connections only: the gateway
  itself outlives the autoscaler, as instances do.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from autoscaler.config.policy import GatewayConfig
from autoscaler.core.routing.routes import GatewayView, Op, Route, route_ops

BACKEND_PREFIX = "wl_"


class GatewayError(Exception):
    """The gateway could not be started, reached or told something; `retryable` says whether a
    later tick may succeed (a taken port or a missing binary will not fix itself)."""

    def __init__(self, message: str, retryable: bool = True, field: str = "gateway") -> None:
        super().__init__(message)
        self.retryable = retryable
        self.field = field  # the policy field an operator changes to fix it


@dataclass(frozen=True, slots=True, kw_only=True)
class GatewaySpec:
    """What the gateway's configuration says (servers come and go through the runtime API)."""

    listen: str  # HOST:PORT
    workloads: tuple[str, ...]
    check_interval_s: float = 1.0
    check_timeout_s: float = 5.0
    connect_timeout_s: float = 2.0
    timeout_s: float = 60.0
    max_connections: int = 4096
    buffer_kb: int = 64
    threads: int = 0  # HAProxy's nbthread; 0: its default (one per CPU)

    @property
    def host(self) -> str:
        return self.listen.rsplit(":", 1)[0]

    @property
    def port(self) -> int:
        return int(self.listen.rsplit(":", 1)[1])


def spec_from(cfg: GatewayConfig, workloads: Sequence[str]) -> GatewaySpec:
    return GatewaySpec(
        listen=cfg.listen,
        workloads=tuple(sorted(workloads)),
        check_interval_s=cfg.check_interval_s,
        check_timeout_s=cfg.check_timeout_s,
        connect_timeout_s=cfg.connect_timeout_s,
        timeout_s=cfg.timeout_s,
        max_connections=cfg.max_connections,
        buffer_kb=cfg.buffer_kb,
    )


STILL_CONNECTED = "Server still has connections attached to it, cannot remove it."  # HAProxy's answer to `del server`


def deferred(message: str) -> bool:
    """Whether a failed operation's message is a delete that only has to wait (see the module docstring)."""
    return "del server " in message and message.endswith(STILL_CONNECTED)  # a remote host's carry its address first


def spec_hash(spec: GatewaySpec) -> str:
    """What a rendered configuration's first line records, to tell whether it must be rendered again."""
    return hashlib.sha256(repr(spec).encode()).hexdigest()[:16]


def backend(workload: str) -> str:
    return BACKEND_PREFIX + workload


def workload_of(backend_name: str) -> str | None:
    return backend_name[len(BACKEND_PREFIX) :] if backend_name.startswith(BACKEND_PREFIX) else None


class Gateway(Protocol):
    """See the module docstring."""

    def ensure(self, spec: GatewaySpec) -> bool:
        """Run with `spec`; True when the gateway was started or reloaded now."""
        ...

    def observe(self) -> GatewayView: ...

    def apply(self, ops: Sequence[Op]) -> list[str]: ...

    def clear_maxima(self) -> None: ...

    def route(self, desired: Mapping[str, Sequence[Route]], seen: GatewayView) -> tuple[list[Op], list[str]]: ...

    def stop(self) -> None: ...

    def close(self) -> None: ...


def route_one(
    gateway: Gateway, desired: Mapping[str, Sequence[Route]], seen: GatewayView
) -> tuple[list[Op], list[str]]:
    """`route` for a gateway that is one HAProxy: diff against what it runs, apply."""
    ops = list(route_ops(desired, seen))
    return ops, (gateway.apply(ops) if ops else [])
