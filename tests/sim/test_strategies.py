"""Baseline strategies: reactive target tracking and static peak."""

from __future__ import annotations

import numpy as np
import pytest

from autoscaler.sim.engine import SimOptions, simulate
from autoscaler.sim.strategies import HIGH, LOW, reactive_planner, replica, replicas_needed
from autoscaler.sim.traces import Trace

pytestmark = pytest.mark.unit


def test_target_tracking_keeps_the_count_inside_the_band():
    assert replicas_needed(50.0, 1, 100.0) == 1  # 50 %: inside 40-70 %
    assert replicas_needed(80.0, 1, 100.0) == 2  # 80 %: out, to 55 % -> ceil(1.45)
    assert replicas_needed(30.0, 2, 100.0) == 1  # 15 %: in
    assert replicas_needed(0.0, 0, 100.0) == 1  # never below one replica
    assert LOW < 0.55 < HIGH


def test_a_replica_is_a_whole_gpu_at_the_best_batch_within_half_the_slo(make_policy):
    policy = make_policy()
    rep = replica(policy, "a")
    assert rep is not None and rep.itype.name == "g4dn.xlarge"
    assert rep.latency_ms <= 20.0 and rep.capacity > 0


def test_reactive_planner_is_a_plan_function(make_policy):
    policy = make_policy()
    rep = replica(policy, "a")
    plan = reactive_planner(policy, {"a": rep.capacity * 1.5}, {}, {}, None)
    assert len(plan.instances) == 3  # 150 % of one replica at 55 % -> 3
    again = reactive_planner(policy, {"a": rep.capacity * 1.5}, {}, {}, plan)
    assert len(again.instances) == 3  # 50 % each: inside the band, unchanged


def test_reactive_strategy_runs_in_the_controller(make_policy):
    policy = make_policy()
    times = np.arange(20) * 60.0
    trace = Trace("t", times, {"a": np.array([400.0] * 10 + [1500.0] * 10)}, 60.0)
    result = simulate(policy, trace, SimOptions(strategy="reactive"))
    assert result.strategy == "reactive" and result.launches >= 1
    assert result.forecast == "last" and result.headroom == 0.0
