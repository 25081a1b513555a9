"""core/capacity/reach.py: when a workload's target_attainment is out of reach of the settings, and why."""

from __future__ import annotations

import logging

import pytest

from autoscaler.core.capacity.reach import (
    BOOT_TIME,
    CAP_REACHED,
    RISE_TIME,
    WITHIN,
    ReachInput,
    conditions,
    fastest_rise,
    judge,
)

pytestmark = pytest.mark.unit

STEADY = [(t * 60.0, 100.0) for t in range(30)]
BURST = STEADY[:20] + [
    (1200.0, 450.0),
    *((t * 60.0, 480.0) for t in range(21, 30)),
]  # 4.5 x in one minute, 4.8 x within 240 s


def inp(**kw: object) -> ReachInput:
    base: dict[str, object] = dict(target=0.999, headroom=0.3, cap=1.0, attainment=1.0, reaction_s=240.0)
    return ReachInput(**{**base, **kw})  # type: ignore[arg-type]


def test_within_reach_while_the_hour_meets_the_target_below_the_cap() -> None:
    assert judge(inp()) == WITHIN and judge(inp(attainment=None)) == WITHIN


def test_the_headroom_at_its_cap_is_out_of_reach_whatever_the_attainment() -> None:
    r = judge(inp(headroom=1.0, attainment=1.0))
    assert r.out and r.cause == CAP_REACHED and "cap 1" in r.detail
    assert judge(inp(headroom=1.0, cap=None)) == WITHIN  # a fixed headroom has no cap


def test_a_burst_faster_than_a_tick_and_a_boot_names_the_rise_time() -> None:
    r = judge(inp(attainment=0.98, rates=BURST))
    assert r.out and r.cause == RISE_TIME and "4.80 x within 240 s" in r.detail and "0.9800" in r.detail


def test_short_without_such_a_rise_is_the_boot_time() -> None:
    r = judge(inp(attainment=0.98, rates=STEADY))
    assert r.out and r.cause == BOOT_TIME


def test_the_fastest_rise_looks_back_one_reaction_time_only() -> None:
    ramp = [(t * 60.0, 100.0 * 1.2**t) for t in range(10)]  # 20 % a minute
    assert fastest_rise(ramp, 60.0) == pytest.approx(1.2)
    assert fastest_rise(ramp, 240.0) == pytest.approx(1.2**4)
    assert fastest_rise([(0.0, 0.0), (60.0, 50.0), (120.0, 0.0), (180.0, 100.0)], 60.0) == pytest.approx(2.0)
    assert fastest_rise([], 60.0) == 1.0


def test_conditions_are_kubernetes_style() -> None:
    states = {"b": WITHIN, "a": judge(inp(headroom=1.0))}
    assert conditions(states) == [
        {
            "type": "TargetOutOfReach",
            "workload": "a",
            "status": "True",
            "reason": "CapReached",
            "message": states["a"].detail,
        },
        {"type": "TargetOutOfReach", "workload": "b", "status": "False", "reason": "WithinReach", "message": ""},
    ]


def test_the_watch_logs_once_per_change_of_state(make_policy, caplog) -> None:
    from autoscaler.loop.state.store import Store
    from autoscaler.loop.tick.reach import ReachWatch

    policy = make_policy(scaling={"headroom": "auto"})
    watch, store = ReachWatch(), Store(":memory:")
    caplog.set_level(logging.INFO, logger="autoscaler.loop.tick.reach")
    for h in (0.2, 1.0, 1.0, 1.0, 0.5, 0.5):
        watch.update(policy, store, 0.0, {"a": h}, {"a": 1.0})
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "target out of reach for a (cap reached): headroom at its cap 1: target_attainment 0.999 plans no more than a lower one",
        "target within reach again for a (was: cap reached)",
    ]
