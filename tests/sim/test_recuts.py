"""The simulator's MIG re-cut count (sim/recuts.py): one per GPU and per cut asked for, never for a
new GPU, a retired one or a stand-in; the rows and surge of the change a re-cut belongs to."""

from __future__ import annotations

import pytest

from autoscaler.core.layout.layout_types import Layout, PlannedServer, SlotSpec
from autoscaler.fleet.sim import Lifetime
from autoscaler.sim.recuts import Recuts, planned_cuts, running_cuts

pytestmark = pytest.mark.unit


def sl(name: str, profile: str, start: int, gpu: int = 0) -> PlannedServer:
    return PlannedServer(
        name=name,
        workload=name[0],
        model="m",
        gpu_index=gpu,
        index=0,
        batch=8,
        mps_percent=40.0,
        mig_profile=profile,
        mig_start=start,
    )


def layout(**slots: tuple[PlannedServer, ...]) -> Layout:
    return Layout("x", tuple(SlotSpec(k, "a100", 5.0, ("a100-80gb", "a100-80gb"), v) for k, v in slots.items()))


A, B = sl("a-0", "3g.40gb", 0), sl("b-0", "3g.40gb", 4)
A4 = sl("a-1", "4g.40gb", 0)


def test_cuts_leave_out_stand_ins_and_servers_without_a_slice() -> None:
    plain = PlannedServer(name="c-0", workload="c", model="m", gpu_index=1, index=1, batch=1, mps_percent=50.0)
    cuts = running_cuts([("s0", (A, B, sl("a-0-s0", "3g.40gb", 4, gpu=1), plain))])
    assert cuts == {("s0", 0): frozenset({("3g.40gb", 0), ("3g.40gb", 4)})}
    assert planned_cuts(layout(s0=(A,)))[("s0", 1)] == frozenset()


def test_a_re_cut_counts_once_per_gpu_and_cut_however_long_it_takes() -> None:
    r = Recuts(10)
    running = running_cuts([("s0", (A, B))])
    new = layout(s0=(A4, B))
    for k in range(3):  # the same re-cut under way for three ticks
        r.begin(running)
        r.end(new, change=True)
        r.record(k, k + 1)
    assert r.count == 1 and r.rows[:3].all()
    r.begin(running_cuts([("s0", (A4, B))]))
    r.end(new, change=False)  # at rest: the change is over
    r.record(3, 4)
    assert not r.rows[3]
    r.begin(running_cuts([("s0", (A4, B))]))
    r.end(layout(s0=(A, B)), change=True)  # back again: a second re-cut
    assert r.count == 2


def test_new_gpus_retired_slots_and_unchanged_cuts_are_no_re_cut() -> None:
    r = Recuts(4)
    r.begin(running_cuts([("s0", (A, B)), ("s1", (A,))]))
    r.end(layout(s0=(A, B, sl("c-0", "3g.40gb", 0, gpu=1)), s2=(A4,)), change=True)  # s1 retired, s2 new
    assert r.count == 0 and not r.under_way


def test_surge_alive_while_a_re_cut_is_under_way_is_billed_to_it() -> None:
    r = Recuts(4)
    r.begin(running_cuts([("s0", (A, B))]))
    r.end(layout(s0=(A4, B)), change=True)
    surge = Lifetime("a100", 5.0, start=1800.0, end=5400.0, slot="f-a100-surge0")
    other = Lifetime("a100", 5.0, start=0.0, slot="s0")
    r.bill(0.0, 3600.0, [surge, other], frozenset())
    assert r.surge_hours == pytest.approx(0.5) and r.surge_cost_usd == pytest.approx(2.5)
    assert r.surge_slots == {"f-a100-surge0"}
    r.end(None, change=False)
    r.bill(3600.0, 7200.0, [surge], frozenset())
    assert r.surge_hours == pytest.approx(0.5)  # the re-cut is over: nothing more billed to it
