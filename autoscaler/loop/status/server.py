"""The status endpoint: /healthz, /metrics (Prometheus), /openapi.json and the /v1/* views of the
controller (status_app.py lists them), served by uvicorn on a thread of its own.

It listens on scaling.status_listen (127.0.0.1:9464 by default; a private address lets Prometheus
on another host scrape it). With scaling.status_token_file, /v1/* requires that bearer token;
/healthz and /metrics stay open (what a load balancer and Prometheus need, and they show no
addresses or assignments).

The server is the inference server's: uvicorn on httptools with agents.server.guard's read
timeout, header timeout, idle timer, connection cap (which never refuses the probes: PROBES,
within their own reserve) and JSON errors for malformed HTTP (STATUS_LIMITS). One event
loop serves every connection, so a client holding hundreds of idle connections costs sockets until
the idle timer closes them, not a thread each.

The tick thread publishes an immutable snapshot after every tick; the HTTP loop only reads the
latest snapshot, so a slow scrape never blocks a tick and never touches the store.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import uvicorn

from agents.server.guard import GuardedProtocol, ServerConfig, bind
from agents.spec import ServerLimits
from autoscaler.config.offerings import offering_prices
from autoscaler.core.capacity.reach import conditions
from autoscaler.core.fleet.lifecycle import LIVE, describe_table
from autoscaler.loop.status.app import build_app
from autoscaler.loop.status.health import (
    FAILING,
    OK,
    STANDBY,
    STANDBY_HEALTH,
    STARTING,
    STARTING_HEALTH,
    Health,
    HealthBook,
    evaluate,
    facts_of,
    pick,
    render,
)
from autoscaler.loop.status.metrics import Metrics
from autoscaler.loop.steps.gateway_step import snapshot
from autoscaler.loop.tick.advisory import log_advice
from autoscaler.loop.tick.controller import Controller, TickReport

log = logging.getLogger(__name__)
__all__ = ["STATUS_LIMITS", "Metrics", "StatusServer", "StatusState", "fleet_snapshot", "headroom_snapshot"]

# A whole request within 30 s of its first byte (as the inference servers), idle connections
# closed after 60 s, and past 256 open connections a request gets a JSON 503: a scraper, a load
# balancer's checks and a few people with curl need far fewer.
STATUS_LIMITS = ServerLimits(read_timeout_s=30.0, idle_timeout_s=60.0, max_connections=256, drain_timeout_s=0.0)
# The probes (a kubelet's, a load balancer's, a supervisor's) are served past the cap: a client that
# holds the connections (slowloris: 300 trickling ones once held every route at 503 for 30.7 s) must
# not get a healthy leader restarted by its liveness probe. A request line and headers must come
# within 10 s of the connect (of the first byte for a later request), so those connections go sooner.
PROBES = ("/livez", "/readyz", "/healthz")
PROBE_RESERVE = 32
HEADER_TIMEOUT_S = 10.0


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
    """Per workload: the headroom planned with, the burst and ramp floors (auto), the quantile of the errors
    it was sized at (the target, moved by the feedback), the latest forecast error sample and the
    quantiles of the last hour's (core/capacity/error_window.py), and
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
                "ramp_floor_rps": report.ramp_floor.get(w, 0.0),
                "quantile": report.headroom_quantile.get(w),
                "forecast_error": report.forecast_error.get(w),
                "forecast_error_1h": report.recent_errors.quantiles.get(w, {}),
                "attainment_1h": report.attainment.get(w),
                "periods_s": report.periods.get(w, []),
                "ahead_rps": report.ahead.get(w, 0.0),
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
    last_error: str | None = None
    leader: dict[str, Any] = field(default_factory=lambda: {"role": "leader"})
    lock: threading.Lock = field(default_factory=threading.Lock)
    book: HealthBook = field(default_factory=lambda: HealthBook(started_at=time.time()))
    advice: dict[str, Any] = field(default_factory=lambda: {"mode": "off", "actions": []})

    def set_leader(self, snapshot: dict[str, Any], changed: bool = False) -> None:
        """The lease's state (leadership.snapshot()); a standby serves no plan, fleet or headroom."""
        with self.lock:
            leader = snapshot["role"] in ("leader", "advisory")  # an advisory run plans (and publishes) too
            if changed:
                self.metrics.role_changes.labels(snapshot["role"]).inc()
            self.metrics.leader.set(1 if snapshot["role"] == "leader" else 0)
            self.metrics.lease_token.set(snapshot.get("token") or 0)
            self.leader = dict(snapshot)
            if not leader:
                self.plan, self.fleet = {"layout": None, "role": "standby"}, {"instances": [], "role": "standby"}
                self.headroom = {"workloads": {}, "role": "standby"}  # a standby plans nothing
                self._set_health(STANDBY_HEALTH, None)
            elif self.book.health.status == STANDBY:  # a new leader: nothing checked until its first tick
                self._set_health(STARTING_HEALTH, None)

    def set_advice(self, advice: dict[str, Any]) -> None:
        """An advisory run's intended actions (loop/tick/advisory.py), logged once per change."""
        with self.lock:
            previous = self.advice if self.advice.get("mode") == "advisory" else None
            self.advice = advice
        log_advice(advice, previous)

    def beat(self, now: float, interval_s: float) -> None:
        """The scheduler started a tick (leader or standby): what /livez's tick-loop check reads."""
        with self.lock:
            self.book.beat_at, self.book.interval_s = now, interval_s

    def _set_health(self, health: Health, ready: dict[str, int] | None) -> None:
        """The caller holds the lock. One log line and the metrics per change."""
        line = self.book.update(health)
        self.metrics.set_health(health, ready)
        if line is not None:
            (log.info if health.status in (OK, STANDBY, STARTING) else log.warning)("%s", line)

    def health(self) -> tuple[int, dict[str, Any]]:
        """/healthz: (HTTP code, body); the caller holds the lock. 503 only while the last tick
        failed; ok, degraded (with reasons), standby and starting answer 200, so a load balancer
        or a supervisor keeps a process that works; /readyz is the strict one (health.py)."""
        body = {**self.book.to_json(), "last_error": self.last_error, "leader": self.leader}
        return (503 if self.book.health.status == FAILING else 200), body

    def probe(self, kind: str, verbose: bool, exclude: list[str], only: str | None = None) -> tuple[int, str]:
        """/livez and /readyz (and /livez/NAME, /readyz/NAME): kube-apiserver's text answers; the
        caller holds the lock. An unknown NAME is (404, message)."""
        checks = self.book.live(time.time()) if kind == "livez" else self.book.ready()
        if only is not None:
            checks = tuple(c for c in checks if c.name == only)
            if not checks:
                return 404, f"no {kind} check {only!r}\n"
        return render(kind, pick(checks, exclude), verbose)

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
        facts = facts_of(controller, report)
        health = evaluate(facts)
        counts = facts.serving if facts.serving is not None else facts.ready
        ready = None if counts is None else {w.name: counts.get(w.name, 0) for w in controller.policy.workloads}
        routing = controller.routing
        gateway = snapshot(routing, controller.policy) if routing is not None else {"kind": "none", "workloads": {}}
        with self.lock:
            self.metrics.update(report, fleet, corrections)
            self.metrics.gateway.set(gateway)
            self.plan, self.fleet, self.last_error = plan, fleet, report.error
            if self.leader.get("role", "leader") != "standby":
                self._set_health(health, ready)
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
        header_timeout_s: float = HEADER_TIMEOUT_S,
    ) -> None:
        self.listener = bind(host, port)
        self.listener.set_inheritable(False)  # agents and haproxy started later must not hold the port
        self.host = host
        self.port = int(self.listener.getsockname()[1])
        self.token = token
        config = ServerConfig(
            build_app(state, token.encode() if token is not None else None),
            limits,
            probes=PROBES,
            probe_reserve=PROBE_RESERVE,
            header_timeout_s=header_timeout_s,
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
