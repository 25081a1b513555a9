"""loop/tick/tuning.py: when `forecast: auto` refits each workload's periods (period_fits), on a fake
clock: the time passed in, a real in-memory Store, no sleeps."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from autoscaler.config.policy import Policy, load_policy
from autoscaler.loop.state.store import Store
from autoscaler.loop.tick.tuning import period_fits
from tests.core.test_periods import bt
from tests.kit.sim import BASE

pytestmark = pytest.mark.unit


def policy(tmp_path: Path, names: tuple[str, ...] = ("a",)) -> Policy:
    workloads = [{**BASE["workloads"][0], "name": n} for n in names]
    data = {**BASE, "workloads": workloads, "scaling": {**BASE["scaling"], "forecast": "auto"}}
    (tmp_path / "policy.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    return load_policy(tmp_path / "policy.yaml")


class Reads(Store):
    """A real Store that notes where each read of the rate history started."""

    def __init__(self) -> None:
        super().__init__(":memory:")
        self.since: list[float] = []

    def rate_history(self, since: float, until: float = float("inf")) -> dict[str, list[tuple[float, float]]]:
        self.since.append(since)
        return super().rate_history(since, until)


def test_a_young_history_is_refit_on_its_schedule(tmp_path: Path) -> None:
    """No history at 0: nothing found, due again 5 minutes on (refit_min_s), not a full hour; a
    minute before that the fit is kept (no read), at it the fit is new."""
    pol, store = policy(tmp_path), Reads()
    assert period_fits(pol, store, 0.0)["a"].fitted_at == 0.0
    store.add_rates(60.0, {"a": 300.0}, {"a": 300.0})
    assert period_fits(pol, store, 240.0)["a"].fitted_at == 0.0
    assert len(store.since) == 1
    assert period_fits(pol, store, 300.0)["a"].fitted_at == 300.0
    assert len(store.since) == 2


def test_a_45_minute_period_is_found_before_its_third_burst(tmp_path: Path) -> None:
    """Bursts every 45 minutes from minute 15: a fit needs two cycles (90 minutes) of history. The
    first fit that finds the period comes by minute 97, before the capacity for the third burst
    (minute 105) must be launched (a boot and a tick ahead); refit hourly, it came at 120."""
    pol, store = policy(tmp_path), Store(":memory:")
    trace = bt.make({"a": bt.Bursts(2700.0, 900.0, rise_s=120.0, base_rps=300.0)}, 2.0, seed=4)
    found = None
    for t, v in zip(trace.times.tolist(), trace.rates["a"].tolist(), strict=True):
        store.add_rates(t, {"a": v}, {"a": v})
        fit = period_fits(pol, store, t)["a"]
        if fit.periods:
            found = fit.fitted_at
            break
    assert found is not None and 80 * 60.0 <= found <= 97 * 60.0
    assert abs(fit.periods[0].period_s - 2700.0) < 0.03 * 2700.0


def noisy_half_day(seed: int) -> tuple[Store, float]:
    """A store holding 13 hours of one workload's noisy rates a minute apart, and the time after them."""
    store = Store(":memory:")
    rng = np.random.default_rng(seed)
    for t in np.arange(0.0, 13 * 3600.0, 60.0):
        store.add_rates(float(t), {"a": 300.0 * (1 + 0.1 * rng.standard_normal())}, {"a": 300.0})
    return store, 13 * 3600.0


def test_an_old_history_is_refit_hourly(tmp_path: Path) -> None:
    """Half a day of history: a fit holds refit_s (an hour) whatever it found; the clock going back
    (a replay restarted) refits at once."""
    pol, (store, now) = policy(tmp_path), noisy_half_day(seed=0)
    assert period_fits(pol, store, now)["a"].fitted_at == now
    assert period_fits(pol, store, now + 3540.0)["a"].fitted_at == now
    assert period_fits(pol, store, now + 3600.0)["a"].fitted_at == now + 3600.0
    assert period_fits(pol, store, now + 60.0)["a"].fitted_at == now + 60.0


def test_a_new_workload_reads_its_own_history_not_the_day(tmp_path: Path) -> None:
    """An old workload and one added an hour ago: the first refit reads the whole day; the new
    workload's next (5 minutes on, the old one not due) reads from its first point only; a workload
    dropped from the policy is no longer returned."""
    store = Reads()
    for t in np.arange(0.0, 86400.0, 300.0):
        late = {"b": 100.0} if t >= 86400.0 - 3600.0 else {}
        store.add_rates(float(t), {"a": 200.0, **late}, {"a": 200.0})
    both = policy(tmp_path, ("a", "b"))
    now = 86400.0
    assert set(period_fits(both, store, now)) == {"a", "b"}
    assert store.since == [0.0]
    fits = period_fits(both, store, now + 300.0)
    assert store.since[1] == 86400.0 - 3600.0
    assert fits["b"].fitted_at == now + 300.0 and fits["a"].fitted_at == now
    assert set(period_fits(policy(tmp_path, ("b",)), store, now + 360.0)) == {"b"}


def test_a_reloaded_policy_with_other_period_settings_refits_at_once(tmp_path: Path) -> None:
    """Half a day of history, fit at 13 h: the same policy read again keeps the fit a minute on;
    one whose `onset_spread_s`, interval or boot_s changed refits on its next tick, not up to an
    hour later; then it keeps its own fit as before."""
    pol, (store, now) = policy(tmp_path), noisy_half_day(seed=1)
    assert period_fits(pol, store, now)["a"].fitted_at == now
    again = policy(tmp_path)
    assert period_fits(again, store, now + 60.0)["a"].fitted_at == now
    for k, (change, value) in enumerate([("onset_spread_s", 300.0), ("interval_s", 120.0), ("boot_s", 240.0)], 2):
        changed = again.model_copy(update={"scaling": again.scaling.model_copy(update={change: value})})
        assert period_fits(changed, store, now + 60.0 * k)["a"].fitted_at == now + 60.0 * k, change
        assert period_fits(changed, store, now + 60.0 * k + 30.0)["a"].fitted_at == now + 60.0 * k, change
        again = changed
