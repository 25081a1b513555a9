"""core/capacity/forecast.py's faster forecast, ewma and ramp (issue 50: an hour of points a
workload a tick) give exactly what the plain versions kept here give, bit for bit, on any history:
unsorted, with NaN, infinite or negative rates, repeated times, and gaps that repeat (a tick's)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.core.capacity.forecast import ForecastConfig, ewma, forecast, ramp
from tests.kit.examples import examples

pytestmark = [pytest.mark.unit, pytest.mark.property]

Point = tuple[float, float]


def _alpha(dt: float, tau: float) -> float:
    if tau <= 0:
        return 1.0
    return 1.0 - math.exp(-max(dt, 0.0) / tau)


def plain_ewma(points: Sequence[Point], tau_s: float) -> float:
    level = points[0][1]
    for (t0, _), (t1, x) in itertools.pairwise(points):
        a = _alpha(t1 - t0, tau_s)
        level = a * x + (1 - a) * level
    return level


def plain_valid(points: Sequence[Point]) -> list[Point]:
    return sorted(p for p in points if math.isfinite(p[1]) and p[1] >= 0)


def plain_ramp(points: Sequence[Point], horizon_s: float, reads: int) -> float:
    pts = plain_valid(points)
    if reads <= 0 or len(pts) < reads + 1:
        return 0.0
    tail = pts[-(reads + 1) :]
    slopes = [(v1 - v0) / (t1 - t0) if t1 > t0 else 0.0 for (t0, v0), (t1, v1) in itertools.pairwise(tail)]
    last, least = tail[-1][1], min(slopes)
    floor = last + least * horizon_s
    return floor if least > 0 and floor > last else 0.0


def plain_forecast(history: Sequence[Point], cfg: ForecastConfig) -> float | None:
    """forecast() for `last` and `ewma`, and `seasonal` with no past (the methods this change touches)."""
    points = plain_valid(history)
    if not points:
        return None
    last = points[-1][1]
    base = last if cfg.method == "last" else plain_ewma(points, cfg.tau_s)
    return max(base, last) * (1.0 + cfg.headroom)


rates = st.one_of(
    st.floats(min_value=0.0, max_value=1e4),
    st.sampled_from([math.nan, math.inf, -math.inf, -1.0, 0.0, -0.0]),
)
gaps = st.sampled_from([15.0, 15.0, 15.0, 30.0, 0.0, 7.5, -15.0])  # mostly a tick's gap; repeats, ties, back steps


@st.composite
def histories(draw: st.DrawFn) -> list[Point]:
    steps = draw(st.lists(st.tuples(gaps, rates), max_size=60))
    t, out = draw(st.floats(min_value=0.0, max_value=1e5)), []
    for dt, v in steps:
        t += dt
        out.append((t, v))
    return out if not draw(st.booleans()) else sorted(out, key=lambda p: -p[1] if p[1] == p[1] else 0.0)


@settings(max_examples=examples(100), deadline=None)
@given(histories(), st.sampled_from([0.0, 60.0, 120.0]), st.sampled_from(["last", "ewma", "seasonal"]))
def test_forecast_is_bit_identical_to_the_plain_version(history: list[Point], tau: float, method: str) -> None:
    cfg = ForecastConfig(method, 210.0, 0.1, tau_s=tau)  # type: ignore[arg-type]
    got, want = forecast(history, cfg), plain_forecast(history, cfg)
    assert (got is None and want is None) or (got is not None and want is not None and got.hex() == want.hex())


@settings(max_examples=examples(100), deadline=None)
@given(histories(), st.sampled_from([0.0, 60.0, 120.0]))
def test_ewma_is_bit_identical_to_the_plain_version(history: list[Point], tau: float) -> None:
    points = [p for p in history if math.isfinite(p[1])]
    if points:
        assert ewma(points, tau).hex() == plain_ewma(points, tau).hex()


@settings(max_examples=examples(100), deadline=None)
@given(histories(), st.integers(min_value=-1, max_value=4))
def test_ramp_is_bit_identical_to_the_plain_version(history: list[Point], reads: int) -> None:
    assert ramp(history, 210.0, reads).hex() == plain_ramp(history, 210.0, reads).hex()


def test_a_tick_history_in_time_order_gives_the_same_forecast() -> None:
    """The controller's case: an hour of 15 s reads of a wandering rate, in time order."""
    history = [(15.0 * k, 100.0 + 20.0 * math.sin(k / 7.0)) for k in range(240)]
    cfg = ForecastConfig("seasonal", 210.0, 0.0, tau_s=120.0)
    assert forecast(history, cfg) == plain_forecast(history, cfg)
    assert ramp(history, 210.0, 3) == plain_ramp(history, 210.0, 3)
