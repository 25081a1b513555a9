"""The planner's per-plan work remembered across plans (issue 50), held to the uncached answers:
the lower bound's best whole-GPU rate (limits.gpu_rps) and a kept placement's size
(tasks.make_size). Each test varies every argument the memo is keyed on, one at a time, so a key
that left one out hands back another argument's answer and fails."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.model.perfmodel import PerfModel
from autoscaler.planner import Demand, api
from autoscaler.planner import tasks as tk
from autoscaler.planner.igniter import Config, final_check
from autoscaler.planner.limits import gpu_rps, gpus_needed
from autoscaler.planner.shares import mix_of
from autoscaler.planner.state import GpuPool
from autoscaler.planner.tasks import Task, _make_size, decompose, forget_oldest, make_size, max_batch
from tests.kit import benchmod
from tests.kit.examples import examples
from tests.planner.conftest import P3, P3X4

NAMES = st.sampled_from(["alexnet", "resnet50", "vgg19", "ssd", "no-such-model"])


def plain_gpus_needed(demand: Demand, models: dict[str, PerfModel]) -> float:
    """gpus_needed as written before the memo (fitted models only)."""
    if demand.rate_rps <= 0:
        return 0.0
    best = 0.0
    for model in models.values():
        if demand.model not in model.coef:
            continue
        top = max_batch(model, demand.model, demand.slo_ms / 2.0 / demand.correction)
        if top:
            best = max(best, model.solo(demand.model, top, 100.0)[1] / demand.correction)
    return demand.rate_rps / best if best > 0 else 0.0


@pytest.mark.property
@settings(max_examples=examples(60), deadline=None)
@given(NAMES, NAMES, st.floats(2.0, 300.0), st.floats(1.0, 1.5), st.floats(0.0, 5000.0))
def test_gpus_needed_is_the_uncached_bound(models, name, other, slo, corr, rate) -> None:
    """The same float as the bound computed afresh, for demands that differ from each other in
    the model, the SLO, the correction or the GPU type only (asked one after the other)."""
    d = Demand("w", name, slo, rate, corr)
    for dd in (d, replace(d, model=other), replace(d, slo_ms=slo * 1.7), replace(d, correction=1.0)):
        for ms in (models, {"v100": models["v100"]}, {"t4-synthetic": models["t4-synthetic"]}):
            assert gpus_needed(dd, ms) == plain_gpus_needed(dd, ms)


@pytest.mark.unit
def test_gpu_rps_tells_models_slos_and_corrections_apart(models) -> None:
    """Every argument changes the answer somewhere (else the test above could not see a key
    without it), and the remembered answer is the computed one."""
    v100, t4 = models["v100"], models["t4-synthetic"]
    base = gpu_rps(v100, "resnet50", 40.0, 1.0)
    assert base > 0
    assert gpu_rps(t4, "resnet50", 40.0, 1.0) != base
    assert gpu_rps(v100, "alexnet", 40.0, 1.0) != base
    assert gpu_rps(v100, "resnet50", 80.0, 1.0) != base
    assert gpu_rps(v100, "resnet50", 40.0, 1.25) != base
    assert gpu_rps(v100, "no-such-model", 40.0, 1.0) == 0.0
    assert gpu_rps(v100, "resnet50", 40.0, 1.0) == gpu_rps.__wrapped__(v100, "resnet50", 40.0, 1.0)


@pytest.mark.property
@settings(max_examples=examples(60), deadline=None)
@given(
    st.sampled_from(["alexnet", "resnet50", "vgg19", "ssd"]),
    st.floats(15.0, 200.0),
    st.floats(1.0, 1.3),
    st.integers(1, 64),
    st.sampled_from([5.0, 12.5, 40.0, 100.0]),
    st.floats(0.5, 900.0),
)
def test_make_size_is_the_uncached_size(models, name, slo, corr, batch, lower, rate) -> None:
    """make_size remembers per every argument: each one varied alone gives the uncached Size."""
    v100 = models["v100"]
    d = Demand("w", name, slo, 1.0, corr)
    cases = [
        (d, batch, lower, rate),
        (replace(d, model="alexnet" if name != "alexnet" else "vgg19"), batch, lower, rate),
        (replace(d, slo_ms=slo + 3.0), batch, lower, rate),
        (replace(d, correction=corr + 0.2), batch, lower, rate),
        (d, batch + 1, lower, rate),
        (d, batch, lower + 2.5, rate),
        (d, batch, lower, rate * 1.5),
    ]
    for gpu in ("v100", "v100@spot"):
        for dd, b, low, r in cases:
            want = _make_size(v100, gpu, dd.model, dd.slo_ms, dd.correction, b, low, r)
            assert make_size(v100, gpu, dd, b, low, r) == want


@pytest.mark.unit
def test_make_size_keeps_the_type_of_what_it_was_given(models) -> None:
    """1 and 1.0 are equal keys to an untyped cache: the Size of a lower bound given as an int
    must not come back for one given as a float (its repr, and what is serialised, differ)."""
    v100 = models["v100"]
    d = Demand("w", "resnet50", 40.0, 1.0)
    as_int = make_size(v100, "v100", d, 4, 100, 30.0)
    as_float = make_size(v100, "v100", d, 4, 100.0, 30.0)
    assert type(as_int.lower) is int and type(as_float.lower) is float
    assert make_size(v100, "v100", d, 4, 100.0, 30.0) is as_float  # remembered


@pytest.mark.unit
def test_forget_oldest_keeps_the_newest_in_order() -> None:
    """Only the first-put entries go, the rest keep their order (the next eviction takes the
    next oldest), and a key already gone is no error."""
    kept = {k: k * 10 for k in range(8)}
    forget_oldest(kept, 3)
    assert list(kept.items()) == [(k, k * 10) for k in range(3, 8)]
    forget_oldest(kept, 10)
    assert kept == {}


@pytest.mark.unit
def test_predictions_past_the_limit_are_the_models(models, monkeypatch) -> None:
    """With room for 4 mixes, predicting 12 (and the first ones again, after they were forgotten)
    gives the model's own predictions each time, and never more than 4 are kept."""
    from autoscaler.planner import shares as sh

    v100 = models["v100"]
    monkeypatch.setattr(sh, "PREDICTIONS_KEPT", 4)
    monkeypatch.setattr(sh, "_predictions", {})
    mixes = [((("alexnet", b), ("resnet50", 4)), (30.0 + k, 40.0)) for b in (1, 2, 4) for k in range(4)]
    for mix, shares in [*mixes, *mixes[:3]]:
        want = tuple(v100.predict_raw([(m, b, r) for (m, b), r in zip(mix, shares)]))
        assert sh.predicted(v100, mix, shares) == want
        assert len(sh._predictions) <= 4


