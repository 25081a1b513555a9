"""core/capacity/error_window.py: the forecast's recent error per quantile, over a window of time."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.core.capacity.error_window import Recent, WindowConfig, Windows, weighted_quantiles
from tests.kit.examples import examples

pytestmark = pytest.mark.unit

CFG = WindowConfig(window_s=3600.0, max_gap_s=210.0, first_s=30.0, size=240)


def filled(errors: list[float], step: float = 30.0, start: float = 0.0, ws: Windows | None = None) -> Windows:
    """Workload a's window after one error a tick, `step` seconds apart."""
    ws = (ws or Windows()).keep(["a"], CFG)
    for k, e in enumerate(errors):
        ws = ws.update(start + k * step, {"a": e}, CFG)
    return ws


def of_a(ws: Windows, now: float, qs: tuple[float, ...] = (0.1, 0.5, 0.9, 0.99)) -> dict[str, float]:
    return ws.quantiles(now, CFG, qs).get("a", {})


def test_quantiles_say_bias_and_the_tail_above_the_forecast() -> None:
    """90 reads on the forecast, 9 at 50 % above it, 1 at 3x, 30 s apart: the 0.9 quantile is the
    smallest error with 90 % of the time at or below it (0), the 0.99 the 50 %; the 3x only
    shows beyond 0.99, and reads below the forecast show at the low quantiles."""
    assert of_a(filled([0.0] * 90 + [0.5] * 9 + [2.0]), 99 * 30.0) == {"0.1": 0.0, "0.5": 0.0, "0.9": 0.0, "0.99": 0.5}
    ws = filled([-0.2] * 5 + [0.0] * 85 + [0.5] * 9 + [2.0])
    q = of_a(ws, 99 * 30.0, (0.04, 0.1, 0.5, 0.91, 0.995))
    assert q == {"0.04": -0.2, "0.1": 0.0, "0.5": 0.0, "0.91": 0.5, "0.995": 2.0}


def test_samples_older_than_the_window_leave() -> None:
    """An hour-old miss no longer counts; with nothing left in the window there are no quantiles."""
    ws = filled([1.0] * 10 + [0.0] * 120)  # 30 s apart: the 1.0s are over an hour old at the end
    assert of_a(ws, 129 * 30.0)["0.99"] == 0.0
    assert of_a(filled([1.0] * 10), 129 * 30.0) == {}
    assert Windows().quantiles(0.0, CFG) == {}


def test_each_sample_weighs_the_seconds_since_the_previous() -> None:
    """Event ticks 1 s apart (reading 1.0) do not outweigh 30 s of regular ticks (reading 0):
    their 10 s are under 10 % of the time, so the 0.9 quantile stays 0 (by count they are 1/4)."""
    ws = filled([0.0] * 31)
    for k in range(10):
        ws = ws.update(900.0 + 1.0 + k, {"a": 1.0}, CFG)
    assert float(ws.weights[0][ws.errors[0] == 1.0].sum()) == pytest.approx(10.0)
    assert of_a(ws, 910.0)["0.9"] == 0.0 and of_a(ws, 910.0)["0.99"] == 1.0
    gap = filled([0.0, 1.0], step=1000.0)  # a long silence weighs max_gap_s, no more
    assert of_a(gap, 1000.0, (0.12, 0.13)) == {"0.12": 0.0, "0.13": 1.0}  # 30 s of 240


def test_bad_samples_add_nothing_and_the_size_is_bounded() -> None:
    ws = filled([0.0, 0.1])
    for bad in (math.nan, math.inf):
        assert of_a(ws.update(90.0, {"a": bad}, CFG), 90.0) == of_a(ws, 90.0)
    assert of_a(ws.update(30.0, {"a": 5.0}, CFG), 30.0)["0.99"] == 0.1  # not after the newest sample
    assert ws.update(90.0, {"gone": 5.0}, CFG).quantiles(90.0, CFG).keys() == {"a"}  # no row: keep() first
    small = WindowConfig(size=3)
    v = Windows().keep(["a"], small)
    for k in range(5):
        v = v.update(30.0 * k, {"a": float(k)}, small)
    assert v.quantiles(120.0, small, (0.0, 1.0)) == {"a": {"0": 2.0, "1": 4.0}}  # the oldest left first


