"""core/capacity/forecast.py's column forecasts (issue 50: 1,000 workloads' hour of reads a tick)
give, bit for bit, what forecast and ramp give on each column's points: rates missing (NaN),
negative, infinite or -0.0, workloads that start late or miss reads (their own gaps), irregular
ticks, repeated times (the fallback), every method, seasonal past and auto's rise ahead."""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.core.capacity.forecast import (
    Columns,
    ForecastConfig,
    forecast,
    forecast_columns,
    ramp,
    ramp_columns,
)
from autoscaler.core.capacity.reach import fastest_rise, fastest_rises
from tests.kit.examples import examples

pytestmark = [pytest.mark.unit, pytest.mark.property]

RATE = st.one_of(
    st.floats(min_value=0.0, max_value=1e4, allow_subnormal=False),
    st.sampled_from([math.nan, math.nan, math.nan, -1.0, math.inf, -0.0, 0.0, 5.0]),
)
METHOD = st.sampled_from(["last", "ewma", "holt", "seasonal", "auto"])


@st.composite
def columns(draw: st.DrawFn) -> Columns:
    """A matrix of reads at increasing times (gaps of a few kinds); or, sometimes, with repeated
    times (two ticks at one time: Columns.ordered) or a time going back (each column's own path)."""
    n = draw(st.integers(0, 5))
    rows = draw(st.integers(0, 14))
    gaps = draw(
        st.lists(st.sampled_from([15.0, 15.0, 30.0, 7.5, 0.1, 1e-7, 0.0, 0.0, 0.0, -5.0]), min_size=rows, max_size=rows)
    )
    if not draw(st.booleans()):
        gaps = [g if g > 0 else 15.0 for g in gaps]  # strictly increasing
    elif draw(st.booleans()):
        gaps = [abs(g) for g in gaps]  # never back
    times = np.cumsum([100.0, *gaps])[:rows]
    values = np.array(draw(st.lists(st.lists(RATE, min_size=n, max_size=n), min_size=rows, max_size=rows)))
    return Columns(times.astype(np.float64), tuple(f"w{j}" for j in range(n)), values.reshape(rows, n))


def bits(x: float | None) -> bytes | None:
    return None if x is None else struct.pack("<d", x)


@settings(max_examples=examples(60), deadline=None)
@given(cols=columns(), method=METHOD, tau=st.sampled_from([60.0, 120.0, 0.0]), data=st.data())
def test_column_forecasts_are_those_of_each_workload(
    cols: Columns, method: str, tau: float, data: st.DataObject
) -> None:
    cfg = ForecastConfig(method, 210.0, data.draw(st.sampled_from([0.0, 0.1])), tau_s=tau)  # type: ignore[arg-type]
    past = {w: [(0.0, data.draw(RATE))] for w in cols.names if data.draw(st.booleans())}
    ahead = {w: data.draw(st.sampled_from([0.0, 3.0, math.nan])) for w in cols.names}
    got = forecast_columns(cols, cfg, past, ahead, wide_from=0)
    want = {w: forecast(cols.points(j), cfg, past.get(w, ()), ahead[w]) for j, w in enumerate(cols.names)}
    assert {w: bits(v) for w, v in got.items()} == {w: bits(v) for w, v in want.items()}


@settings(max_examples=examples(60), deadline=None)
@given(cols=columns())
def test_all_points_are_each_columns_points(cols: Columns) -> None:
    """Columns.all_points converts the matrix once: the same pairs, floats and order as points(j)."""
    got = cols.all_points()
    assert list(got) == list(cols.names)
    for j, w in enumerate(cols.names):
        want = cols.points(j)
        assert [(bits(t), bits(v)) for t, v in got[w]] == [(bits(t), bits(v)) for t, v in want]


@settings(max_examples=examples(60), deadline=None)
@given(cols=columns(), reads=st.integers(0, 4), horizon=st.sampled_from([210.0, 1e-300, 1e300]))
def test_column_ramps_are_those_of_each_workload(cols: Columns, reads: int, horizon: float) -> None:
    got = ramp_columns(cols, horizon, reads, wide_from=0)
    want = {w: ramp(cols.points(j), horizon, reads) for j, w in enumerate(cols.names)}
    assert {w: bits(v) for w, v in got.items()} == {w: bits(v) for w, v in want.items()}


@settings(max_examples=examples(60), deadline=None)
@given(cols=columns(), within=st.sampled_from([0.0, 15.0, 20.0, 210.0]))
def test_column_rises_are_those_of_each_workload(cols: Columns, within: float) -> None:
    """core/capacity/reach.py's fastest_rises: the reach watch's hour of reads, all columns at once."""
    got = fastest_rises(cols, within)
    if got is None:
        assert cols.ordered() is None
        return
    want = [fastest_rise(cols.points(j), within) for j in range(len(cols.names))]
    assert [bits(v) for v in got] == [bits(v) for v in want]


def test_a_workload_missing_reads_steps_over_its_own_gap() -> None:
    """Column 1 misses the middle read: its second step weighs a 30 s gap, column 0's two 15 s ones."""
    cols = Columns(np.array([0.0, 15.0, 30.0]), ("a", "b"), np.array([[4.0, 4.0], [2.0, math.nan], [1.0, 1.0]]))
    cfg = ForecastConfig("ewma", 210.0, 0.0, tau_s=60.0)
    got = forecast_columns(cols, cfg, wide_from=0)
    assert got == {"a": forecast(cols.points(0), cfg), "b": forecast([(0.0, 4.0), (30.0, 1.0)], cfg)}
    assert got["a"] != got["b"]


def test_with_row_adds_a_read_and_new_workloads() -> None:
    cols = Columns(np.array([0.0]), ("a",), np.array([[1.0]])).with_row(15.0, {"b": 2.0})
    assert cols.names == ("a", "b") and cols.points(0) == [(0.0, 1.0)] and cols.points(1) == [(15.0, 2.0)]
    assert cols.read() == [True, True] and cols.ordered() is cols


def test_rates_read_twice_at_one_time_are_taken_in_order_of_rate() -> None:
    """The first tick of a replay runs twice at time 0: _valid sorts (time, rate), so the lower
    rate comes first, whichever row it was in; NaN and invalid rates are skipped."""
    values = np.array([[5.0, 1.0, -1.0], [2.0, math.nan, 3.0], [4.0, 4.0, 4.0], [3.0, 3.0, 3.0]])
    cols = Columns(np.array([0.0, 0.0, 15.0, 30.0]), ("a", "b", "c"), values)
    cfg = ForecastConfig("seasonal", 210.0, 0.0, tau_s=60.0)
    want = {w: forecast(cols.points(j), cfg) for j, w in enumerate(cols.names)}
    assert forecast_columns(cols, cfg, wide_from=0) == want == forecast_columns(cols, cfg)
    assert want["a"] == forecast([(0.0, 2.0), (0.0, 5.0), (15.0, 4.0), (30.0, 3.0)], cfg)
    ordered = cols.ordered()
    assert ordered is not None and ordered.values[:2, 0].tolist() == [2.0, 5.0]
