"""The burst floor and peak samples of the headroom estimator (core/capacity/headroom.py): capacity must
carry the busiest second a rate source saw, not the mean it read."""

from __future__ import annotations

import json

import numpy as np
import pytest

from autoscaler.core.capacity.headroom import HeadroomConfig, HeadroomState, Step, TickInput, update

pytestmark = pytest.mark.unit


TICK = 30.0


def cfg(**kw: float) -> HeadroomConfig:
    base = {"target": 0.99, "lead_s": 180.0, "horizon_s": 210.0, "warmup_s": 0.0, "cold_start": 0.0}
    return HeadroomConfig(**{**base, **kw})  # type: ignore[arg-type]


def feed(
    means: list[float | None],
    peaks: list[float | None],
    c: HeadroomConfig,
    fixed: float | None = None,
    capacity: float | None = None,
) -> tuple[HeadroomState, list[Step]]:
    """One workload: each tick reads `means[k]` (None: missing) whose busiest second was `peaks[k]`
    (None: the source cannot tell); the forecast is flat at 100."""
    state, steps = HeadroomState(), []
    for k, (m, p) in enumerate(zip(means, peaks)):
        inp = TickInput(
            now=k * TICK,
            interval_s=TICK,
            observed={} if m is None else {"a": m},
            forecast={"a": 100.0},
            peak={} if p is None else {"a": p},
            capacity={} if capacity is None else {"a": capacity},
            fixed=fixed,
        )
        step = update(state, inp, c)
        state = step.state
        steps.append(step)
    return state, steps


def test_a_burst_floors_the_plan_for_one_window_then_lets_go() -> None:
    """A mean of 100 whose one burst second reached 900: from the tick that reads it, no plan is
    under 900 until burst_window_s (600 s: 20 ticks) has passed since; then the floor is the
    busiest peak still in the window."""
    c = cfg(burst_window_s=600.0)
    peaks: list[float | None] = [120.0] * 10 + [900.0] + [130.0] * 30
    _, steps = feed([100.0] * 41, peaks, c)
    floors = [s.floor["a"] for s in steps]
    assert floors[9] == 120.0 and floors[10] == 900.0
    assert all(f == 900.0 for f in floors[10:30])  # 10 .. 29: less than 600 s after the burst
    assert floors[30] == 130.0 and floors[-1] == 130.0


def test_without_a_peak_the_rate_read_is_the_peak() -> None:
    c = cfg(burst_window_s=300.0)
    _, steps = feed([100.0, 400.0] + [100.0] * 12, [None] * 14, c)
    floors = [s.floor["a"] for s in steps]
    assert floors[1:11] == [400.0] * 10 and floors[11] == 100.0


def test_missing_data_keeps_the_floor_of_the_window() -> None:
    c = cfg(burst_window_s=600.0)
    _, steps = feed([100.0, None, None, None], [700.0, None, None, None], c)
    assert [s.floor["a"] for s in steps] == [700.0] * 4


def test_a_fixed_headroom_has_no_floor_and_zero_window_turns_it_off() -> None:
    _, steps = feed([100.0] * 5, [900.0] * 5, cfg(), fixed=0.2)
    assert all(s.floor["a"] == 0.0 and s.headroom["a"] == 0.2 for s in steps)
    state, steps = feed([100.0] * 5, [900.0] * 5, cfg(burst_window_s=0.0))
    assert all(s.floor["a"] == 0.0 for s in steps) and state.workloads["a"].peaks == ()


def test_samples_and_attainment_are_judged_on_the_peak() -> None:
    """Means at the forecast, busiest seconds at 1.3 x: the headroom learnt is the peaks' 0.3
    (the means alone would teach 0), and capacity 120 covered the means but none of the peaks."""
    rng = np.random.default_rng(1)
    n = 400
    c = cfg(window_s=1e9)
    state, _ = feed([100.0] * n, (100.0 * rng.uniform(1.29, 1.3, n)).tolist(), c, capacity=120.0)
    assert 0.3 <= state.headroom("a", c) <= 0.32
    assert state.attainment("a", n * TICK) == pytest.approx(0.0)
    state, _ = feed([100.0] * n, [None] * n, c, capacity=120.0)
    assert state.headroom("a", c) == pytest.approx(0.0) and state.attainment("a", n * TICK) == 1.0


def test_a_peak_under_the_mean_counts_as_the_mean_and_errors_stay_of_the_mean() -> None:
    c = cfg(burst_window_s=600.0)
    _, steps = feed([100.0] * 10, [50.0] * 10, c)
    assert steps[-1].floor["a"] == 100.0
    _, steps = feed([110.0] * 10, [500.0] * 10, c)
    assert steps[-1].errors["a"] == pytest.approx(0.1)  # the forecast's error: of what it forecasts


def test_the_peaks_round_trip_through_json() -> None:
    state, _ = feed([100.0] * 5, [300.0, None, 250.0, 900.0, None], cfg(burst_window_s=600.0))
    assert state.workloads["a"].peaks
    back = HeadroomState.from_json(json.loads(json.dumps(state.to_json())))
    assert back == state
