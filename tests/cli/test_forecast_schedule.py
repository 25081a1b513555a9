"""`igniter forecast` replays the controller's refit schedule (cli/forecast.py: Replay, through
loop/tick/tuning.py: replay_fits), not a schedule of its own: on a fake clock (the tick times passed
in, a real in-memory Store, no sleeps) its refits come at the ticks where period_fits, fed as
Controller.forecast feeds the store, makes a new fit, and those follow refit_after."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoscaler.cli.forecast import Replay, tick_reads
from autoscaler.core.capacity.periods import refit_after
from autoscaler.loop.state.store import Store
from autoscaler.loop.tick.tuning import period_config, period_fits
from tests.core.test_periods import bt
from tests.loop.test_tuning_refits import policy

pytestmark = pytest.mark.unit

NAMES = ("bursts", "noise")


def controller_refits(pol, trace) -> dict[str, list[float]]:
    """The times each workload's fit is made when the controller ticks over the trace: its fits
    first (planned_rates -> period_fits), then the tick's rates into the store (add_rates)."""
    store, made = Store(":memory:"), {w: [] for w in NAMES}
    for now, rates in tick_reads(pol, trace, list(NAMES)):
        for w, fit in period_fits(pol, store, now).items():
            if not made[w] or made[w][-1] != fit.fitted_at:
                made[w].append(fit.fitted_at)
        store.add_rates(now, rates, rates)
    return made


def test_the_plot_refits_when_the_controller_does(tmp_path: Path) -> None:
    """An hour and 45 minutes, a 45-minute burst and noise: the CLI's refits are the controller's, at t0
    and then every refit_after(span) (5 minutes while the history is under an hour, span / 12
    after), 19 refits, not the 2 an hourly schedule makes; the period is found before the third
    burst must be planned for (as tests/loop/test_tuning_refits.py measures it)."""
    pol = policy(tmp_path, NAMES)
    specs = {"bursts": bt.Bursts(2700.0, 900.0, rise_s=120.0, base_rps=300.0), "noise": bt.Bursts(amplitude=1.0)}
    trace = bt.make(specs, 1.75, seed=4)
    replay = Replay.of(pol, trace, list(NAMES))
    cfg, t0 = period_config(pol), float(trace.times[0])
    expected, due = [], t0
    for now in replay.ticks:
        if now >= due:
            expected.append(now)
            due = now + refit_after(now - t0, cfg)
    made = controller_refits(pol, trace)
    for w in NAMES:
        assert [at for at, _ in replay.refits[w]] == made[w] == expected
    assert len(expected) == 19
    found = replay.found_at("bursts", 2700.0)
    assert found is not None and 80 * 60.0 <= found <= 97 * 60.0
    assert replay.found_at("noise", 2700.0) is None
