"""The status endpoint: /healthz, /metrics (Prometheus), /openapi.json and the /v1/* views of the
controller (status_app.py lists them), served by uvicorn on a thread of its own.

It listens on scaling.status_listen (127.0.0.1:9464 by default; a private address lets Prometheus
on another host scrape it). With scaling.status_token_file, /v1/* requires that bearer token;
/healthz and /metrics stay open (what a load balancer and Prometheus need, and they show no
addresses or assignments).

The server is the inference server's: uvicorn on httptools with agents.server.guard's read
timeout, idle timer, connection cap and JSON errors for malformed HTTP (STATUS_LIMITS). One event
loop serves every connection, so a client holding hundreds of idle connections costs sockets until
the idle timer closes them, not a thread each.

The tick thread publishes an immutable snapshot after every tick; the HTTP loop only reads the
latest snapshot, so a slow scrape never blocks a tick and never touches the store.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import uvicorn

from agents.server.guard import GuardedProtocol, ServerConfig, bind
from agents.spec import ServerLimits
from autoscaler.config.offerings import offering_prices
from autoscaler.core.capacity.reach import conditions
from autoscaler.core.fleet.lifecycle import LIVE, describe_table
from autoscaler.loop.controller import Controller, TickReport
from autoscaler.loop.gateway_step import snapshot
from autoscaler.loop.metrics import Metrics
from autoscaler.loop.status_app import build_app

__all__ = ["STATUS_LIMITS", "Metrics", "StatusServer", "StatusState", "fleet_snapshot", "headroom_snapshot"]

# A whole request within 30 s of its first byte (as the inference servers), idle connections
# closed after 60 s, and past 256 open connections a request gets a JSON 503: a scraper, a load
# balancer's checks and a few people with curl need far fewer.
STATUS_LIMITS = ServerLimits(read_timeout_s=30.0, idle_timeout_s=60.0, max_connections=256, drain_timeout_s=0.0)


def fleet_snapshot(controller: Controller) -> dict[str, Any]:
    """Instance records (open ones, with what their agents were told), the fleet's hourly cost,
    and the decisions that hold parts of it back (unavailable types, quarantined nodes, backoff)."""
    store = controller.store
    state = controller.current_state()
    prices = offering_prices(controller.policy)
    applied = store.applied()
    instances = [
        {
            "slot": r.slot,
            "attempt": r.attempt,
            "instance_type": r.instance_type,
            "capacity_type": r.capacity_type,
            "state": r.state.value,
            "instance_id": r.instance_id,
            "created_at": r.created_at,
            "updated_at": r.updated_at,
            "leaves_at": r.leaves_at,
            "servers": [s.name for s in applied.get(r.key, (0, ()))[1]],
        }
        for r in store.open_records()
    ]
    cost = sum(prices.get(r.offering, 0.0) for r in store.open_records() if r.state in LIVE and r.instance_id)
    return {
        "fleet": controller.policy.fleet,
        "cost_per_hour": round(cost, 6),
        "instances": instances,
        "unavailable": dict(state.unavailable),
        "quarantined": {k: q.to_json() for k, q in state.quarantined.items()},
        "backoff": state.backoff.to_json() if state.backoff.failures else None,
        "transitions": describe_table(),
    }


def headroom_snapshot(controller: Controller, report: TickReport) -> dict[str, Any]:
    """Per workload: the headroom planned with, the burst floor (auto), the quantile of the errors
    it was sized at (the target, moved by the feedback), the latest forecast error sample, and
    the measured attainment over the last hour, with the policy's mode and target
    (docs/operations.md)."""
    sc = controller.policy.scaling
    return {
        "mode": "auto" if sc.headroom == "auto" else "fixed",
        "target_attainment": sc.target_attainment,
        "workloads": {
            w: {
                "headroom": h,
                "burst_floor_rps": report.burst_floor.get(w, 0.0),
                "quantile": report.headroom_quantile.get(w),
                "forecast_error": report.forecast_error.get(w),
                "attainment_1h": report.attainment.get(w),
            }
            for w, h in report.headroom.items()
        },
        "conditions": conditions(report.reach),
    }


@dataclass
class StatusState:
    """What the endpoint serves; replaced wholesale after each tick."""

    metrics: Metrics = field(default_factory=Metrics)
    plan: dict[str, Any] = field(default_factory=lambda: {"layout": None})
    fleet: dict[str, Any] = field(default_factory=lambda: {"instances": []})
    headroom: dict[str, Any] = field(default_factory=lambda: {"workloads": {}})
    gateway: dict[str, Any] = field(default_factory=lambda: {"kind": "none", "workloads": {}})
    healthy: bool = True
    last_error: str | None = None
    leader: dict[str, Any] = field(default_factory=lambda: {"role": "leader"})
    lock: threading.Lock = field(default_factory=threading.Lock)

    def set_leader(self, snapshot: dict[str, Any], changed: bool = False) -> None:
        """The lease's state (leadership.snapshot()); a standby serves no plan, fleet or headroom."""
        with self.lock:
            leader = snapshot["role"] == "leader"
            if changed:
                self.metrics.role_changes.labels(snapshot["role"]).inc()
            self.metrics.leader.set(1 if leader else 0)
            self.metrics.lease_token.set(snapshot.get("token") or 0)
            self.leader = dict(snapshot)
            if not leader:
                self.plan, self.fleet = {"layout": None, "role": "standby"}, {"instances": [], "role": "standby"}
                self.headroom = {"workloads": {}, "role": "standby"}  # a standby plans nothing

    def health(self) -> tuple[int, dict[str, Any]]:
        """/healthz: (HTTP code, body); the caller holds the lock. A standby is healthy (200, status
        "standby"): it is ready to take over, not broken."""
        if self.leader.get("role", "leader") != "leader":
            return 200, {"status": "standby", "last_error": None, "leader": self.leader}
        body = {"status": "ok" if self.healthy else "failing", "last_error": self.last_error, "leader": self.leader}
        return (200 if self.healthy else 503), body

    def publish(self, controller: Controller, report: TickReport) -> None:
        fleet = fleet_snapshot(controller)
        corrections = dict(controller.current_state().slo_guard.corrections)
        plan = {
            "tick": report.tick,
            "decision": report.decision,
            "layout": report.layout.to_json() if report.layout else None,
            "forecast": report.forecast,
            "observed": report.observed,
            "missing": report.missing,
            "corrections": corrections,
            "headroom": report.headroom,
            "attainment_1h": report.attainment,
            "notes": report.notes,
            "draining": report.draining,
            "breaches": report.breaches,
            "converged": report.converged,
            "surge_slots": report.surge_slots,
            "ok": report.ok,
            "error": report.error,
        }
        headroom = headroom_snapshot(controller, report)
        routing = controller.routing
        gateway = snapshot(routing, controller.policy) if routing is not None else {"kind": "none", "workloads": {}}
        with self.lock:
            self.metrics.update(report, fleet, corrections)
            self.metrics.gateway.set(gateway)
            self.plan, self.fleet, self.healthy, self.last_error = plan, fleet, report.ok, report.error
            self.headroom = headroom
            self.gateway = gateway


