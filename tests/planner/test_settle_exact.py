"""The planner's inner loop kept exact (issue 50): settle's inlined fast path against Algorithm 2
written plainly, the predictions remembered per (model, mix, shares), and size_on remembered on
what it reads of a demand. Each answer must be the same float, not a close one."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.model.perfmodel import PerfModel
from autoscaler.planner import Demand
from autoscaler.planner import shares as sh
from autoscaler.planner import tasks as tk
from autoscaler.planner.shares import EPS, Prediction, jump, mix_of, predict, settle, solo_shares
from autoscaler.planner.tasks import Size, decompose, size_on
from tests.kit.examples import examples
from tests.planner.conftest import demand_sets


def plain_settle(
    model: PerfModel,
    sizes: Sequence[Size],
    shares: Sequence[float],
    step: float | None = None,
    pinned: Sequence[bool] | None = None,
) -> tuple[list[float], list[Prediction]] | None:
    """settle as it was written before the fast path: predict_raw every round, violated and jump
    called per placement."""
    out = list(shares)
    while True:
        preds = model.predict_raw([(s.model, s.batch, r) for s, r in zip(sizes, out)])
        raised = False
        for i, (size, pred) in enumerate(zip(sizes, preds)):
            lat, thr = pred
            if not (lat > size.budget_ms * (1 + EPS) or thr < size.need_rps * (1 - EPS)):
                continue
            if pinned is not None and pinned[i]:
                return None
            nxt = out[i] + step if step is not None else jump(size, out[i], pred, model.unit)
            if nxt is None or nxt > 100.0 + EPS:
                return None
            out[i], raised = nxt, True
        if not raised:
            return out, preds
        if sum(out) > 100.0 + EPS:
            return None


@pytest.mark.property
@settings(max_examples=examples(80), deadline=None)
@given(demand_sets(min_size=1, max_size=6, big=False), st.data())
def test_settle_is_algorithm_2_written_plainly(models, demands, data) -> None:
    """The same shares and predictions (==, so the same floats) or the same None, from the lower
    bounds or from raised shares, jumping, stepping or with pinned placements; twice, so that the
    second answer comes from the remembered predictions."""
    gpu = data.draw(st.sampled_from(sorted(models)))
    tasks, _ = decompose(demands, {gpu: models[gpu]}, {gpu: 1.0})
    sizes = [t.sizes[gpu] for t in tasks]
    if not sizes:
        return
    model = models[gpu]
    start = [max(model.unit, s.lower + model.unit * data.draw(st.integers(-3, 3))) for s in sizes]  # some short
    step = data.draw(st.sampled_from([None, model.unit]))
    pinned = data.draw(st.one_of(st.none(), st.lists(st.booleans(), min_size=len(sizes), max_size=len(sizes))))
    want = plain_settle(model, sizes, start, step, pinned)
    for _ in range(2):
        assert settle(model, sizes, start, step, pinned) == want
        assert settle(model, sizes, start, step, pinned, mix=mix_of(sizes)) == want
    assert settle(model, sizes, solo_shares(sizes)) == plain_settle(model, sizes, solo_shares(sizes))
    every = [True] * len(sizes)  # kept placements: None as soon as any one of them misses
    assert settle(model, sizes, start, None, every) == plain_settle(model, sizes, start, None, every)


@pytest.mark.unit
def test_remembered_predictions_tell_batches_and_models_apart(models) -> None:
    """A mix that differs only in a batch, or only in a model, or only in a share is predicted
    apart (a key that left one out would hand back another mix's predictions)."""
    v100 = models["v100"]
    d = [Demand("a", "alexnet", 20.0, 300.0), Demand("b", "resnet50", 40.0, 200.0)]
    tasks, _ = decompose(d, {"v100": v100}, {"v100": 3.06})
    a, b = (t.sizes["v100"] for t in tasks)
    mixes = [
        [a, b],
        [a, replace(b, batch=b.batch + 1)],
        [replace(a, model="resnet50"), b],
    ]
    for sizes in mixes:
        for shares in ([40.0, 50.0], [40.0, 55.0]):
            items = [(s.model, s.batch, r) for s, r in zip(sizes, shares)]
            assert predict(v100, sizes, shares) == v100.predict_raw(items)
            assert sh.predicted(v100, mix_of(sizes), tuple(shares)) == tuple(v100.predict_raw(items))


@pytest.mark.property
@settings(max_examples=examples(60), deadline=None)
@given(
    st.sampled_from(["alexnet", "resnet50", "vgg19", "ssd"]),
    st.floats(15.0, 200.0),
    st.floats(1.0, 1.3),
    st.floats(1.0, 900.0),
    st.floats(1.0, 900.0),
    st.booleans(),
)
def test_sizes_remembered_on_what_they_read(models, model, slo, corr, rate, other, search) -> None:
    """size_on remembers per model, SLO, correction and rate, not the demand's own rate or name:
    its answer is the uncached one for every demand, asked in any order (the uncached function
    written out here: a cache keyed without the SLO, the correction or the rate fails)."""
    v100 = models["v100"]
    d = Demand("w", model, slo, other, corr)
    for dd in (d, replace(d, workload="x", rate_rps=rate), replace(d, slo_ms=slo + 1.0), replace(d, correction=1.0)):
        for r in (rate, other):
            want = uncached_size(v100, dd, r, search)
            assert size_on(v100, "v100", dd, r, search) == want
            assert size_on.__wrapped__(v100, "v100", dd, r, search) == want  # type: ignore[attr-defined]


def uncached_size(model: PerfModel, d: Demand, rate: float, search: bool) -> Size | None:
    """tasks.size_on before it was remembered on the demand's fields: the whole demand read."""
    slo_eff, need = d.slo_ms / 2.0 / d.correction, rate * d.correction
    rule = model.batch_size(d.model, d.slo_ms, rate)
    top = tk.max_batch(model, d.model, slo_eff)
    first = min(rule, top) if top else rule
    best: tuple[float, int] | None = None
    for batch in range(first, max(0, first - (tk.BATCH_SEARCH if search else 1)), -1):
        fits = model.memory_mb is None or model.memory(d.model, batch) <= model.memory_mb
        share = model.min_share(d.model, batch, slo_eff, need) if fits else None
        if share is not None and (best is None or share < best[0]):
            best = (share, batch)
    if best is None:
        return None
    return tk.make_size(model, "v100", d, best[1], best[0], rate)
