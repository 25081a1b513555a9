"""The seasonal forecast (ewma, never below the same stretch of past seasons) and next_wake (early
ticks for boots and make-before-break work): pure, then through the Controller."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from autoscaler.core.capacity.forecast import ForecastConfig, forecast, forecast_all, season_windows
from autoscaler.core.capacity.scaling import next_wake
from tests.kit.control import Clock, make_controller, make_policy

pytestmark = pytest.mark.unit


DAY = 86400.0
# a quiet history: the ewma settles near 100
QUIET = [(float(t), 100.0) for t in range(0, 600, 30)]


def seasonal(**kw: float) -> ForecastConfig:
    return ForecastConfig("seasonal", horizon_s=210.0, headroom=0.0, tau_s=120.0, **kw)  # type: ignore[arg-type]


# -- forecast(method="seasonal") -----------------------------------------------------------------
def test_past_peak_lifts_the_forecast() -> None:
    assert forecast(QUIET, seasonal()) == pytest.approx(100.0)
    assert forecast(QUIET, seasonal(), past=[(1.0, 80.0), (2.0, 400.0), (3.0, 90.0)]) == pytest.approx(400.0)


def test_past_peak_takes_headroom_like_the_rest() -> None:
    cfg = ForecastConfig("seasonal", horizon_s=210.0, headroom=0.5)
    assert forecast(QUIET, cfg, past=[(1.0, 400.0)]) == pytest.approx(600.0)


def test_past_below_the_ewma_changes_nothing() -> None:
    plain = forecast(QUIET, seasonal())
    assert forecast(QUIET, seasonal(), past=[(1.0, 10.0), (2.0, 99.0)]) == pytest.approx(plain)
    # a recent rise: ewma above the last quiet value, the low past does not drag it down
    rising = QUIET + [(600.0, 300.0)]
    base = forecast(rising, ForecastConfig("ewma", horizon_s=210.0, headroom=0.0, tau_s=120.0))
    assert forecast(rising, seasonal(), past=[(1.0, 50.0)]) == pytest.approx(base)


def test_nan_inf_and_negative_past_values_are_ignored() -> None:
    bad = [(1.0, math.nan), (2.0, -500.0), (3.0, math.inf), (4.0, -math.inf)]
    assert forecast(QUIET, seasonal(), past=bad) == pytest.approx(100.0)
    assert forecast(QUIET, seasonal(), past=bad + [(5.0, 250.0)]) == pytest.approx(250.0)


def test_past_without_any_history_gives_no_forecast() -> None:
    assert forecast([], seasonal(), past=[(1.0, 400.0)]) is None


@pytest.mark.parametrize("method", ["last", "ewma", "holt"])
def test_other_methods_ignore_past(method: str) -> None:
    cfg = ForecastConfig(method, horizon_s=210.0, headroom=0.0)  # type: ignore[arg-type]
    assert forecast(QUIET, cfg, past=[(1.0, 10_000.0)]) == pytest.approx(forecast(QUIET, cfg))
    assert forecast(QUIET, cfg, past=[(1.0, 10_000.0)]) < 1000.0


def test_forecast_all_passes_each_workload_its_own_past() -> None:
    out = forecast_all({"a": QUIET, "b": QUIET}, seasonal(), past={"a": [(1.0, 500.0)]})
    assert out["a"] == pytest.approx(500.0) and out["b"] == pytest.approx(100.0)


# -- season_windows ------------------------------------------------------------------------------
def test_season_windows_cover_the_coming_horizon_in_each_past_season() -> None:
    cfg = seasonal(season_s=1000.0, seasons=3)
    assert season_windows(5000.0, cfg) == [(4000.0, 4210.0), (3000.0, 3210.0), (2000.0, 2210.0)]
    assert season_windows(5000.0, seasonal()) == [(5000.0 - DAY, 5000.0 - DAY + 210.0)]


def test_season_windows_are_empty_for_other_methods() -> None:
    assert season_windows(5000.0, ForecastConfig("ewma", seasons=3)) == []


# -- next_wake -----------------------------------------------------------------------------------
def test_wake_when_a_boot_is_due() -> None:
    assert next_wake(1000.0, [950.0], 180.0, 15.0, False) == 1130.0


def test_wake_at_the_soonest_boot() -> None:
    assert next_wake(1000.0, [990.0, 950.0, 980.0], 180.0, 15.0, False) == 1130.0


def test_settling_wakes_after_settle_s() -> None:
    assert next_wake(1000.0, [], 180.0, 15.0, True) == 1015.0
    assert next_wake(1000.0, [990.0], 180.0, 15.0, True) == 1015.0  # sooner than the boot


def test_never_sooner_than_settle_s() -> None:
    assert next_wake(1000.0, [825.0], 180.0, 15.0, False) == 1015.0  # due in 5 s -> now + settle_s
    assert next_wake(1000.0, [810.0], 180.0, 15.0, False) == 1015.0  # due 10 s ago


def test_a_boot_overdue_by_more_than_boot_s_is_left_to_the_interval() -> None:
    assert next_wake(1000.0, [600.0], 180.0, 15.0, False) is None  # due at 780, 220 s ago
    assert next_wake(1000.0, [600.0, 990.0], 180.0, 15.0, False) == 1170.0
    assert next_wake(1000.0, [650.0], 180.0, 15.0, False) == 1015.0  # due at 830, 170 s ago


def test_settle_s_zero_turns_wakes_off() -> None:
    assert next_wake(1000.0, [990.0], 180.0, 0.0, True) is None


def test_nothing_booting_and_not_settling_never_wakes() -> None:
    assert next_wake(1000.0, [], 180.0, 15.0, False) is None


# -- through the Controller ----------------------------------------------------------------------
def _day_then_now(tmp_path: Path, method: str, offset: float, seasons: int = 1, days: int = 1) -> float:
    """alex runs 150 req/s, spiking to 450 at T on day 0; the tick at T + days*DAY + offset at 150
    again returns alex's forecast (each day between ticks once, quietly, 300 s after T's hour)."""
    policy = make_policy(
        tmp_path,
        scaling={
            "interval_s": 30,
            "boot_s": 180,
            "headroom": 0.0,
            "forecast": method,
            "scale_down_delay_s": 600,
            "seasons": seasons,
        },
    )
    clock = Clock()
    ctl, _, _, rates = make_controller(policy, clock)
    t = clock.t
    for dt, alex in ((-60, 150.0), (-30, 150.0), (0, 450.0), (30, 150.0), (60, 150.0)):
        clock.t = t + dt
        rates.set(alex=alex)
        assert ctl.tick().ok
    rates.set(alex=150.0)
    for d in range(1, days):  # the days between: one quiet tick just after that hour (a
        clock.t = t + d * DAY + 300.0  # store keeping only a day would drop the spike here)
        assert ctl.tick().ok
    clock.t = t + days * DAY + offset
    report = ctl.tick()
    assert report.ok and report.observed["alex"] == 150.0
    return report.forecast["alex"]


def test_controller_seasonal_plans_for_yesterdays_peak(tmp_path: Path) -> None:
    assert _day_then_now(tmp_path, "seasonal", -100.0) >= 450.0


def test_controller_ewma_forgets_yesterdays_peak(tmp_path: Path) -> None:
    assert _day_then_now(tmp_path, "ewma", -100.0) == pytest.approx(150.0)


def test_controller_seasonal_reads_only_the_coming_horizon(tmp_path: Path) -> None:
    """Yesterday's spike came 200 s before this hour: outside [now - day, now - day + 210]."""
    assert _day_then_now(tmp_path, "seasonal", 200.0) == pytest.approx(150.0)


