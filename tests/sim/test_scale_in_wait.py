"""A tick whose cheaper plan is still waiting out scale_down_delay_s decides without making the
target plan (Controller._waiting, Deps.bound), and decides what it decided with it."""

from __future__ import annotations

import random

import numpy as np
import pytest

from autoscaler.loop.service import wiring
from autoscaler.loop.tick.controller import Controller
from autoscaler.sim import engine
from autoscaler.sim.engine import simulate
from autoscaler.sim.traces import Trace

pytestmark = pytest.mark.unit

MODELS = (("resnet50", 40, 300.0), ("alexnet", 20, 900.0), ("vgg19", 60, 150.0), ("ssd", 60, 120.0))


def _wandering(names: list[str], base: list[float], rows: int, seed: int) -> Trace:
    """Rates that wander within +-25 % of each base (fleet_scale_sim's walk): a scale-in waits
    on most ticks, since the hold rates keep each workload's highest."""
    rnd = random.Random(seed)
    level = [1.0] * len(names)
    cols: dict[str, list[float]] = {n: [] for n in names}
    for _ in range(rows):
        for i, n in enumerate(names):
            level[i] = min(1.25, max(0.75, level[i] * (1 + rnd.uniform(-0.08, 0.08))))
            cols[n].append(round(base[i] * level[i], 1))
    return Trace("walk.csv", np.arange(rows) * 60.0, {n: np.array(v) for n, v in cols.items()}, 60.0)


def _replay(policy, trace, bound: bool, monkeypatch) -> tuple[dict, list[str], int]:
    """The summary, every tick's decision and how many ticks had a ceiling in hand."""
    decisions: list[str] = []
    ceilings = [0]
    plan = Controller.plan

    def noting(self, *a, **k):
        out = plan(self, *a, **k)
        decisions.append(out[1])
        return out

    def counted(*a):
        got = wiring.default_bound(*a)
        ceilings[0] += got is not None
        return got

    monkeypatch.setattr(Controller, "plan", noting)
    monkeypatch.setattr(engine, "bound_for", lambda fn: counted if bound else None)
    result = simulate(policy, trace)
    monkeypatch.undo()
    return result.summary(), decisions, ceilings[0]


def test_decisions_and_results_are_those_made_with_the_target_plan(make_policy, monkeypatch):
    workloads = [
        {"name": f"w{i}", "model": m, "slo_ms": slo, "rate_rps": rate} for i, (m, slo, rate) in enumerate(MODELS * 2)
    ]
    policy = make_policy(
        {"interval_s": 30, "headroom": 0.1, "forecast": "holt", "scale_down_delay_s": 300},
        workloads=workloads,
    )
    trace = _wandering([w["name"] for w in workloads], [w["rate_rps"] for w in workloads], 40, seed=3)
    plain, plain_decisions, none = _replay(policy, trace, False, monkeypatch)
    waited, decisions, ceilings = _replay(policy, trace, True, monkeypatch)
    assert none == 0
    assert decisions == plain_decisions and waited == plain
    waits = sum(d.startswith("hold: cheaper plan held for") for d in decisions)
    assert waits >= 10 and ceilings >= waits // 2  # the wait was told from the ceiling, not the target
    assert any(d.startswith("target: cheaper plan held for") for d in decisions)  # and the wait ended