@pytest.mark.property
@settings(max_examples=examples(25), deadline=None)
@given(st.integers(0, 10_000))
def test_every_open_gpu_keeps_its_mix_in_step(models, seed) -> None:
    """final_check predicts a GPU from Gpu.mix instead of its sizes: GpuPool.set keeps the two
    in step through a whole plan (placing, repairing, the kept placements of a current plan)."""
    rng = random.Random(seed)
    v100 = {"v100": models["v100"]}
    demands = [
        Demand(f"w{i}", rng.choice(["alexnet", "resnet50", "vgg19", "ssd"]), rng.uniform(30, 200), rng.uniform(5, 900))
        for i in range(rng.randint(1, 12))
    ]
    seen: list[GpuPool] = []

    def checked(fleet: GpuPool) -> tuple[int, list[Task]]:
        for g in fleet.open_gpus():
            assert g.mix == mix_of(g.sizes)
        seen.append(fleet)
        return final_check(fleet)

    saved, api.final_check = api.final_check, checked  # hypothesis: no function-scoped monkeypatch
    try:
        first = api._igniter(demands, [P3, P3X4], v100, None, Config(), "igniter")
        again = [replace(d, rate_rps=d.rate_rps * rng.uniform(0.7, 1.3)) for d in demands]
        api._igniter(again, [P3, P3X4], v100, first, Config(), "igniter")
    finally:
        api.final_check = saved
    assert len(seen) == 2


def task_fields(tasks: list[Task]) -> list[tuple[object, ...]]:
    """Everything of a task, with each number's type (an int rate is not a float's)."""
    return [(t.tid, t.demand, t.rate, type(t.rate), t.sizes, t.pref, t.full, t.carries, type(t.carries)) for t in tasks]


