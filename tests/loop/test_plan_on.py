"""scaling.plan_on: interval: an early tick less than interval_s after the last tick that planned
carries the rollout on to the standing layout, without a forecast or a plan (Controller.plans)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from autoscaler.config.errors import InputError
from autoscaler.config.policy import Policy
from autoscaler.core.fleet.lifecycle import State
from autoscaler.loop.tick.controller import Controller
from autoscaler.planner.types import Plan
from tests.kit.control import Clock, make_controller, make_policy, stub_planner

pytestmark = pytest.mark.unit

STANDING = "standing: "


class Counted:
    """stub_planner, counting its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, *args: Any) -> Plan:
        self.calls += 1
        return stub_planner(*args)


def _setup(tmp_path: Path, plan_on: str = "interval", **kw: Any) -> tuple[Controller, Any, Any, Clock, Counted]:
    policy = make_policy(tmp_path, scaling={"interval_s": 60, "forecast": "last", "plan_on": plan_on})
    clock, planner = Clock(), Counted()
    ctl, prov, _, rates = make_controller(policy, clock, planner=planner, **kw)
    return ctl, prov, rates, clock, planner


def test_an_early_tick_keeps_the_standing_layout_and_the_next_interval_plans(tmp_path: Path) -> None:
    ctl, prov, rates, clock, planner = _setup(tmp_path)
    first = ctl.tick()
    assert first.ok and first.decision.startswith("target") and planner.calls == 1
    launches = len([c for c in prov.calls if c[0] == "launch"])
    rates.set(alex=450.0)  # read by the early tick, planned for only at the next interval
    for at in (15, 30, 45):
        clock.advance(15)
        report = ctl.tick()
        assert report.ok and report.decision.startswith(STANDING), (at, report.decision)
        assert report.forecast == first.forecast and report.headroom == first.headroom  # no gauge flaps
        assert report.observed["alex"] == 450.0
    assert planner.calls == 1 and len([c for c in prov.calls if c[0] == "launch"]) == launches
    assert {r.state for r in ctl.store.open_records()} == {State.READY}  # the rollout went on meanwhile
    clock.advance(15)  # interval_s after the tick that planned
    report = ctl.tick()
    assert not report.decision.startswith(STANDING) and planner.calls >= 2
    assert report.forecast["alex"] > first.forecast["alex"]
    assert len([c for c in prov.calls if c[0] == "launch"]) > launches


def test_every_tick_plans_by_default(tmp_path: Path) -> None:
    ctl, _, _, clock, planner = _setup(tmp_path, plan_on="tick")
    ctl.tick()
    clock.advance(15)
    report = ctl.tick()
    assert not report.decision.startswith(STANDING) and planner.calls == 2


def test_a_fast_tick_a_new_process_and_a_clock_gone_back_plan(tmp_path: Path) -> None:
    ctl, _, rates, clock, planner = _setup(tmp_path)
    ctl.tick()
    clock.advance(10)
    rates.set(alex=450.0)
    assert not ctl.tick(fast=True).decision.startswith(STANDING) and planner.calls == 2
    clock.advance(5)  # a fast tick leaves no standing forecast: the next tick plans in full
    assert not ctl.tick().decision.startswith(STANDING) and planner.calls == 3
    clock.advance(5)
    assert ctl.tick().decision.startswith(STANDING) and planner.calls == 3
    clock.t -= 30  # a clock that went back
    assert not ctl.tick().decision.startswith(STANDING)
    again = Controller(ctl.policy, ctl.deps)  # a restart, or a new leader, on the same store
    clock.advance(40)
    assert not again.tick().decision.startswith(STANDING)


def test_a_launch_that_finds_no_capacity_on_an_early_tick_replans(tmp_path: Path) -> None:
    ctl, prov, _, clock, planner = _setup(tmp_path)
    ctl.tick()
    for _ in range(2):
        clock.advance(15)
        ctl.tick()
    victim = next(r for r in ctl.store.open_records() if r.state is State.READY)
    prov.kill(victim.instance_id or "")
    prov.no_capacity.add("p3.2xlarge")
    calls = planner.calls
    clock.advance(15)
    report = ctl.tick()
    assert report.ok and report.rounds >= 2 and planner.calls > calls  # round 2 plans on another type
    assert report.decision.startswith("target") and "p3.2xlarge" in ctl.current_state().unavailable


def test_a_bad_plan_on_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"scaling\.plan_on: Input should be 'tick' or 'interval'"):
        make_policy(tmp_path, scaling={"plan_on": "hourly"})
    assert isinstance(make_policy(tmp_path, scaling={"plan_on": "interval"}), Policy)
