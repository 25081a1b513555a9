"""Out of reach, through the real controller on a simulated clock: bursts that rise faster than a
boot (5 x within one minute, 180 s boots) put the target out of reach, and say why; a higher target
the cap cannot give is never silently the same as the lower one."""

from __future__ import annotations

import numpy as np
import pytest

from autoscaler.sim.engine import simulate
from autoscaler.sim.traces import Trace

pytestmark = [pytest.mark.unit, pytest.mark.slow]


def bursty(hours: int = 6) -> Trace:
    """1-minute rows at 300 req/s, jumping to 1500 within one row every 2 hours for 10 minutes."""
    rows = np.full(hours * 60, 300.0)
    for start in range(60, hours * 60, 120):
        rows[start : start + 10] = 1500.0
    return Trace("bursty.csv", np.arange(len(rows)) * 60.0, {"a": rows}, 60.0)


def test_bursts_faster_than_the_boot_are_out_of_reach_by_rise_time(make_policy):
    policy = make_policy(scaling={"headroom": 0.2, "burst": False})
    result = simulate(policy, bursty())
    s = result.summary()
    assert s["slo_attainment"] < 0.999  # the first minutes of each burst are short
    assert s["out_of_reach_ticks"].get("burst rise time", 0) > 0
    assert "cap reached" not in s["out_of_reach_ticks"]  # a fixed headroom has no cap


def test_a_target_beyond_the_cap_says_so(make_policy):
    results = [
        simulate(make_policy(scaling={"headroom": "auto", "target_attainment": t, "burst": False}), bursty())
        for t in (0.999, 0.9999)
    ]
    for r in results:
        assert r.out_of_reach_ticks.get("cap reached", 0) > 0
    assert results[0].cost_total_usd == pytest.approx(results[1].cost_total_usd)  # what the cap leaves the same
