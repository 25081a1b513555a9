"""The gateway in /metrics: what `GET /v1/gateway` shows, as Prometheus families.

A custom collector over the latest snapshot (published after each tick), so HAProxy's own
counters are exported as counters, as they are, rather than copied into client-side ones.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector


class GatewayCollector(Collector):
    def __init__(self) -> None:
        self.snapshot: dict[str, Any] = {"kind": "none", "workloads": {}}

    def set(self, snapshot: dict[str, Any]) -> None:
        self.snapshot = snapshot

    def collect(self) -> Iterator[Any]:
        snap = self.snapshot
        up = GaugeMetricFamily("igniter_gateway_up", "1 when the gateway answered this tick")
        up.add_metric([], 1.0 if snap.get("ok") else 0.0)
        yield up
        yield from self._workloads(snap.get("workloads", {}))
        yield from self._servers(snap.get("workloads", {}))

    def _workloads(self, workloads: dict[str, Any]) -> Iterator[Any]:
        labels = ["workload"]
        reqs = CounterMetricFamily(
            "igniter_gateway_requests", "Requests the gateway routed per workload", labels=labels
        )
        errs = CounterMetricFamily("igniter_gateway_errors_5xx", "5xx answers per workload", labels=labels)
        rate = GaugeMetricFamily(
            "igniter_gateway_request_rate_rps", "Measured request rate per workload", labels=labels
        )
        for w, body in sorted(workloads.items()):
            if body.get("requests_total") is not None:
                reqs.add_metric([w], body["requests_total"])
                errs.add_metric([w], body["errors_5xx"] or 0)
            if body.get("request_rate_rps") is not None:
                rate.add_metric([w], body["request_rate_rps"])
        yield from (reqs, errs, rate)

    def _servers(self, workloads: dict[str, Any]) -> Iterator[Any]:
        labels = ["workload", "server", "state"]  # no address: /metrics is open (/v1/gateway, behind the token, has it)
        weight = GaugeMetricFamily("igniter_gateway_server_weight", "HAProxy weight (0..256)", labels=labels)
        planned = GaugeMetricFamily("igniter_gateway_server_planned_rate_rps", "Rate the plan gives it", labels=labels)
        sessions = GaugeMetricFamily("igniter_gateway_server_current_sessions", "Requests in flight", labels=labels)
        reqs = CounterMetricFamily("igniter_gateway_server_requests", "Requests sent to the server", labels=labels)
        healthy = GaugeMetricFamily("igniter_gateway_server_check_ok", "1 while its health check passes", labels=labels)
        for w, body in sorted(workloads.items()):
            for s in body.get("servers", []):
                key = [w, s["name"], s["state"]]
                weight.add_metric(key, s["weight"])
                sessions.add_metric(key, s["current_sessions"])
                reqs.add_metric(key, s["requests_total"])
                healthy.add_metric(key, 1.0 if s["check_ok"] else 0.0)
                if s.get("planned_rate_rps") is not None:
                    planned.add_metric(key, s["planned_rate_rps"])
        yield from (weight, planned, sessions, reqs, healthy)
