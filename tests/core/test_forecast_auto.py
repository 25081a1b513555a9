"""core/capacity/forecast.py's `auto`: seasonal's forecast, raised by the seasonal rise ahead,
never lowered by it."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoscaler.core.capacity.forecast import ForecastConfig, ewma, forecast, season_windows

pytestmark = pytest.mark.property

AUTO, SEASONAL = ForecastConfig("auto", headroom=0.0), ForecastConfig("seasonal", headroom=0.0)
rates = st.lists(st.floats(0.0, 1e4, allow_nan=False), min_size=1, max_size=30)


@given(rates, st.lists(st.floats(0.0, 1e4), max_size=5), st.floats(-1e4, 1e4) | st.just(math.nan))
def test_auto_is_seasonal_raised_by_the_rise_and_never_below_the_latest_rate(values, past, ahead) -> None:
    history = [(60.0 * i, v) for i, v in enumerate(values)]
    old = [(0.0, v) for v in past]
    got, base = forecast(history, AUTO, old, ahead), forecast(history, SEASONAL, old)
    assert got is not None and base is not None
    assert got >= base >= values[-1]
    if not ahead > 0:  # a fall, none, or nonsense: seasonal's, to the bit
        assert got == base
    else:
        assert got == pytest.approx(max(base, ewma(history, AUTO.tau_s) + ahead))


def test_auto_reads_the_same_past_windows_as_seasonal() -> None:
    assert season_windows(1e6, AUTO) == season_windows(1e6, SEASONAL) != []