class _ThreadServer(uvicorn.Server):
    """uvicorn on a thread of its own: the process's signals belong to the service, not to it."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class StatusServer:
    """Serves a StatusState on host:port (port 0: any free port; see `.port`); with `token`,
    /v1/* answers 401 without `Authorization: Bearer <token>`. Binding happens here, so a port in
    use fails at construction (OSError), before anything starts."""

    def __init__(
        self,
        state: StatusState,
        port: int,
        host: str = "127.0.0.1",
        token: str | None = None,
        limits: ServerLimits = STATUS_LIMITS,
    ) -> None:
        self.listener = bind(host, port)
        self.listener.set_inheritable(False)  # agents and haproxy started later must not hold the port
        self.host = host
        self.port = int(self.listener.getsockname()[1])
        self.token = token
        config = ServerConfig(
            build_app(state, token.encode() if token is not None else None),
            limits,
            http=GuardedProtocol,
            loop="asyncio",
            lifespan="off",
            access_log=False,
            log_config=None,  # the service's logging (and its format) applies to uvicorn's loggers too
            log_level="warning",
            timeout_keep_alive=limits.idle_timeout_s,  # type: ignore[arg-type]  # a float works: call_later
            timeout_graceful_shutdown=1,
            server_header=False,
            headers=[("server", "igniter-status")],
        )
        self.server = _ThreadServer(config)
        self._thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.listener]}, name="igniter-status", daemon=True
        )

    def start(self) -> StatusServer:
        self._thread.start()
        return self

    def close(self) -> None:
        self.server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        self.listener.close()
