"""core/capacity/periods.py: which periods a rate history has, and the rise they say is coming."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.core.capacity.periods import PeriodConfig, decompose, find_periods, grid
from tests.kit import benchmod
from tests.kit.examples import examples

pytestmark = pytest.mark.unit

bt = benchmod.load("burst_traces")

CFG = PeriodConfig()


def points(rates: np.ndarray, step: float = 60.0) -> list[tuple[float, float]]:
    return [(i * step, float(v)) for i, v in enumerate(rates)]


def periods_of(rates: np.ndarray) -> list[float]:
    times, values = grid(points(rates), 60.0, (len(rates) - 1) * 60.0)
    return [p.period_s for p in find_periods(times, values, CFG)]


@pytest.mark.parametrize("seed", [3, 4, 5])
def test_an_hourly_burst_is_found_after_two_occurrences(seed: int) -> None:
    """Two hours of a jittered hourly burst: one period, within 3 % of an hour, carrying most of
    the variance (its harmonics joined to it, not listed as periods of their own)."""
    trace = bt.make({"a": bt.Bursts()}, 2.0, seed=seed)
    fit = decompose(points(trace.rates["a"]), 7140.0, 240.0, CFG)
    assert len(fit.periods) == 1
    assert abs(fit.periods[0].period_s - 3600.0) < 0.03 * 3600.0
    assert fit.periods[0].strength > 0.8 and fit.periods[0].p_value < CFG.alpha


@pytest.mark.parametrize("seed", range(6))
def test_noise_and_a_lone_burst_have_no_period(seed: int) -> None:
    """White noise around a level, and one burst in a day of it, repeat at no period."""
    rng = np.random.default_rng(seed)
    noise = 300.0 * (1 + 0.1 * rng.standard_normal(1440))
    assert periods_of(noise) == []
    lone = noise.copy()
    lone[600:620] += 900.0
    assert periods_of(lone) == []


def test_two_periods_and_a_sine() -> None:
    """A 4h20 sine under a half-hourly burst: both periods (not commensurate: a 3-hour sine's
    profile would hold the half-hourly bursts, as its sixth harmonic)."""
    t = np.arange(1440) * 60.0
    sine = 300.0 + 150.0 * np.sin(2 * math.pi * t / 15600.0)
    burst = bt.rates(bt.Bursts(1800.0, 600.0, amplitude=4.0, base_rps=200.0), t, np.random.default_rng(1)) - 200.0
    found = sorted(periods_of(sine + burst))
    assert len(found) == 2
    assert abs(found[0] - 1800.0) < 40.0 and abs(found[1] - 15600.0) < 400.0


def test_the_rise_is_tabulated_a_horizon_and_a_lead_ahead() -> None:
    """After six hourly bursts (phase 20 min, +-1 min jitter, 200 -> 800 req/s), the fit at 6 h
    says a rise of about 600 req/s is coming from one horizon (240 s) before the next burst's
    start until it starts, and none twenty minutes before it or in its second half."""
    trace = bt.make({"a": bt.Bursts()}, 7.0, seed=2)
    now = 6 * 3600.0
    fit = decompose([p for p in points(trace.rates["a"]) if p[0] <= now], now, 240.0, CFG)
    start = now + 1200.0
    assert 480.0 < fit.rise(start - 240.0) < 720.0
    assert 480.0 < fit.rise(start - 60.0) < 720.0
    assert fit.rise(now + 60.0) < 60.0 and fit.rise(start + 480.0) < 60.0
    assert fit.rise(now + 3 * 3600.0) == 0.0  # past the table: the caller refits


@pytest.mark.parametrize(("workload", "end"), [("m-large", 14400.0), ("m-mid", 7200.0), ("m-small", 75600.0)])
def test_a_slow_smooth_history_yields_no_zero_period(workload: str, end: float) -> None:
    """ServeGen's first hours (10-minute steps at 1-minute rows: smooth, slow): the refit at these
    times once took a longer multiple that did not fit in the history as a 0 s period and divided
    by it; now every period found is positive and none short of min_period_s."""
    from autoscaler.sim.traces import read_wide

    trace = read_wide(Path(__file__).resolve().parents[2] / "traces" / "servegen-3models-1min.csv")
    pts = [p for p in zip(trace.times.tolist(), trace.rates[workload].tolist(), strict=True) if p[0] <= end]
    fit = decompose(pts, end, 240.0, CFG)
    assert all(p.period_s >= CFG.min_period_s for p in fit.periods)


@pytest.mark.property
@given(
    st.lists(
        st.tuples(st.floats(0.0, 4 * 86400.0), st.floats(0.0, 1e5) | st.just(math.nan) | st.just(math.inf)),
        max_size=400,
    ),
    st.floats(0.0, 4 * 86400.0),
)
@settings(max_examples=examples(60), deadline=None)
def test_any_history_decomposes_without_error(points, now) -> None:
    """Whatever the store holds (gaps, repeats, NaN, inf, points after `now`), a refit returns: its
    periods lie within [min_period_s, the history], its rises are finite and never negative, so a
    tick never fails on them and `auto` never plans below `seasonal`."""
    fit = decompose(points, now, 240.0, CFG)
    span = now - min((t for t, _ in points), default=now) + CFG.step_s
    assert all(CFG.min_period_s <= p.period_s <= span for p in fit.periods)
    assert all(math.isfinite(r) and r >= 0 for r in fit.ahead)
