"""Algorithm 2 (share raising) and the task decomposition, checked against the model itself."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from autoscaler.planner import Demand
from autoscaler.planner.shares import predict, settle, solo_shares, spend_idle, violated
from autoscaler.planner.tasks import decompose, max_batch, min_share, size_on
from tests.kit.examples import examples
from tests.planner.conftest import MODELS, demand_sets


@pytest.mark.property
@settings(max_examples=examples(60), deadline=None)
@given(demand_sets(min_size=2, max_size=5, big=False))
def test_jumping_reaches_the_same_shares_as_unit_steps(v100, demands):
    tasks, _ = decompose(demands, {"v100": v100}, {"v100": 3.06}, search=False)
    sizes = [t.sizes["v100"] for t in tasks]
    assume(len(sizes) >= 2)
    fast = settle(v100, sizes, solo_shares(sizes))
    slow = settle(v100, sizes, solo_shares(sizes), step=v100.unit)
    assert (fast is None) == (slow is None)
    if fast is not None:
        assert fast[0] == slow[0]


@pytest.mark.property
@settings(max_examples=examples(60), deadline=None)
@given(demand_sets(min_size=2, max_size=5, big=False))
def test_settled_shares_are_feasible_and_least(v100, demands):
    tasks, _ = decompose(demands, {"v100": v100}, {"v100": 3.06})
    sizes = [t.sizes["v100"] for t in tasks]
    res = settle(v100, sizes, solo_shares(sizes))
    assume(res is not None)
    shares, preds = res
    assert preds == v100.predict_raw([(s.model, s.batch, r) for s, r in zip(sizes, shares)])
    assert not any(violated(s, p) for s, p in zip(sizes, preds))
    for i, s in enumerate(sizes):  # one unit less anywhere above the bound breaks that placement
        if shares[i] > s.lower:
            lower = list(shares)
            lower[i] -= v100.unit
            assert violated(s, predict(v100, sizes, lower)[i])


@pytest.mark.property
@settings(max_examples=examples(80), deadline=None)
@given(st.sampled_from(MODELS), st.integers(5, 80), st.integers(10, 3000), st.integers(1, 40))
def test_min_share_matches_the_models_lower_bound(v100, model, slo, rate, batch):
    assert min_share(v100, model, batch, slo / 2.0, rate) == v100.lower_bound(model, batch, slo, rate)


@pytest.mark.property
@settings(max_examples=examples(60), deadline=None)
@given(st.sampled_from(MODELS), st.integers(10, 80), st.integers(10, 1500))
def test_batch_search_is_never_worse_than_the_rule_and_stays_below_it(v100, model, slo, rate):
    d = Demand("w", model, slo, rate)
    rule, best = size_on(v100, "v100", d, rate, search=False), size_on(v100, "v100", d, rate)
    assert (rule is None) == (best is None)
    if rule is not None:
        assert best.lower <= rule.lower and best.batch <= rule.batch
        assert rule.batch == min(v100.batch_size(model, slo, rate), max_batch(v100, model, slo / 2))


@pytest.mark.unit
def test_replicas_add_up_to_the_rate_and_full_ones_use_the_whole_gpu(v100):
    d = Demand("big", "vgg19", 60, 2500)
    tasks, unplaced = decompose([d], {"v100": v100}, {"v100": 3.06})
    assert not unplaced and len(tasks) >= 3
    assert sum(t.rate for t in tasks) == pytest.approx(2500, rel=1e-12)
    full = [t for t in tasks if t.full]
    top = max_batch(v100, "vgg19", 30.0)
    assert full and all(t.lower == 100.0 and t.sizes["v100"].batch == top for t in full)
    assert v100.solo("vgg19", top + 1, 100.0)[0] > 30.0


@pytest.mark.unit
def test_unplaceable_demands_say_why(v100):
    slow = Demand("x", "resnet50", 0.5, 10)
    unknown = Demand("y", "bert", 50, 10)
    _, unplaced = decompose([slow, unknown], {"v100": v100}, {"v100": 3.06})
    reasons = {u.workload: u.reason for u in unplaced}
    assert "SLO 0.5 ms is below the fastest possible latency" in reasons["x"]
    assert "no profile" in reasons["y"]


@pytest.mark.property
@settings(max_examples=examples(60), deadline=None)
@given(demand_sets(min_size=1, max_size=4, big=False), st.lists(st.booleans(), min_size=4, max_size=4))
def test_spending_idle_share_keeps_every_budget_and_never_lowers_a_share(v100, demands, grow):
    tasks, _ = decompose(demands, {"v100": v100}, {"v100": 3.06})
    sizes = [t.sizes["v100"] for t in tasks]
    res = settle(v100, sizes, solo_shares(sizes))
    assume(res is not None)
    shares, _ = res
    grow = [grow[i % len(grow)] for i in range(len(sizes))]
    out = spend_idle(v100, sizes, shares, grow)
    assume(out is not None)
    new, preds = out
    assert preds == predict(v100, sizes, new)
    assert not any(violated(s, p) for s, p in zip(sizes, preds))
    assert sum(shares) < sum(new) <= sum(shares) + (100.0 - sum(shares)) / 2 + 1e-9
    for old, now, g in zip(shares, new, grow):
        assert now == old if not g else now >= old
        assert now / v100.unit == pytest.approx(round(now / v100.unit))  # whole MPS units


@pytest.mark.unit
def test_a_lone_placement_gets_half_the_idle_share_and_more_throughput(v100):
    (task,), _ = decompose([Demand("r", "resnet50", 40, 400)], {"v100": v100}, {"v100": 3.06})
    size = task.sizes["v100"]
    (lean,), (before,) = [size.lower], predict(v100, [size], [size.lower])
    (share,), (after,) = spend_idle(v100, [size], [lean], [True])
    assert share == lean + (100.0 - lean) // 2 // v100.unit * v100.unit  # the rest stays free for others
    assert after[1] > before[1] and after[0] < before[0]  # more throughput, lower latency


@pytest.mark.unit
def test_nothing_to_spend_on_a_full_gpu_or_when_only_kept_placements_run_there(v100):
    (task,), _ = decompose([Demand("r", "resnet50", 40, 400)], {"v100": v100}, {"v100": 3.06})
    size = task.sizes["v100"]
    assert spend_idle(v100, [size], [100.0], [True]) is None
    assert spend_idle(v100, [size], [size.lower], [False]) is None


@pytest.mark.unit
def test_remembered_predictions_are_each_models_own_and_the_callers_to_change(models) -> None:
    """predict remembers per model and exact mix: two GPU types asked the same mix answer apart,
    each as its model predicts it, and a caller changing the list it got changes no later answer."""
    d = [Demand("a", "alexnet", 20.0, 300.0), Demand("b", "resnet50", 40.0, 200.0)]
    tasks, _ = decompose(d, models, {"v100": 3.06, "t4-synthetic": 0.526})
    sizes = [t.sizes["v100"] for t in tasks]
    shares = [40.0, 50.0]
    items = [(s.model, s.batch, r) for s, r in zip(sizes, shares)]
    for gpu in ("v100", "t4-synthetic"):
        first = predict(models[gpu], sizes, shares)
        assert first == models[gpu].predict_raw(items)
        first.clear()
        assert predict(models[gpu], sizes, shares) == models[gpu].predict_raw(items)
    assert predict(models["v100"], sizes, shares) != predict(models["t4-synthetic"], sizes, shares)
