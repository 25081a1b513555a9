"""The layout says what the fleet carries: on every tick the fleet is at rest, the capacity the
layout records per workload (the planner's predictions, as layout_from_plan keeps them) equals
what the simulator re-predicts for the servers as they run together on their GPUs."""

from __future__ import annotations

from typing import Any

import pytest

from autoscaler.config.policy import load_policy
from autoscaler.sim import traces
from autoscaler.sim.engine import Replay, SimOptions, default_plan_fn, with_overrides
from tests.conftest import ROOT

pytestmark = [pytest.mark.unit, pytest.mark.slow]


class CheckedReplay(Replay):
    """A replay that compares, at each converged tick, the layout's capacity with the judged one."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.mismatches: list[tuple[float, str, float, float]] = []  # (time, workload, layout's, judged)

    def tick(self, now: float, fast: bool = False) -> Any:
        report = super().tick(now, fast)
        if report.converged and report.layout is not None:
            judged = self.snapshot(now)
            for w, planned in report.layout.capacity().items():
                if abs(judged.get(w, 0.0) - planned) > 1e-6 * max(planned, 1.0):
                    self.mismatches.append((now, w, planned, judged.get(w, 0.0)))
        return report


def test_converged_layouts_carry_what_they_say_on_the_azure_hour() -> None:
    """Azure x100 at 1-minute rows, the policy's own forecast: at row 19 a running conv_rps server
    stayed as it ran beside a resized neighbour, and the layout kept the plan's prediction for
    that neighbour (895.18 req/s for conv_rps where the fleet carried 893.06)."""
    policy = load_policy(ROOT / "policies" / "azure-sim.yaml")
    policy = policy.model_copy(update={"scaling": policy.scaling.model_copy(update={"interval_s": 60.0})})
    trace = traces.scale(traces.read_wide(ROOT / "traces" / "azure-llm-2023-1min.csv"), 100.0)
    opts = SimOptions()
    policy = with_overrides(policy, opts)
    replay = CheckedReplay(policy, trace, opts, default_plan_fn(policy))
    replay.run()
    assert replay.ticks > 60
    assert replay.mismatches == []
