"""The status endpoint: /healthz, /metrics (Prometheus), /v1/plan, /v1/fleet, /v1/gateway, /v1/leader,
/v1/headroom.

It listens on scaling.status_listen (127.0.0.1:9464 by default; a private address lets Prometheus
on another host scrape it). With scaling.status_token_file, /v1/* requires that bearer token;
/healthz and /metrics stay open (what a load balancer and Prometheus need, and they show no
addresses or assignments).

The tick thread publishes an immutable snapshot after every tick; HTTP threads only read the
latest snapshot, so a slow scrape never blocks a tick and never touches the store.
"""

from __future__ import annotations

import hmac
import json
import socket
import threading
from collections import Counter as Count
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from autoscaler.config.offerings import offering_prices
from autoscaler.core.fleet.lifecycle import LIVE, describe_table
from autoscaler.loop.controller import Controller, TickReport
from autoscaler.loop.gateway_step import snapshot
from autoscaler.loop.metrics_gateway import GatewayCollector


class Metrics:
    """Prometheus metrics of one controller, in their own registry."""

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.cost = Gauge("igniter_fleet_cost_per_hour", "Hourly price of the instances the fleet holds", registry=r)
        self.instances = Gauge(
            "igniter_instances", "Instance records by type and lifecycle state", ["instance_type", "state"], registry=r
        )
        self.by_capacity = Gauge(
            "igniter_instances_by_capacity_type",
            "Live instance records by capacity type (on-demand, spot) and lifecycle state",
            ["capacity_type", "state"],
            registry=r,
        )
        self.planned = Gauge(
            "igniter_planned_capacity_rps", "Predicted throughput the layout provides", ["workload"], registry=r
        )
        self.forecast = Gauge(
            "igniter_forecast_rps", "Rate planned for (forecast with headroom)", ["workload"], registry=r
        )
        self.observed = Gauge("igniter_observed_rps", "Latest usable observed rate", ["workload"], registry=r)
        self.correction = Gauge("igniter_slo_correction", "SLO-guard correction factor", ["workload"], registry=r)
        self.headroom = Gauge(
            "igniter_headroom_ratio", "Headroom planned above the forecast (0.2: 20 %)", ["workload"], registry=r
        )
        self.burst_floor = Gauge(
            "igniter_burst_floor_rps",
            "Headroom auto: the busiest rate seen over the last scale_down_delay_s, the least planned",
            ["workload"],
            registry=r,
        )
        self.quantile = Gauge(
            "igniter_headroom_quantile_ratio",
            "Headroom auto: the quantile of the forecast errors the headroom is sized at (the target, "
            "moved by the attainment measured)",
            ["workload"],
            registry=r,
        )
        self.attainment = Gauge(
            "igniter_attainment_last_hour_ratio",
            "Fraction of the last hour in which the ready capacity covered the observed rate",
            ["workload"],
            registry=r,
        )
        self.tick_seconds = Histogram(
            "igniter_tick_duration_seconds",
            "Duration of one tick",
            registry=r,
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
        )
        self.ticks = Counter("igniter_ticks", "Ticks run", ["result"], registry=r)
        self.errors = Counter(
            "igniter_errors", "Errors by kind (provider, transport, capacity, rates, tick)", ["kind"], registry=r
        )
        self.last_tick = Gauge("igniter_last_tick_timestamp_seconds", "When the last tick started", registry=r)
        self.leader = Gauge(
            "igniter_leader", "1 while this process holds the fleet's lease, 0 as a standby", registry=r
        )
        self.lease_token = Gauge("igniter_lease_token", "Fencing token of the lease's current tenure", registry=r)
        self.role_changes = Counter("igniter_leader_changes", "Changes of role", ["to"], registry=r)
        self.surge = Gauge("igniter_surge_instances", "Surge instances kept or launched for moves", registry=r)
        self.draining = Gauge("igniter_draining_servers", "Retiring servers waiting to be drained", registry=r)
        self.breaches = Counter(
            "igniter_invariant_breaches",
            "Ticks where a policy limit made a move take capacity away before its replacement served",
            ["limit"],
            registry=r,
        )
        self.gateway = GatewayCollector()
        r.register(self.gateway)

    def update(self, report: TickReport, fleet: dict[str, Any], corrections: dict[str, float]) -> None:
        self.ticks.labels("ok" if report.ok else "error").inc()
        self.tick_seconds.observe(report.duration_s)
        self.last_tick.set(report.now)
        for kind, n in report.outcome.errors.items():
            self.errors.labels(kind).inc(n)
        self.surge.set(len(report.surge_slots))
        self.draining.set(len(report.draining))
        for b in report.breaches:
            self.breaches.labels(b["limit"]).inc()
        self.cost.set(fleet["cost_per_hour"])
        _reset(self.instances, {(i["instance_type"], i["state"]): n for i, n in _count(fleet["instances"])})
        by_capacity = Count((i["capacity_type"], i["state"]) for i in fleet["instances"])
        _reset(self.by_capacity, dict(by_capacity))
        capacity = report.layout.capacity() if report.layout else {}
        _reset(self.planned, {(w,): capacity.get(w, 0.0) for w in report.forecast})
        _reset(self.forecast, {(w,): v for w, v in report.forecast.items()})
        _reset(self.observed, {(w,): v for w, v in report.observed.items()})
        _reset(self.correction, {(w,): v for w, v in corrections.items()})
        _reset(self.headroom, {(w,): v for w, v in report.headroom.items()})
        _reset(self.attainment, {(w,): v for w, v in report.attainment.items() if v is not None})
        _reset(self.burst_floor, {(w,): v for w, v in report.burst_floor.items()})
        _reset(self.quantile, {(w,): v for w, v in report.headroom_quantile.items()})


