"""core/capacity/periods.py: the ahead window widened by the spread of the bursts' onsets
(PeriodConfig.max_spread_s, off by default)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.core.capacity.periods import PeriodConfig, _ahead, _spread, decompose
from tests.core.test_periods import bt, points
from tests.kit.examples import examples

pytestmark = pytest.mark.unit

CFG = dataclasses.replace(PeriodConfig(), max_spread_s=600.0)


def cycles(offsets: list[int], bins: int = 60, at: int = 20, width: int = 10) -> tuple[np.ndarray, np.ndarray]:
    """(times, values) on a 60 s grid: one square burst a cycle, at bin `at` moved by each offset."""
    values = np.zeros(bins * len(offsets))
    for k, off in enumerate(offsets):
        values[k * bins + at + off : k * bins + at + off + width] = 1.0
    return np.arange(len(values), dtype=float) * 60.0, values


def test_without_a_spread_the_rise_is_from_the_value_now() -> None:
    """back 0 is the rise as before the widening: the highest value within look minus the value now."""
    path = np.array([0.0, 0, 0, 5, 5, 0, 0, 0, 0])
    assert _ahead(path, 0, 2, 6).tolist() == [0.0, 5, 5, 0, 0, 0]


def test_a_burst_is_planned_for_back_steps_early_and_held_back_steps_late() -> None:
    """A burst due at step 10 (path[back:] starts now): with back 3 and look 5 + 3, the rise is
    there from step 10 - 8 on and still there at step 12 (a burst 3 steps late finds it), gone at 13."""
    back, look = 3, 8
    path = np.zeros(back + 40 + look)
    path[back + 10 : back + 20] = 4.0
    rise = _ahead(path, back, look, 40)
    assert [i for i, r in enumerate(rise) if r > 0] == list(range(2, 13))
    assert rise[2:13].tolist() == [4.0] * 11


@pytest.mark.property
@settings(max_examples=examples(50), deadline=None)
@given(st.lists(st.floats(-50, 50), min_size=30, max_size=60), st.integers(0, 5), st.integers(0, 8))
def test_widening_never_lowers_the_rise(values: list[float], back: int, look: int) -> None:
    """Widened by `back` either side, the rise is at least the unwidened one at every step."""
    path = np.asarray(values)
    count = len(path) - 2 * back - look
    if count <= 0:
        return
    plain = _ahead(path[back:], 0, look, count)
    wide = _ahead(path, back, look + back, count)
    assert np.all(wide >= plain - 1e-12)


def test_the_spread_is_the_largest_onset_shift() -> None:
    """Cycles alike: no spread; onsets at 0, +3, -3, +1 steps: a spread of 3 to 4 steps (each
    cycle against the others' mean: -3 is 4 from the others' centre); capped at max_spread_s; 0
    when off."""
    same = cycles([0, 0, 0, 0])
    prof = same[1][:60]
    assert _spread(*same, 3600.0, prof, CFG) == 0.0
    moved = cycles([0, 3, -3, 1])
    assert 180.0 <= _spread(*moved, 3600.0, prof, CFG) <= 240.0
    assert _spread(*moved, 3600.0, prof, dataclasses.replace(CFG, max_spread_s=60.0)) == 60.0
    assert _spread(*moved, 3600.0, prof, PeriodConfig()) == 0.0


@pytest.mark.parametrize("offsets", [[0, 5], [0, 0], [2, -2]])
def test_under_three_cycles_the_spread_is_all_that_is_allowed(offsets: list[int]) -> None:
    """Two cycles cannot show their onsets' spread (the period is fit to their gap), so the most
    the policy allows is taken, on the grid (max_spread_s 90 s on 60 s steps: one step); off
    stays off."""
    two = cycles(offsets)
    prof = two[1][:60]
    assert _spread(*two, 3600.0, prof, CFG) == 600.0
    assert _spread(*two, 3600.0, prof, dataclasses.replace(CFG, max_spread_s=90.0)) == 60.0
    assert _spread(*two, 3600.0, prof, PeriodConfig()) == 0.0


@pytest.mark.parametrize("seed", [0, 1])
def test_a_jittered_burst_widens_only_the_rise(seed: int) -> None:
    """Four hours of an hourly burst jittered by 3 minutes: the same periods and seasonal table as
    with the widening off (tabulated further: the look is longer), and a rise at least as high at
    every step, higher at some."""
    trace = bt.make({"a": bt.Bursts(jitter_s=180.0)}, 4.0, seed=seed)
    pts = points(trace.rates["a"])
    off = decompose(pts, 14340.0, 240.0, PeriodConfig())
    on = decompose(pts, 14340.0, 240.0, CFG)
    assert on.periods == off.periods and on.table[: len(off.table)] == off.table
    assert all(a >= b - 1e-9 for a, b in zip(on.ahead, off.ahead, strict=True))
    assert sum(on.ahead) > sum(off.ahead)
