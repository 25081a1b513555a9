"""The status endpoint's Prometheus metrics: one registry per controller, set from each tick's
report (StatusState.publish) and from the lease thread (StatusState.set_leader).

Names are a contract for dashboards and alert rules (deploy/): rename none without a note.
"""

from __future__ import annotations

from collections import Counter as Count
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from autoscaler.loop.status.health import STATUSES, Health
from autoscaler.loop.status.metrics_gateway import GatewayCollector
from autoscaler.loop.tick.records import TickReport


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
        self.ramp_floor = Gauge(
            "igniter_ramp_floor_rps",
            "Headroom auto: where a rise seen on each of the last scaling.ramp_reads reads goes by boot_s + "
            "interval_s, the least planned (0: no sustained rise)",
            ["workload"],
            registry=r,
        )
        self.period = Gauge(
            "igniter_forecast_period_seconds",
            "Forecast auto: each period found in the workload's rate history (rank 0: the strongest)",
            ["workload", "rank"],
            registry=r,
        )
        self.forecast_error = Gauge(
            "igniter_forecast_error_ratio",
            "Quantiles of the last hour's forecast errors (observed / the base forecast boot_s earlier - 1, "
            "time-weighted): 0.5 the bias, 0.9 and 0.99 how far above the forecast the traffic went",
            ["workload", "quantile"],
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
        self.latency_p99 = Gauge(
            "igniter_latency_p99_seconds",
            "Worst p99 request latency of a workload's ready servers over their last minute, as their agents "
            "report it (what the SLO guard compares with slo_ms); absent while no ready server reports one",
            ["workload"],
            registry=r,
        )
        self.out_of_reach = Gauge(
            "igniter_target_out_of_reach",
            "1 while a workload's target_attainment is out of reach of the settings, by cause "
            "(cap reached, burst rise time, boot time; docs/operations.md)",
            ["workload", "cause"],
            registry=r,
        )
        self.fast_ticks = Counter(
            "igniter_fast_ticks",
            "Fast ticks the fast path ran between regular ticks (they only add capacity)",
            registry=r,
        )
        self.event_ticks = Counter(
            "igniter_event_ticks",
            "Ticks run at once because something came up between ticks (scaling.ready_watch)",
            registry=r,
        )
        self.warm_starts = Counter(
            "igniter_warm_starts", "Launches that started a stopped warm-pool member (scaling.warm_pool)", registry=r
        )
        self.pool_returns = Counter(
            "igniter_warm_pool_returns",
            "Retiring instances stopped into the warm pool instead of terminated (reuse_on_scale_in)",
            registry=r,
        )
        self.pool_members = Gauge(
            "igniter_warm_pool_members",
            "Warm-pool members by state (pending, running, stopped, ...)",
            ["state"],
            registry=r,
        )
        self.pool_target = Gauge(
            "igniter_warm_pool_target", "Warm-pool members wanted per instance type", ["instance_type"], registry=r
        )
        self.tick_seconds = Histogram(
            "igniter_tick_duration_seconds",
            "Duration of one tick",
            registry=r,
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
        )
        self.ticks = Counter("igniter_ticks", "Ticks run", ["result"], registry=r)
        self.overruns = Counter(
            "igniter_tick_overruns",
            "Ticks that took more than half of scaling.interval_s (the fleet outgrows the loop: docs/operations.md, "
            "Fleet size)",
            registry=r,
        )
        self.last_duration = Gauge("igniter_tick_last_duration_seconds", "Duration of the last tick", registry=r)
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
        self.health = Gauge(
            "igniter_health_status",
            "1 for the status /healthz reports (ok, degraded, failing, standby, starting), 0 for the others",
            ["status"],
            registry=r,
        )
        self.health_check = Gauge(
            "igniter_health_check", "1 while a /readyz check passes, 0 while it fails", ["check"], registry=r
        )
        self.ready_servers = Gauge(
            "igniter_ready_servers",
            "Servers taking requests per workload (through the gateway when one runs, else ready per their agents)",
            ["workload"],
            registry=r,
        )
        self.gateway = GatewayCollector()
        r.register(self.gateway)

    def update(self, report: TickReport, fleet: dict[str, Any], corrections: dict[str, float]) -> None:
        self.ticks.labels("ok" if report.ok else "error").inc()
        self.tick_seconds.observe(report.duration_s)
        self.last_duration.set(report.duration_s)
        if report.overrun:
            self.overruns.inc()
        self.last_tick.set(report.now)
        for kind, n in report.outcome.errors.items():
            self.errors.labels(kind).inc(n)
        self.surge.set(len(report.surge_slots))
        self.warm_starts.inc(report.outcome.warm_starts)
        self.pool_returns.inc(report.outcome.pool_returns)
        if report.warm_pool is not None:  # a fast tick does not look at the pool: the gauges stay
            _reset(self.pool_members, {(k,): float(n) for k, n in report.warm_pool.members.items()})
            _reset(self.pool_target, {(k,): float(n) for k, n in report.warm_pool.target.items()})
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
        _reset(self.ramp_floor, {(w,): v for w, v in report.ramp_floor.items()})
        _reset(self.period, {(w, str(i)): p for w, ps in report.periods.items() for i, p in enumerate(ps)})
        _reset(self.quantile, {(w,): v for w, v in report.headroom_quantile.items()})
        _reset(
            self.forecast_error, {(w, q): v for w, qs in report.recent_errors.quantiles.items() for q, v in qs.items()}
        )
        _reset(self.out_of_reach, {(w, r.cause or ""): float(r.out) for w, r in report.reach.items()})
        _reset(self.latency_p99, {(w,): ms / 1000.0 for w, ms in report.latency_p99_ms.items()})

    def set_health(self, health: Health, ready: dict[str, int] | None) -> None:
        for status in STATUSES:
            self.health.labels(status).set(1 if status == health.status else 0)
        _reset(self.health_check, {(c.name,): 1.0 if c.ok else 0.0 for c in health.checks})
        if ready is not None:
            _reset(self.ready_servers, {(w,): float(n) for w, n in ready.items()})


def _count(instances: list[dict[str, Any]]) -> list[tuple[dict[str, str], int]]:
    counts = Count((i["instance_type"], i["state"]) for i in instances)
    return [({"instance_type": t, "state": s}, n) for (t, s), n in counts.items()]


def _reset(gauge: Gauge, values: dict[tuple[str, ...], float]) -> None:
    gauge.clear()
    for labels, value in values.items():
        gauge.labels(*labels).set(value)