def _count(instances: list[dict[str, Any]]) -> list[tuple[dict[str, str], int]]:
    counts = Count((i["instance_type"], i["state"]) for i in instances)
    return [({"instance_type": t, "state": s}, n) for (t, s), n in counts.items()]


def _reset(gauge: Gauge, values: dict[tuple[str, ...], float]) -> None:
    gauge.clear()
    for labels, value in values.items():
        gauge.labels(*labels).set(value)


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
            "mig": controller.agent_mig.get(r.slot),
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


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def do_GET(self) -> None:
        state = self.server.state
        with state.lock:
            routes = {
                "/healthz": lambda: self._health(state),
                "/metrics": lambda: self._metrics(state),
                "/v1/plan": lambda: self._json(200, state.plan),
                "/v1/fleet": lambda: self._json(200, state.fleet),
                "/v1/leader": lambda: self._json(200, state.leader),
                "/v1/headroom": lambda: self._json(200, state.headroom),
                "/v1/gateway": lambda: self._json(200, state.gateway),
            }
            path = self.path.split("?", 1)[0]
            route = routes.get(path)
            if path.startswith("/v1/") and not self._authorized():
                self._unauthorized()
            elif route is None:
                self._json(404, {"error": f"no route {self.path}", "routes": sorted(routes)})
            else:
                route()

    def _authorized(self) -> bool:
        token = self.server.token
        if token is None:
            return True
        scheme, _, given = (self.headers.get("Authorization") or "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token)

    def _unauthorized(self) -> None:
        body = json.dumps({"error": "/v1/* needs the bearer token (Authorization: Bearer TOKEN)"}).encode()
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Bearer realm="igniter"')
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _health(self, state: StatusState) -> None:
        """A standby is healthy (200, status "standby"): it is ready to take over, not broken."""
        role = state.leader.get("role", "leader")
        if role != "leader":
            self._json(200, {"status": "standby", "last_error": None, "leader": state.leader})
            return
        self._json(
            200 if state.healthy else 503,
            {"status": "ok" if state.healthy else "failing", "last_error": state.last_error, "leader": state.leader},
        )

    def _metrics(self, state: StatusState) -> None:
        self._send(200, generate_latest(state.metrics.registry), CONTENT_TYPE_LATEST)

    def _json(self, code: int, body: Any) -> None:
        self._send(code, json.dumps(body, indent=1, default=str).encode(), "application/json")

    def _send(self, code: int, body: bytes, ctype: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: StatusState
    token: bytes | None = None


class _Server6(_Server):
    address_family = socket.AF_INET6


class StatusServer:
    """Serves a StatusState on host:port (port 0: any free port; see `.port`); with `token`,
    /v1/* answers 401 without `Authorization: Bearer <token>`."""

    def __init__(self, state: StatusState, port: int, host: str = "127.0.0.1", token: str | None = None) -> None:
        self.httpd = (_Server6 if ":" in host else _Server)((host, port), _Handler)
        self.httpd.state = state
        self.httpd.token = token.encode() if token is not None else None
        self.host = host
        self.port = int(self.httpd.server_address[1])
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="igniter-status", daemon=True)

    def start(self) -> StatusServer:
        self._thread.start()
        return self

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=5)
