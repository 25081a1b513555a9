"""The independent re-check catches each way a plan can be wrong; instance packing is optimal."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.planner import Demand, GpuOut, InstanceOption, InstanceOut, PlacementOut, Plan, check_plan
from autoscaler.planner.packing import cover
from tests.kit.examples import examples
from tests.planner.conftest import P3, P3X4

D = [Demand("a", "alexnet", 15, 500), Demand("r", "resnet50", 40, 400), Demand("v", "vgg19", 60, 200)]


def _plan(*gpus: tuple[PlacementOut, ...], itype: str = "p3.2xlarge") -> Plan:
    return Plan("t", tuple(InstanceOut(itype, 3.06, (GpuOut(0, "v100", g),)) for g in gpus))


def _place(v100, w: str, model: str, batch: int, share: float, rate: float) -> PlacementOut:
    lat, thr = v100.solo(model, batch, share)
    return PlacementOut(w, model, batch, share, rate, lat, thr)


@pytest.mark.unit
def test_a_sound_plan_passes(v100, models):
    plan = _plan((_place(v100, "a", "alexnet", 4, 20, 500),), (_place(v100, "r", "resnet50", 8, 30, 400),))
    assert check_plan(plan, D[:2], models, [P3]) == []


@pytest.mark.unit
def test_latency_over_budget_is_caught(v100, models):
    plan = _plan((_place(v100, "a", "alexnet", 4, 5, 500),), (_place(v100, "r", "resnet50", 8, 30, 400),))
    assert any("latency" in p for p in check_plan(plan, D[:2], models))


@pytest.mark.unit
def test_interference_is_re_predicted_not_trusted(v100, models):
    r, v = _place(v100, "r", "resnet50", 8, 27.5, 400), _place(v100, "v", "vgg19", 6, 35, 200)
    apart = _plan((r,), (v,))
    together = _plan((r, v))  # each placement still claims its solo latency
    assert check_plan(apart, D[1:], models) == []
    assert any("vgg19" in p or "v:" in p for p in check_plan(together, D[1:], models))


@pytest.mark.unit
def test_over_100_percent_rates_and_instances_are_caught(v100, models):
    a, r = _place(v100, "a", "alexnet", 4, 60, 500), _place(v100, "r", "resnet50", 8, 50, 400)
    assert any("> 100 %" in p for p in check_plan(_plan((a, r)), D[:2], models))
    half = replace(r, rate_rps=200.0)
    assert any("carry" in p for p in check_plan(_plan((a,), (half,)), D[:2], models))
    five = Plan("t", (InstanceOut("p3.2xlarge", 3.06, tuple(GpuOut(i, "v100", ()) for i in range(2))),))
    assert any("GPUs listed" in p for p in check_plan(five, [], models, [P3]))
    capped = replace(P3, max_instances=1)
    assert any(
        "max_instances" in p
        for p in check_plan(_plan((a,), (_place(v100, "r", "resnet50", 8, 30, 400),)), D[:2], models, [capped])
    )


def _brute(n: int, opts: list[InstanceOption], limits: list[int | None]) -> float:
    ranges = [range(0, (lim if lim is not None else math.ceil(n / o.gpus)) + 1) for o, lim in zip(opts, limits)]
    return min(
        (
            sum(o.price_per_hour * c for o, c in zip(opts, cs))
            for cs in itertools.product(*ranges)
            if sum(o.gpus * c for o, c in zip(opts, cs)) >= n
        ),
        default=math.inf,
    )


@pytest.mark.property
@settings(max_examples=examples(40), deadline=None)
@given(
    st.integers(1, 14),
    st.lists(
        st.tuples(st.integers(1, 8), st.floats(0.5, 20), st.one_of(st.none(), st.integers(0, 4))),
        min_size=1,
        max_size=3,
    ),
)
def test_cover_is_the_cheapest_instance_mix(n, spec):
    opts = [InstanceOption(f"t{i}", "g", gpus, round(price, 3)) for i, (gpus, price, _) in enumerate(spec)]
    limits = [lim for _, _, lim in spec]
    best = _brute(n, opts, limits)
    if math.isinf(best):
        with pytest.raises(ValueError):
            cover(n, opts, limits)
        return
    mix = cover(n, opts, limits)
    assert sum(o.gpus * c for o, c in mix) >= n
    assert sum(o.price_per_hour * c for o, c in mix) == pytest.approx(best, abs=1e-6)


@pytest.mark.unit
def test_cover_prefers_fewer_instances_on_a_price_tie():
    assert cover(4, [P3, P3X4], [None, None]) == [(P3X4, 1)]
