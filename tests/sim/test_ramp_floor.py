"""The ramp floor in a replay (loop/tick/tuning.py): traffic returning after a quiet spell rises faster
than any capped headroom covers; planning for the rise going on shortens the misses."""

from __future__ import annotations

import numpy as np
import pytest

from autoscaler.sim.engine import simulate
from autoscaler.sim.traces import Trace

pytestmark = pytest.mark.unit


def returning() -> Trace:
    """An hour and a half at 100 req/s, twenty minutes rising by 400 req/s a minute, then flat."""
    quiet, rise = [100.0] * 90, [100.0 + 400.0 * (k + 1) for k in range(20)]
    rates = np.array(quiet + rise + [rise[-1]] * 20)
    return Trace("ramp.csv", np.arange(len(rates)) * 60.0, {"a": rates}, 60.0)


def short_rows(result) -> list[int]:
    return np.flatnonzero(result.capacity["a"] < result.trace.rates["a"] - 1e-9).tolist()


def test_a_sustained_rise_is_planned_ahead_and_shortens_the_misses(make_policy):
    """A 600 s boot (ten rows): with the floor off, only the headroom (at its cap 1.0, a doubling)
    plans ahead, and a rise of 4,400 req/s within boot + interval outruns it until the rate is past
    4,400. With it on, the tick that sees the third rise (row 92: 100, 500, 900, 1,300) plans for
    the rise going on over boot + interval, so from row 102 (ten rows later, when that capacity is
    up) no row is short; the rows before are a boot's wait that only a warm pool shortens. (Row 90
    is covered by the instance already up.)"""
    slow = {"headroom": "auto", "boot_s": 600}
    on = simulate(make_policy(scaling={**slow, "ramp_reads": 3}), returning())
    off = simulate(make_policy(scaling={**slow, "ramp_reads": 0}), returning())
    assert short_rows(on) == list(range(91, 102))
    assert short_rows(off)[:11] == short_rows(on) and max(short_rows(off)) >= 107
    assert on.summary()["slo_attainment"] > off.summary()["slo_attainment"]


def test_a_step_is_no_ramp(make_policy):
    """One step up, then flat: the floor never rises, so both replays plan alike, to the cent."""
    rates = np.array([100.0] * 90 + [2000.0] * 30)
    step = Trace("step.csv", np.arange(len(rates)) * 60.0, {"a": rates}, 60.0)
    on = simulate(make_policy(scaling={"headroom": "auto", "ramp_reads": 3}), step)
    off = simulate(make_policy(scaling={"headroom": "auto", "ramp_reads": 0}), step)
    assert on.summary()["cost_total_usd"] == off.summary()["cost_total_usd"]
    assert short_rows(on) == short_rows(off) and short_rows(on)[0] == 90
