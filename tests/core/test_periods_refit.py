"""core/capacity/periods.py: when a fit is due again (refit_after), a period measured on its
multiples from jittered onsets (_sharpen), and a 3-hourly burst found on two cycles."""

from __future__ import annotations

import numpy as np
import pytest

from autoscaler.core.capacity.periods import PeriodConfig, decompose, refit_after
from tests.core.test_periods import bt, points

pytestmark = pytest.mark.unit

CFG = PeriodConfig()


def test_a_young_history_is_refit_often_and_an_old_one_hourly() -> None:
    """span / refit_growth, within [refit_min_s, refit_s]: a fit over no history or an hour holds 5
    minutes, over 3 hours 15, over half a day or more an hour."""
    assert refit_after(0.0, CFG) == CFG.refit_min_s == 300.0
    assert refit_after(3600.0, CFG) == 300.0
    assert refit_after(3 * 3600.0, CFG) == 900.0
    assert refit_after(12 * 3600.0, CFG) == CFG.refit_s == 3600.0
    assert refit_after(7 * 86400.0, CFG) == 3600.0


def onsets_trace(onsets_min: list[float], minutes: int) -> np.ndarray:
    """A base of 200 req/s with a 10-minute burst to 800 at each onset (no noise)."""
    t = np.arange(minutes, dtype=float)
    out = np.full(minutes, 200.0)
    for o in onsets_min:
        out[(t >= o) & (t < o + 10)] = 800.0
    return out


def test_jittered_onsets_give_the_mean_gap_not_the_most_common_one() -> None:
    """Onsets at 24, 79, 143 and 199 minutes (gaps 55, 64, 56): the autocorrelation's peak at one
    period sits at the two close gaps (about 56 minutes, where a single search 3 % around twice
    that found no peak and kept it), its peak at two periods at the mean of the gaps two apart
    (119.5 minutes). The period is measured there: within 1 % of 59.75 minutes."""
    rates = onsets_trace([24, 79, 143, 199], 233)
    fit = decompose(points(rates), 232 * 60.0, 240.0, CFG)
    assert len(fit.periods) >= 1
    assert abs(fit.periods[0].period_s - 59.75 * 60) < 0.01 * 59.75 * 60


def test_a_three_hourly_burst_is_found_on_two_cycles() -> None:
    """Bursts every 3 hours (at 1 h, 4 h): six and a half hours of history hold two cycles, enough
    for a period up to quick_period_s (4 h), so the third burst (at 7 h) is planned for; a 5-hour
    period would still need three."""
    trace = bt.make({"a": bt.Bursts(10800.0, 3600.0, hold_s=1200.0)}, 7.0, seed=2)
    now = 6.5 * 3600.0
    fit = decompose([p for p in points(trace.rates["a"]) if p[0] <= now], now, 240.0, CFG)
    assert [round(p.period_s / 600.0) for p in fit.periods] == [18]
    assert fit.rise(7 * 3600.0 - 240.0) > 300.0
    slow = bt.make({"a": bt.Bursts(18000.0, 3600.0, hold_s=1200.0)}, 11.0, seed=2)
    assert decompose(points(slow.rates["a"]), 11 * 3600.0 - 60.0, 240.0, CFG).periods == ()
