"""A tick that takes more than half its interval (issue 50 item 6): a warning in the log, the
report says so, and igniter_tick_overruns_total counts it (the alert IgniterTickOverrun reads it)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from prometheus_client import generate_latest

from autoscaler.loop.status.metrics import Metrics
from tests.kit.control import Clock, make_controller, make_policy, stub_planner

pytestmark = pytest.mark.unit


def test_a_tick_over_half_its_interval_warns_and_counts(tmp_path, caplog) -> None:
    policy = make_policy(tmp_path)
    clock, spend = Clock(), [0.0]

    def planner(*args: Any) -> Any:
        clock.advance(spend[0])  # the planner's work, on the controller's clock
        return stub_planner(*args)

    ctl, *_ = make_controller(policy, clock=clock, planner=planner)
    metrics = Metrics()
    half = policy.scaling.interval_s / 2
    reports = []
    for took in (0.0, half * 0.9, half * 1.2):
        spend[0] = took
        with caplog.at_level(logging.WARNING, logger="autoscaler.loop.tick.controller"):
            reports.append(ctl.tick())
        metrics.update(reports[-1], {"cost_per_hour": 0.0, "instances": []}, {})
        clock.advance(policy.scaling.interval_s)
    assert [r.overrun for r in reports] == [False, False, True]
    assert [m for m in caplog.messages if "more than half of scaling.interval_s" in m] == [
        f"tick {reports[2].tick} took {reports[2].duration_s:.1f} s, more than half of scaling.interval_s"
    ]
    text = generate_latest(metrics.registry).decode()
    assert "igniter_tick_overruns_total 1.0" in text
    assert f"igniter_tick_last_duration_seconds {reports[2].duration_s}" in text
