"""The ramp floor (core/capacity/forecast.py: ramp, loop/tick/tuning.py): a rise seen on each of the last
few reads is planned for as going on across the horizon; a step, noise or a fall is not."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from autoscaler.core.capacity.forecast import ramp
from autoscaler.core.capacity.headroom import HeadroomState
from autoscaler.loop.tick.tuning import Seen, tune
from tests.kit.control import make_policy

pytestmark = pytest.mark.unit


def series(*values: float, dt: float = 60.0) -> list[tuple[float, float]]:
    return [(i * dt, v) for i, v in enumerate(values)]


def test_a_sustained_rise_goes_on_at_its_least_slope_for_the_horizon() -> None:
    """14 -> 2,500 req/s in ten minutes, read every minute: after three rises of 250, 240 and 260
    req/s a minute, the plan is for 240 more a minute over the 240 s horizon."""
    rising = series(14, 264, 504, 764)
    assert ramp(rising, 240.0, 3) == pytest.approx(764 + 240 / 60 * 240)
    assert ramp(rising, 240.0, 1) == pytest.approx(764 + 260 / 60 * 240)  # the last slope alone
    assert ramp(rising[:3], 240.0, 3) == 0.0  # two rises are not three


@pytest.mark.parametrize(
    ("label", "values"),
    [
        ("a step, then flat", (100, 100, 400, 400)),
        ("noise: up, down, up", (100, 300, 0, 265)),
        ("a fall", (400, 300, 200, 100)),
        ("flat", (100, 100, 100, 100)),
    ],
)
def test_no_sustained_rise_no_floor(label: str, values: tuple[float, ...]) -> None:
    assert ramp(series(*values), 240.0, 3) == 0.0, label


def test_off_with_zero_reads_or_no_history() -> None:
    assert ramp(series(1, 2, 3, 4), 240.0, 0) == 0.0
    assert ramp([], 240.0, 3) == 0.0


def test_reads_at_the_same_time_are_no_rise() -> None:
    assert ramp([(0.0, 1.0), (60.0, 2.0), (60.0, 3.0), (120.0, 4.0)], 240.0, 3) == 0.0


@pytest.mark.property
@given(st.lists(st.floats(0, 1e5), min_size=1, max_size=12), st.integers(0, 5))
# A developer's draw (issue 53): rises on each read, but the least slope (7.1e-211 / 60) adds
# nothing to 1.0 in floating point; ramp returned 1.0, a "floor" at the latest rate, not above it.
@example(values=[0.0, 7.1e-211, 1.0], reads=2)
@example(values=[0.0, 1.401298464324817e-45, 1.0], reads=2)
def test_the_floor_is_none_or_above_the_latest_rate_and_within_the_steepest_rise(
    values: list[float], reads: int
) -> None:
    pts = series(*values)
    out = ramp(pts, 240.0, reads)
    steepest = max((b - a) / 60.0 for a, b in itertools.pairwise(values)) if len(values) > 1 else 0.0
    assert out == 0.0 or values[-1] < out <= values[-1] + steepest * 240.0 * (1 + 1e-12)


def test_tune_plans_above_the_ramp_in_auto_mode_only(tmp_path) -> None:
    """Headroom auto: planned is the highest of base * (1 + headroom), the burst floor and the
    ramp floor; a fixed headroom plans base * (1 + headroom) whatever the ramp says."""
    seen = Seen({"alex": 100.0}, {"alex": 100.0}, {}, {}, ramp={"alex": 900.0})
    auto = make_policy(tmp_path, scaling={"headroom": "auto"})
    tuned = tune(HeadroomState(), auto, 0.0, seen)
    assert tuned.planned["alex"] == 900.0 and tuned.ramp["alex"] == 900.0
    low = Seen({"alex": 100.0}, {"alex": 100.0}, {}, {}, ramp={"alex": 120.0})
    assert tune(HeadroomState(), auto, 0.0, low).planned["alex"] == pytest.approx(150.0)  # cold start 0.5
    fixed = make_policy(tmp_path, scaling={"headroom": 0.2})
    tuned = tune(HeadroomState(), fixed, 0.0, seen)
    assert tuned.planned["alex"] == pytest.approx(120.0) and tuned.ramp["alex"] == 0.0
