"""A replay with scaling.plan_on: interval: the early ticks between interval ticks keep the
standing layout (no forecast, no plan), and the rollout still converges to what was planned."""

from __future__ import annotations

import pytest

from autoscaler.loop.tick.controller import Controller
from autoscaler.sim.engine import simulate
from tests.sim.test_scale_in_wait import MODELS, _wandering

pytestmark = pytest.mark.unit


def _replay(policy, trace, monkeypatch) -> tuple[dict, list[tuple[float, str]], int]:
    """The summary, each tick's (time, decision) and how many ticks forecast."""
    seen: list[tuple[float, str]] = []
    forecasts = [0]
    tick, forecast = Controller.tick, Controller.forecast

    def noting(self, fast=False):
        report = tick(self, fast)
        seen.append((report.now, report.decision))
        return report

    def counted(self, *a):
        forecasts[0] += 1
        return forecast(self, *a)

    monkeypatch.setattr(Controller, "tick", noting)
    monkeypatch.setattr(Controller, "forecast", counted)
    summary = simulate(policy, trace).summary()
    monkeypatch.undo()
    return summary, seen, forecasts[0]


def test_early_ticks_keep_the_standing_layout(make_policy, monkeypatch):
    workloads = [
        {"name": f"w{i}", "model": m, "slo_ms": slo, "rate_rps": rate} for i, (m, slo, rate) in enumerate(MODELS * 2)
    ]
    trace = _wandering([w["name"] for w in workloads], [w["rate_rps"] for w in workloads], 40, seed=3)
    scaling = {"interval_s": 60, "headroom": 0.1, "forecast": "holt", "scale_down_delay_s": 300}
    every, every_ticks, _ = _replay(make_policy(scaling, workloads=workloads), trace, monkeypatch)
    policy = make_policy({**scaling, "plan_on": "interval"}, workloads=workloads)
    interval, ticks, forecasts = _replay(policy, trace, monkeypatch)
    early = [(t, d) for t, d in ticks if t % 60]
    assert len(early) >= 5 and all(d.startswith("standing: ") for _, d in early)
    first: dict[float, str] = {}  # the warm start ticks twice at the trace's start: the second keeps the first's plan
    for t, d in ticks:
        first.setdefault(t, d)
    assert all(not d.startswith("standing: ") for t, d in first.items() if t % 60 == 0)
    assert forecasts == sum(not d.startswith("standing: ") for _, d in ticks)  # only the ticks that plan forecast
    assert any(not d.startswith("standing: ") for t, d in every_ticks if t % 60)  # by default they plan
    assert interval["slo_attainment"] >= every["slo_attainment"] - 0.01
    assert interval["cost_total_usd"] <= every["cost_total_usd"] * 1.05
