"""A property of reconcile alone (hypothesis, on a fleet on paper): from any fleet to any layout
over the same GPUs (and maybe new instances), however servers shuffle between GPUs (swaps,
cycles, resizes on full GPUs), the fleet reaches the layout and surge instances are gone at the
end, and no workload's capacity falls below the smaller of what it had and what the layout plans
for it at any step, except one that a tick's Breach named (a limit, the surge budget included,
that made it impossible). With a surge budget as large as the fleet there is no breach at all."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.core.layout.layout_types import PlannedServer, SlotSpec
from autoscaler.core.rollout.reconcile import Limits
from autoscaler.core.rollout.surge import TypeInfo, is_surge_slot
from tests.core.test_reconcile import done, never_below
from tests.kit.examples import examples
from tests.kit.paperfleet import PaperFleet, fleet

pytestmark = [pytest.mark.property, pytest.mark.slow]


WORKLOADS = ("a", "b", "c")
P3 = {"p3": TypeInfo(name="p3", gpu="v100", gpus=1, price_per_hour=3.0)}


@st.composite
def gpu(draw: Callable[..., Any], slot: str, names: list[str]) -> tuple[PlannedServer, ...]:
    """Up to three servers of distinct workloads whose shares fit (multiples of 10 %)."""
    ws = draw(st.lists(st.sampled_from(WORKLOADS), unique=True, max_size=3))
    shares = draw(st.lists(st.integers(1, 10), min_size=len(ws), max_size=len(ws)))
    out, used = [], 0
    for w, tenths in zip(ws, shares):
        mps = min(tenths, 10 - used) * 10.0
        if mps <= 0:
            break
        used += int(mps // 10)
        name = f"{w}-{len(names)}"
        names.append(name)
        out.append(
            PlannedServer(
                name=name,
                workload=w,
                model="alexnet",
                gpu_index=0,
                index=len(out),
                batch=4,
                mps_percent=mps,
                rate_rps=mps,
                predicted_latency_ms=5.0,
                predicted_throughput_rps=mps * 10.0,
                model_dir="/m",
                max_queue_delay_ms=5.0,
            )
        )
    return tuple(out)


@st.composite
def moves(draw: Callable[..., Any]) -> tuple[list[SlotSpec], dict[str, tuple[PlannedServer, ...]]]:
    n = draw(st.integers(2, 4))
    names: list[str] = []
    applied = {f"s{i}": draw(gpu(f"s{i}", names)) for i in range(n)}
    extra = draw(st.integers(0, 1))
    layout = [SlotSpec(f"s{i}", "p3", 3.0, ("v100",), draw(gpu(f"s{i}", names))) for i in range(n + extra)]
    return layout, applied


def play(layout: list[SlotSpec], applied: dict[str, tuple[PlannedServer, ...]], limits: Limits) -> PaperFleet:
    pf = fleet(layout, applied, limits=limits)
    pf.run(80)
    return pf


def below_only_where_breached(pf: PaperFleet, limits: set[str]) -> int:
    """Every workload below min(before, planned) at some step was named by a breach at or before
    that step, with a limit in `limits`; returns how many breaches there were."""
    target = pf.layout.capacity()
    named: set[str] = set()
    for cap, d in zip(pf.history[1:], pf.diffs):
        assert {b.limit for b in d.breaches} <= limits
        named |= {w for b in d.breaches for w in b.workloads}
        for w, before in pf.history[0].items():
            if cap.get(w, 0.0) < min(before, target.get(w, 0.0)) - 1e-6:
                assert w in named, (w, cap, pf.history[0], [d.notes for d in pf.diffs])
    return sum(len(d.breaches) for d in pf.diffs)


@settings(max_examples=examples(120), deadline=None)
@given(moves())
def test_any_shuffle_reaches_the_layout_and_only_a_named_limit_takes_capacity_away(case) -> None:  # type: ignore[no-untyped-def]
    layout, applied = case
    pf = play(layout, applied, Limits(types=P3))
    assert done(pf), (pf.applied, pf.diffs[-1].notes)
    assert not any(is_surge_slot(s) for s in pf.records)
    below_only_where_breached(pf, {"max_surge"})


@settings(max_examples=examples(60), deadline=None)
@given(moves())
def test_with_enough_surge_no_shuffle_takes_capacity_away(case) -> None:  # type: ignore[no-untyped-def]
    layout, applied = case
    pf = play(layout, applied, Limits(types=P3, max_surge=len(layout)))
    assert done(pf), (pf.applied, pf.diffs[-1].notes)
    assert not any(d.breaches for d in pf.diffs)
    never_below(pf)
    assert not any(is_surge_slot(s) for s in pf.records)


@settings(max_examples=examples(60), deadline=None)
@given(moves())
def test_with_max_surge_zero_only_a_reported_breach_takes_capacity_away(case) -> None:  # type: ignore[no-untyped-def]
    layout, applied = case
    pf = play(layout, applied, Limits(types=P3, max_surge=0))
    assert done(pf), (pf.applied, pf.diffs[-1].notes)
    assert not any(is_surge_slot(s) for s in pf.records)
    below_only_where_breached(pf, {"max_surge"})
