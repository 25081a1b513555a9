"""The warm pool's metrics (loop/status/metrics.py), set from a tick's report: starts and returns count
up, the members and target gauges follow the last normal tick."""

from __future__ import annotations

import pytest
from prometheus_client import generate_latest

from autoscaler.loop.status.metrics import Metrics
from autoscaler.loop.steps.pool_step import PoolReport
from autoscaler.loop.tick.controller import TickReport

pytestmark = pytest.mark.unit


def test_warm_starts_and_returns_count_up_and_the_pool_gauges_follow_the_tick() -> None:
    metrics = Metrics()
    for tick in (1, 2):
        report = TickReport(tick, 100.0 * tick)
        report.outcome.warm_started.append((f"s{tick}", 0))
        report.outcome.pool_returns = 2
        report.warm_pool = PoolReport(target={"g5": 2}, members={"stopped": tick}, started=1, returned=2)
        metrics.update(report, {"cost_per_hour": 0.0, "instances": []}, {})
    text = generate_latest(metrics.registry).decode()
    assert "igniter_warm_starts_total 2.0" in text
    assert "igniter_warm_pool_returns_total 4.0" in text
    assert 'igniter_warm_pool_members{state="stopped"} 2.0' in text
    assert 'igniter_warm_pool_target{instance_type="g5"} 2.0' in text