def test_keep_follows_the_workloads() -> None:
    """A workload added starts empty, one removed leaves, the others keep their samples."""
    ws = Windows().keep(["a", "b"], CFG).update(0.0, {"a": 0.5, "b": -0.1}, CFG).update(30.0, {"a": 0.5}, CFG)
    assert ws.quantiles(30.0, CFG) == {
        "a": {"0.1": 0.5, "0.5": 0.5, "0.9": 0.5, "0.99": 0.5},
        "b": {"0.1": -0.1, "0.5": -0.1, "0.9": -0.1, "0.99": -0.1},
    }
    assert ws.quantiles(3600.0, CFG) == {"a": {"0.1": 0.5, "0.5": 0.5, "0.9": 0.5, "0.99": 0.5}}
    moved = ws.keep(["c", "a"], CFG)
    assert moved.quantiles(30.0, CFG) == {"a": {"0.1": 0.5, "0.5": 0.5, "0.9": 0.5, "0.99": 0.5}}
    assert moved.update(60.0, {"c": 0.25}, CFG).quantiles(60.0, CFG)["c"]["0.5"] == 0.25


def test_a_tick_answers_its_quantiles_once_asked() -> None:
    """Recent: the quantiles at the tick's time (not the reader's), computed once."""
    ws = filled([0.0] * 10 + [1.0])
    recent = Recent(ws, 300.0, CFG)
    assert recent.quantiles == ws.quantiles(300.0, CFG) and recent.quantiles["a"]["0.99"] == 1.0
    assert recent.quantiles is recent.quantiles
    assert Recent().quantiles == {}


@pytest.mark.property
@settings(max_examples=examples(60), deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(1.0, 400.0), st.floats(-1.0, 50.0, allow_nan=False), st.sampled_from(["a", "b"])),
        min_size=1,
        max_size=80,
    ),
    st.integers(2, 40),
)
def test_the_table_answers_as_the_weighted_quantiles_of_the_live_samples(
    ticks: list[tuple[float, float, str]], size: int
) -> None:
    """Any sequence of errors, gaps and workloads: each workload's quantiles are
    weighted_quantiles of its samples (each weighted by its gap to the previous, at most
    max_gap_s, the first first_s) that are younger than window_s and among its last `size`."""
    cfg = WindowConfig(window_s=1800.0, max_gap_s=210.0, first_s=30.0, size=size)
    ws, now, seen = Windows().keep(["a", "b"], cfg), 0.0, {"a": [], "b": []}
    for gap, err, w in ticks:
        now += gap
        ws = ws.update(now, {w: err}, cfg)
        prev = seen[w][-1][0] if seen[w] else None
        weight = cfg.first_s if prev is None or prev <= now - cfg.window_s else min(now - prev, cfg.max_gap_s)
        seen[w].append((now, err, weight))
    got = ws.quantiles(now, cfg)
    for w, samples in seen.items():
        live = [(e, s) for t, e, s in samples[-size:] if t > now - cfg.window_s]
        want = weighted_quantiles(live, (0.1, 0.5, 0.9, 0.99))
        assert list(got.get(w, {}).values()) == want


@pytest.mark.property
@settings(max_examples=examples(80), deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(-1.0, 50.0, allow_nan=False), st.floats(0.0, 300.0, allow_nan=False)),
        min_size=1,
        max_size=60,
    ),
    st.lists(st.floats(0.0, 1.0), min_size=1, max_size=6),
)
def test_a_quantile_is_a_value_seen_with_its_share_of_the_weight(
    pairs: list[tuple[float, float]], qs: list[float]
) -> None:
    """Each answer is one of the values; at least q of the weight sits at or below it and less
    than q strictly below it; a higher q never answers lower."""
    out = weighted_quantiles(pairs, qs)
    total = sum(s for _, s in pairs if s > 0)
    if total <= 0:
        assert out == []
        return
    for q, v in zip(qs, out, strict=True):
        assert v in {x for x, s in pairs if s > 0}
        at_or_below = sum(s for x, s in pairs if s > 0 and x <= v)
        below = sum(s for x, s in pairs if s > 0 and x < v)
        assert at_or_below >= q * total * (1 - 1e-9)
        assert below < q * total * (1 + 1e-9) or below == 0.0  # the smallest such value
    ordered = sorted(zip(qs, out, strict=True))
    assert all(a[1] <= b[1] for a, b in itertools.pairwise(ordered))
