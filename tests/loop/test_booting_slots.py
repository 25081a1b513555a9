"""The controller tells layout which slots still boot and what is short (loop/tick/inputs.py), so the
instance that comes up first serves the workload whose rate jumped, not the one it was launched
for (core/layout/slots.py). Fakes and the stand-in planner (one instance per 100 req/s planned),
180 s boots, the planned rate twice the observed one (headroom 1.0)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from autoscaler.core.fleet.lifecycle import Record, State
from autoscaler.loop.tick.controller import Controller
from autoscaler.loop.tick.inputs import booting
from tests.kit.control import Clock, make_controller, make_policy

pytestmark = pytest.mark.unit

SCALING = {"interval_s": 60, "scale_down_delay_s": 600, "headroom": 1.0, "forecast": "last"}


def workloads(ctl: Controller) -> dict[str, set[str]]:
    layout = ctl.store.current_layout()
    assert layout is not None
    return {s.slot: {v.workload for v in s.servers} for s in layout.slots}


def test_the_instance_up_first_serves_the_workload_that_jumped(tmp_path: Path) -> None:
    policy = make_policy(tmp_path, scaling=SCALING)
    clock = Clock()
    ctl, prov, _, rates = make_controller(policy, clock, rates={"alex": 50.0, "res": 50.0})
    for _ in range(3):  # one instance each, up at once
        assert ctl.tick().ok
        clock.advance(60)
    prov.boot_s = 180.0
    rates.set(alex=100.0)  # alex is planned at 200 req/s: one more instance for it, booting from here
    assert ctl.tick().ok
    launched = {s for s, w in workloads(ctl).items() if w == {"alex"}} - {"test-p3.2xlarge-0"}
    assert launched == {"test-p3.2xlarge-2"}
    clock.advance(60)
    rates.set(res=150.0)  # res jumps: 150 req/s on 100 ready; alex (100 on 100 ready) is not short
    assert ctl.tick().ok
    assert workloads(ctl)["test-p3.2xlarge-2"] == {"res"}  # the booting instance goes to res
    clock.advance(120)  # -2 is up and told to run res; the instances launched a minute after it still boot
    assert ctl.tick().ok
    states = {r.slot: r.state for r in ctl.store.open_records()}
    assert states["test-p3.2xlarge-2"] is State.READY
    assert sum(s is State.PENDING for s in states.values()) == 2
    assert {v.workload for v in ctl.store.applied()[("test-p3.2xlarge-2", 0)][1]} == {"res"}


def test_booting_slots_are_listed_the_soonest_ready_first(tmp_path: Path) -> None:
    """An instance up whose agent has not answered first, then by launch plus boot: a started
    pool member (`warm`) boots in warm_boot_s (45 s) against boot_s (180 s). A slot whose
    instance is ready, or whose older attempt still serves, boots no more; nor does a surge slot."""
    policy = make_policy(tmp_path, scaling=SCALING)

    def rec(slot: str, at: float, state: State = State.PENDING, attempt: int = 0) -> Record:
        return Record(slot=slot, attempt=attempt, instance_type="p3.2xlarge", state=state, created_at=at, updated_at=at)

    fleet = [rec("f-0", 0.0), rec("f-1", 100.0), rec("f-2", 60.0), rec("f-3", 0.0, State.READY)]
    assert booting(policy, fleet, frozenset()) == ("f-0", "f-2", "f-1")
    assert booting(policy, fleet, frozenset({("f-1", 0)})) == ("f-1", "f-0", "f-2")  # up at 145
    fleet[2] = replace(fleet[2], state=State.RUNNING)
    assert booting(policy, fleet, frozenset({("f-1", 0)})) == ("f-2", "f-1", "f-0")
    fleet += [rec("f-3", 200.0, attempt=1), rec("f-p3-surge0", 0.0), rec("f-4", 0.0, State.TERMINATING)]
    assert booting(policy, fleet, frozenset()) == ("f-2", "f-0", "f-1")