def test_controller_keeps_rates_for_every_season_it_reads(tmp_path: Path) -> None:
    """seasons 2: the spike of two days ago survives the pruning of the day in between."""
    assert _day_then_now(tmp_path, "seasonal", -100.0, seasons=2, days=2) >= 450.0
    assert _day_then_now(tmp_path, "seasonal", -100.0, seasons=1, days=2) == pytest.approx(150.0)


def test_tick_that_launches_wakes_when_the_boot_is_due(tmp_path: Path) -> None:
    policy = make_policy(
        tmp_path,
        scaling={
            "interval_s": 30,
            "boot_s": 180,
            "settle_s": 5,
            "headroom": 0.0,
            "forecast": "last",
            "scale_down_delay_s": 600,
        },
    )
    clock = Clock()
    ctl, prov, _, _ = make_controller(policy, clock)
    report = ctl.tick()
    assert [c for c in prov.calls if c[0] == "launch"] and not report.settling
    assert report.wake_at == clock.t + 180.0
    for _ in range(3):  # the fake boots at once: all ready
        clock.advance(30)
        report = ctl.tick()
    assert report.ok and report.wake_at is None


def test_settle_s_zero_never_sets_wake_at(tmp_path: Path) -> None:
    policy = make_policy(
        tmp_path,
        scaling={
            "interval_s": 30,
            "boot_s": 180,
            "settle_s": 0,
            "headroom": 0.0,
            "forecast": "last",
            "scale_down_delay_s": 600,
        },
    )
    ctl, prov, _, _ = make_controller(policy, Clock())
    report = ctl.tick()
    assert [c for c in prov.calls if c[0] == "launch"] and report.wake_at is None
