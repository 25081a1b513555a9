"""planner.api.cost_ceiling: a cost the plan surely does not exceed, told without a fresh plan
(the controller's scale-in wait reads it instead of the target plan)."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.config.offerings import SPOT
from autoscaler.planner import TooManyInstances, make_plan
from autoscaler.planner.api import cost_ceiling
from tests.kit.examples import examples
from tests.planner.conftest import G4, P3, demand_sets, scenario


def _drift(demands, seed: int, spread: float):
    rnd = random.Random(seed)
    return [replace(d, rate_rps=d.rate_rps * (1 + rnd.uniform(-spread, spread))) for d in demands]


@pytest.mark.property
@settings(max_examples=examples(25), deadline=None)
@given(demand_sets(max_size=12, big=False), st.integers(0, 10_000), st.floats(0.0, 0.4))
def test_the_plan_never_costs_more_than_the_ceiling(models, demands, seed, spread):
    options = [P3, G4]
    first = make_plan(demands, options, models)
    drifted = _drift(demands, seed, spread)
    ceiling = cost_ceiling(drifted, options, models, current=first)
    if ceiling is not None:
        assert make_plan(drifted, options, models, current=first).cost_per_hour <= ceiling + 1e-9


@pytest.mark.unit
def test_falling_rates_have_a_ceiling_and_the_plan_within_it():
    """The scale-in case: every rate 15 % lower, the kept placements still carry them."""
    demands, options, models = scenario("random-50.yaml")
    first = make_plan(demands, options, models)
    lower = [replace(d, rate_rps=d.rate_rps * 0.85) for d in demands]
    ceiling = cost_ceiling(lower, options, models, current=first)
    assert ceiling is not None and ceiling <= first.cost_per_hour
    assert make_plan(lower, options, models, current=first).cost_per_hour <= ceiling


@pytest.mark.unit
def test_no_ceiling_where_only_a_fresh_plan_can_say():
    demands, options, models = scenario("random-50.yaml")
    first = make_plan(demands, options, models)
    lower = [replace(d, rate_rps=d.rate_rps * 0.85) for d in demands]
    assert cost_ceiling(lower, options, models) is None  # nothing to keep
    assert cost_ceiling(lower, options, models, current=first, planner="ffd") is None
    spot = [*options, replace(options[0], price_per_hour=options[0].price_per_hour / 3, capacity_type=SPOT)]
    assert cost_ceiling(lower, spot, models, current=first) is None
    higher = [replace(d, rate_rps=d.rate_rps * 3) for d in demands]
    capped = [replace(o, max_instances=len(first.instances)) for o in options]
    assert cost_ceiling(higher, capped, models, current=first) is None  # the kept plan leaves some out


@pytest.mark.unit
def test_the_instance_limit_is_bounded_or_no_ceiling():
    """make_plan refuses a plan over max_instances; a ceiling is only given where the cheapest
    instance says the plan stays within it."""
    demands, _, models = scenario("random-50.yaml")
    options = [P3]
    first = make_plan(demands, options, models)
    lower = [replace(d, rate_rps=d.rate_rps * 0.85) for d in demands]
    plan = make_plan(lower, options, models, current=first)
    kept = cost_ceiling(lower, options, models, current=first)
    assert kept is not None
    count = round(kept / P3.price_per_hour)
    assert cost_ceiling(lower, options, models, current=first, max_instances=count) == kept
    assert cost_ceiling(lower, options, models, current=first, max_instances=count - 1) is None
    assert len(plan.instances) <= count
    with pytest.raises(TooManyInstances):
        cost_ceiling(lower, options, models, current=first, max_instances=1)
