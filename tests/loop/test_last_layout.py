"""The controller's last layout kept (loop/tick/last_layout.py): given again only for the same plan
and inputs; any one input changed, the layout is made afresh, as layout_from_plan makes it."""

from __future__ import annotations

from dataclasses import fields, replace

import pytest

from autoscaler.core.layout.layout import layout_from_plan
from autoscaler.core.layout.layout_types import LayoutInput, PlannedServer, WorkloadInfo
from autoscaler.loop.tick.last_layout import COMPARE, LastLayout
from autoscaler.planner.types import GpuOut, InstanceOut, PlacementOut, Plan

pytestmark = pytest.mark.unit

INFO = {"a": WorkloadInfo("/models/a", 7.5), "b": WorkloadInfo("/models/b", 20.0)}
RUNNING = PlannedServer(name="a-0", workload="a", model="alexnet", gpu_index=0, index=0, batch=4, mps_percent=30.0)


def _plan(mps: float = 30.0) -> Plan:
    gpu = GpuOut(0, "v100", (PlacementOut("a", "alexnet", 4, mps, 100.0, 5.0, 120.0),))
    return Plan("x", (InstanceOut("p3", 3.0, (gpu,)),))


def _input(previous=None) -> LayoutInput:  # type: ignore[no-untyped-def]
    return LayoutInput(
        fleet="f",
        previous=previous,
        extra_slots={},
        taken_slots=frozenset({"f-p3-0"}),
        reserved_servers={"f-p3-0": frozenset({("a-0", 0)})},
        workloads=INFO,
        rates={"a": 200.0, "b": 100.0},
        running={"f-p3-0": (RUNNING,)},
        judge=None,
    )


def judge(*_: object) -> bool:
    return True


# Each input of layout_from_plan changed alone, in a way the layout shows (or may show).
CHANGES = {
    "fleet": {"fleet": "g"},
    "taken slots": {"taken_slots": frozenset({"f-p3-0", "f-p3-1"})},
    "a slot number used": {"slot_tops": {"f-p3-": 4}},
    "reserved servers": {"reserved_servers": {"f-p3-0": frozenset({("a-0", 0), ("a-1", 1)})}},
    "extra slots": {"extra_slots": {"f-p3-5": "p3"}},
    "a rate": {"rates": {"a": 201.0, "b": 100.0}},
    "a rate's type": {"rates": {"a": 200, "b": 100.0}},
    "the rates' order": {"rates": {"b": 100.0, "a": 200.0}},
    "a workload's facts": {"workloads": {**INFO, "a": WorkloadInfo("/models/a2", 7.5)}},
    "what an agent runs": {"running": {"f-p3-0": (replace(RUNNING, batch=8),)}},
    "the judge": {"judge": judge},
    "a slot booting": {"booting": ("f-p3-1",)},
    "what is short": {"short": {"a": 50.0}},
}


def test_every_input_of_the_layout_is_compared_and_changed_here() -> None:
    """A field LayoutInput gains must be named in COMPARE (else same_input raises) and changed
    alone in CHANGES (else a cache that ignored it would pass every test here)."""
    names = {f.name for f in fields(LayoutInput)}
    assert set(COMPARE) == names
    changed = {k for change in CHANGES.values() for k in change}
    assert changed == names - {"previous"}  # the previous layout: test_another_plan_or_previous_layout...


@pytest.mark.parametrize("change", list(CHANGES))
def test_one_input_changed_makes_the_layout_afresh(change: str) -> None:
    plan, before = _plan(), _input()
    first = layout_from_plan(plan, before)
    layouts = LastLayout()
    kept = layouts(plan, before)
    assert layouts(plan, _input()) is kept and kept == first  # equal inputs, built again: kept
    after = replace(before, **CHANGES[change])  # type: ignore[arg-type]
    again = layouts(plan, after)
    assert again is not kept and again == layout_from_plan(plan, after)
    assert repr(again) == repr(layout_from_plan(plan, after))


def test_another_plan_or_previous_layout_makes_it_afresh() -> None:
    layouts, plan = LastLayout(), _plan()
    kept = layouts(plan, _input())
    other = layouts(_plan(mps=40.0), _input())
    assert other is not kept and other.slots[0].servers[0].mps_percent == 40.0
    assert layouts(_plan(), _input()) is not other  # an equal plan that is another object: made again
    again = layouts(plan, _input(previous=kept))
    assert again == layout_from_plan(plan, _input(previous=kept))


def test_the_same_policy_gives_the_same_workload_facts_so_a_held_layout_is_kept() -> None:
    """loop/tick/inputs.py workload_info: one mapping per policy object and root, so two ticks'
    layout inputs compare equal by identity; another policy or root gets its own facts."""
    from autoscaler.config.policy import load_policy
    from autoscaler.loop.tick.inputs import workload_info
    from tests.conftest import ROOT

    policy = load_policy(ROOT / "policies" / "example.yaml")
    first = workload_info(policy, "/m")
    assert workload_info(policy, "/m") is first
    assert set(first) == {w.name for w in policy.workloads}
    other_root = workload_info(policy, "/n")
    assert other_root is not first and all(i.model_dir.startswith("/n/") for i in other_root.values())
    again = load_policy(ROOT / "policies" / "example.yaml")
    fresh = workload_info(again, "/m")
    assert fresh is not first and fresh == first
    plan, inp = _plan(), _input()
    layouts = LastLayout()
    made = layouts(plan, replace(inp, workloads=workload_info(again, "/m")))
    assert layouts(plan, replace(inp, workloads=workload_info(again, "/m"))) is made
