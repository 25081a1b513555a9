"""Forecast, SLO guard and the scale-in decision: pure functions, time passed in."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.core.capacity.forecast import ForecastConfig, ewma, forecast, holt
from autoscaler.core.capacity.scaling import choose, hold_rates, newly_placed
from autoscaler.core.capacity.slo_guard import GuardConfig, GuardState, update
from tests.kit.examples import examples


def series(*values: float, dt: float = 30.0) -> list[tuple[float, float]]:
    return [(i * dt, v) for i, v in enumerate(values)]


@pytest.mark.unit
def test_forecast_methods() -> None:
    flat = series(100, 100, 100)
    for method in ("last", "ewma", "holt"):
        assert forecast(flat, ForecastConfig(method, headroom=0.1)) == pytest.approx(110.0)  # type: ignore[arg-type]
    assert forecast([], ForecastConfig()) is None


@pytest.mark.unit
def test_step_up_is_seen_at_once_and_step_down_decays() -> None:
    cfg = ForecastConfig("ewma", headroom=0.0, tau_s=120.0)
    assert forecast(series(100, 100, 300), cfg) == 300.0  # never below the latest observation
    down = forecast(series(300, 300, 300, 100), cfg)
    assert down is not None and 100 < down < 300  # smoothing only slows scale-in


@pytest.mark.unit
def test_holt_provisions_ahead_of_a_ramp() -> None:
    ramp = series(*[100 + 10 * i for i in range(20)])
    ahead = holt(ramp, tau_s=60, trend_tau_s=120, horizon_s=210)
    assert ahead > 290 + 30  # extrapolated past the last value
    assert forecast(ramp, ForecastConfig("holt", horizon_s=210, headroom=0, tau_s=60, trend_tau_s=120)) == ahead


@pytest.mark.property
@settings(max_examples=examples(100), deadline=None)
@given(
    st.lists(st.floats(0, 1e5, allow_nan=False), min_size=1, max_size=30),
    st.sampled_from(["last", "ewma", "holt"]),
    st.floats(0, 2),
)
def test_forecast_is_at_least_last_times_headroom(values: list[float], method: str, headroom: float) -> None:
    got = forecast(series(*values), ForecastConfig(method, headroom=headroom))  # type: ignore[arg-type]
    assert got is not None and got >= values[-1] * (1 + headroom) - 1e-6
    assert got <= max(values) * (1 + headroom) * 50 + 1e-6


@pytest.mark.unit
def test_ewma_time_aware() -> None:
    assert ewma([(0, 0.0), (1e6, 100.0)], 60) == pytest.approx(100.0)
    assert ewma([(0, 0.0), (1, 100.0)], 60) < 5


@pytest.mark.unit
def test_slo_guard_raises_after_three_ticks_and_decays() -> None:
    state, slo = GuardState(), {"a": 40.0}
    for _i in range(2):
        state, events = update(state, {"a": 50.0}, slo)
        assert not events
    state, events = update(state, {"a": 50.0}, slo)
    assert state.corrections["a"] == pytest.approx(1.2) and len(events) == 1
    state, _ = update(state, {"a": 30.0}, slo)  # under SLO, not "well under": holds
    assert state.corrections["a"] == pytest.approx(1.2)
    state, _ = update(state, {"a": 10.0}, slo)
    assert state.corrections["a"] == pytest.approx(1.2 * 0.98)
    state, _ = update(state, {}, slo)  # no data: unchanged
    assert state.corrections["a"] == pytest.approx(1.2 * 0.98)


@pytest.mark.unit
def test_slo_guard_streak_resets_and_caps() -> None:
    state, slo = GuardState(), {"a": 40.0}
    for p in (50, 50, 30, 50, 50):
        state, _ = update(state, {"a": float(p)}, slo)
    assert "a" not in state.corrections
    cfg = GuardConfig(ticks=1, max_correction=1.5)
    for _ in range(10):
        state, _ = update(state, {"a": 99.0}, slo, cfg)
    assert state.corrections["a"] == 1.5
    assert GuardState.from_json(state.to_json()) == state


@pytest.mark.unit
def test_scale_in_waits_for_the_delay() -> None:
    assert choose(0, 12, 10, 50, 600, False).use == "hold"  # not cheaper: timer reset
    assert choose(0, 12, 10, 50, 600, False).cheaper_since is None
    c = choose(100, 5, 10, None, 600, False)
    assert (c.use, c.cheaper_since) == ("hold", 100)
    assert choose(699, 5, 10, 100, 600, False).use == "hold"
    assert choose(700, 5, 10, 100, 600, False).use == "target"
    assert choose(700, 5, 10, 100, 0, True).use == "hold"  # missing data: never scale in
    assert choose(700, 5, 10, 100, 600, True).cheaper_since is None


@pytest.mark.unit
def test_a_hold_plan_that_leaves_a_workload_out_gives_way_at_once_to_a_target_that_places_it() -> None:
    """A hold plan kept at r's old peak left m out (max_instances) while the forecast fit: the target
    placing m costs more (15.21/h against 10.14/h) yet is adopted at once, as a scale-out for m;
    without a workload it places, the hold stands as before, and missing data still holds."""
    places = newly_placed(target_unplaced=[], hold_unplaced=["m"])
    assert places == ["m"]
    c = choose(300, 15.21, 10.14, None, 600, False, places=places)
    assert (c.use, c.cheaper_since) == ("target", None) and "places m" in c.why
    assert choose(300, 15.21, 10.14, 100, 600, False, places=newly_placed(["m"], ["m"])).use == "hold"
    assert newly_placed(["x"], ["m", "x"]) == ["m"] and newly_placed(["m"], []) == []
    assert choose(300, 15.21, 10.14, None, 600, True, places=places).use == "hold"


@pytest.mark.unit
def test_hold_rates() -> None:
    assert hold_rates({"a": 10, "b": 50}, {"a": 30, "b": 20}) == {"a": 30, "b": 50}