@pytest.mark.property
@settings(max_examples=examples(40), deadline=None)
@given(
    st.sampled_from(["alexnet", "resnet50", "vgg19", "ssd"]),
    st.floats(8.0, 200.0),
    st.floats(1.0, 1.3),
    st.floats(1.0, 3000.0),
    st.booleans(),
)
def test_decompose_remembers_on_everything_it_reads(models, name, slo, corr, rate, search) -> None:
    """decompose's remembered answers are the uncached ones for demands that differ from each
    other in one field at a time (rate, its type, model, SLO, correction, GPU types, redundancy),
    and for other models, prices, allowed types and batch search: a key without any of them
    hands back another demand's tasks and fails here."""
    d = Demand("w", name, slo, rate, corr)
    variants = [
        d,
        replace(d, rate_rps=rate * 1.3),
        replace(d, rate_rps=float(int(rate) + 1)),
        replace(d, rate_rps=int(rate) + 1),
        replace(d, model="ssd" if name != "ssd" else "vgg19"),
        replace(d, slo_ms=slo * 1.5),
        replace(d, correction=corr + 0.1),
        replace(d, gpus=frozenset({"t4-synthetic"})),
        replace(d, min_servers=2),
        replace(d, workload="other"),
    ]
    prices = {"v100": 3.06, "t4-synthetic": 0.526}
    contexts = [
        (models, prices, None, search),
        (models, {**prices, "v100": 1.0}, None, search),
        (models, prices, ["v100"], search),
        (models, prices, None, not search),
        ({"v100": models["t4-synthetic"], "t4-synthetic": models["v100"]}, prices, None, search),
    ]
    for _ in range(2):  # the second round's answers are all remembered ones
        for ms, ps, gpus, srch in contexts:
            for dd in variants:
                got = decompose([dd, dd], ms, ps, gpus, srch)  # one memo for every context and variant
                want = uncached_decompose([dd, dd], ms, ps, gpus, srch)
                assert task_fields(got[0]) == task_fields(want[0]) and got[1] == want[1]


def uncached_decompose(*args: object) -> tuple[list[Task], list[object]]:
    saved, tk._decomposed = tk._decomposed, {}
    try:
        return decompose(*args)  # type: ignore[arg-type]
    finally:
        tk._decomposed = saved


@pytest.mark.unit
def test_decomposed_tasks_are_new_each_time(models) -> None:
    """Remembered tasks come back as new Task objects with their own sizes dict, numbered from
    where the list stands: changing one (as the planner's repair may) changes no later answer."""
    d = Demand("w", "resnet50", 40.0, 2500.0)
    first, _ = decompose([d], models, {"v100": 3.06, "t4-synthetic": 0.526})
    first[0].sizes.clear()
    again, _ = decompose([Demand("x", "alexnet", 40.0, 10.0), d], models, {"v100": 3.06, "t4-synthetic": 0.526})
    assert again[1].sizes and again[1].tid == 1 and again[1] is not first[0]


@pytest.mark.unit
def test_forget_memos_leaves_every_memo_empty_and_the_plan_the_same(models) -> None:
    """benchmarks/plan_scale.py times cold plans through api.forget_memos: after it, every memo a
    plan fills is empty again (a memo it left would make the next run answer from it), and the
    cold plan is the plan it made warm."""
    from autoscaler.planner import limits, shares

    rng = random.Random(3)
    demands = [
        Demand(f"w{i}", rng.choice(["alexnet", "resnet50", "vgg19"]), 60.0, rng.uniform(50, 900)) for i in range(40)
    ]
    sizes = {
        "fresh plans": lambda: api._fresh_plans.total(),
        "kept plan": lambda: len(api._last_kept),
        "decompositions": lambda: len(tk._decomposed),
        "sizes": lambda: tk._sized.cache_info().currsize + tk._made.cache_info().currsize,
        "batch limits": lambda: tk.max_batch.cache_info().currsize,
        "whole-GPU rates": lambda: limits.gpu_rps.cache_info().currsize,
        "predictions": lambda: len(shares._predictions),
        "solo": lambda: sum(len(m._solo) for m in models.values()),
    }
    first = api.make_plan(demands, [P3, P3X4], models, max_instances=1000)
    warm = api.make_plan(demands[1:], [P3, P3X4], models, max_instances=1000, current=first)
    assert all(size() > 0 for size in sizes.values()), {k: f() for k, f in sizes.items()}
    api.forget_memos(models.values())
    assert {k: f() for k, f in sizes.items()} == dict.fromkeys(sizes, 0)
    assert api.make_plan(demands[1:], [P3, P3X4], models, max_instances=1000, current=first) == warm


@pytest.mark.unit
def test_plan_scale_plans_every_timed_run_cold(models, monkeypatch) -> None:
    """benchmarks/plan_scale.py times each run cold: every run decomposes every demand afresh
    (a run that answered from the memos would time microseconds). Its own path, run small: it
    once stopped with an AttributeError on a memo that had been renamed."""
    ps = benchmod.load("plan_scale")
    demands = ps.workloads(12)
    calls = []
    real = tk._decompose_one
    monkeypatch.setattr(tk, "_decompose_one", lambda *a: calls.append(a[0]) or real(*a))
    _, _, plan = ps.timed(demands, ps.V100, {"v100": models["v100"]}, "igniter", 3)
    assert plan.gpu_count > 0
    assert sorted(d.workload for d in calls) == sorted(d.workload for d in demands * 3)
