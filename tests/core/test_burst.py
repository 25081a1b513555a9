"""Bursting into free share (scaling.burst, core/surge.py): while a short workload's new capacity
boots, stand-ins carry what they can in the MPS share ready GPUs leave free; none where a neighbour
would break its budget; they leave once the planned server serves."""

from __future__ import annotations

import pytest

from autoscaler.core.fleet.lifecycle import State
from autoscaler.core.rollout.reconcile import Configure, Launch, Limits
from autoscaler.core.rollout.surge import TypeInfo
from tests.core.test_reconcile import done, never_below, rec, run, share, slot
from tests.kit.paperfleet import fleet

pytestmark = pytest.mark.unit

P3 = {"p3": TypeInfo(name="p3", gpu="v100", gpus=1, price_per_hour=3.0)}
GROW = [slot("s0", share("b-0", "b", 0, 40.0)), slot("s1", share("a-0", "a", 0, 50.0), share("a-1", "a", 1, 50.0))]
BEFORE = {"s0": (share("b-0", "b", 0, 40.0),)}


def configured(d) -> dict[str, list[str]]:  # type: ignore[no-untyped-def]
    return {a.slot: sorted(s.name for s in a.servers) for a in d.actions if isinstance(a, Configure)}


def test_a_short_workload_bursts_into_free_share_at_once_and_launches_the_rest() -> None:
    """a jumps to 250 req/s (its servers carry 120 each at 50 %): a-0's stand-in starts in the 60 %
    s0 leaves free, in the same tick as s1's launch; nothing else is launched for it."""
    d = run(GROW, [rec("s0")], dict(BEFORE), ready={"b-0"}, limits=Limits(types=P3), rates={"a": 250.0})
    assert [a.slot for a in d.actions if isinstance(a, Launch)] == ["s1"]
    assert configured(d) == {"s0": ["a-0-s0", "b-0"]}
    [burst] = [s for a in d.actions if isinstance(a, Configure) for s in a.servers if s.name == "a-0-s0"]
    assert burst.mps_percent == 50.0 and burst.predicted_throughput_rps == pytest.approx(120.0)


def test_a_burst_takes_only_the_share_left_and_is_credited_for_it() -> None:
    """With 20 % free, the stand-in runs at 20 %, and the model-free judge credits it 2/5 of a-0 (120 req/s)."""
    layout = [slot("s0", share("b-0", "b", 0, 80.0)), GROW[1]]
    applied = {"s0": (share("b-0", "b", 0, 80.0),)}
    d = run(layout, [rec("s0")], applied, ready={"b-0"}, limits=Limits(types=P3), rates={"a": 250.0})
    [burst] = [s for a in d.actions if isinstance(a, Configure) for s in a.servers if s.name == "a-0-s0"]
    assert burst.mps_percent == pytest.approx(20.0) and burst.predicted_throughput_rps == pytest.approx(48.0)


def test_no_burst_into_a_full_gpu_or_when_switched_off_or_when_covered() -> None:
    full = [slot("s0", share("b-0", "b", 0, 97.0)), GROW[1]]
    d = run(full, [rec("s0")], {"s0": (share("b-0", "b", 0, 97.0),)}, ready={"b-0"}, limits=Limits(types=P3))
    assert not any(s.name.startswith("a-") for v in configured(d).values() for s in v)
    off = Limits(types=P3, burst=False)
    d = run(GROW, [rec("s0")], dict(BEFORE), ready={"b-0"}, limits=off, rates={"a": 250.0})
    assert configured(d) == {}
    d = run(GROW, [rec("s0")], dict(BEFORE), ready={"b-0"}, limits=Limits(types=P3), rates={"a": 0.0, "b": 10.0})
    assert configured(d) == {} or "a-0-s0" not in configured(d).get("s0", [])


def test_the_burst_serves_while_the_instance_boots_and_leaves_once_it_serves() -> None:
    """On paper: a has capacity from the first step (the stand-in), the planned servers take over
    once s1 is ready, the stand-in leaves, and no floor ever breaks."""
    pf = fleet(GROW, dict(BEFORE), limits=Limits(types=P3), rates={"a": 250.0, "b": 10.0})
    pf.run()
    # history[0] is before the first step; the stand-in started at step 1 serves from step 2 on
    assert [h.get("a", 0.0) for h in pf.history[:4]] == [0.0, 0.0, 120.0, 120.0]
    assert pf.records["s1"].state is State.READY and pf.steps > 3  # s1 was not ready before step 3
    assert done(pf) and not any(s.name.endswith("-s0") for v in pf.applied.values() for s in v)
    assert pf.records["s1"].state is State.READY and not any(d.breaches for d in pf.diffs)
    never_below(pf)
