"""/metrics is open (no bearer token), so the gateway's families name servers, never their
addresses (docs/operations.md): those are /v1/gateway's, behind the token."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from autoscaler.loop.status.metrics_gateway import GatewayCollector

pytestmark = pytest.mark.unit

SERVER = {
    "name": "w-0",
    "address": "10.1.2.3:8101",
    "state": "ready",
    "weight": 256,
    "current_sessions": 1,
    "requests_total": 5,
    "check_ok": True,
    "planned_rate_rps": 100.0,
}


def test_metrics_name_servers_without_their_addresses() -> None:
    collector = GatewayCollector()
    collector.set(
        {"kind": "haproxy", "ok": True, "workloads": {"w": {"requests_total": 5, "errors_5xx": 0, "servers": [SERVER]}}}
    )
    registry = CollectorRegistry()
    registry.register(collector)
    text = generate_latest(registry).decode()
    assert 'igniter_gateway_server_weight{server="w-0",state="ready",workload="w"} 256.0' in text
    assert "10.1.2.3" not in text and "address" not in text
