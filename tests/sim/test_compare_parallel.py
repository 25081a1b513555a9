"""`--compare` in worker processes gives the numbers it gives in one process, and says how it
advances (sim/parallel.py, sim/watch.py)."""

from __future__ import annotations

import numpy as np
import pytest

from autoscaler.sim.compare import compare
from autoscaler.sim.engine import default_plan_fn
from autoscaler.sim.parallel import workers_for
from autoscaler.sim.traces import Trace

pytestmark = [pytest.mark.e2e, pytest.mark.slow]  # starts worker processes, replays 22 times


def wavy() -> Trace:
    """Two workloads whose rates rise, fall and cross, so the strategies plan differently."""
    t = np.arange(30) * 60.0
    rates = {"a": 500.0 + 400.0 * np.sin(t / 600.0) ** 2, "b": 300.0 + 250.0 * np.cos(t / 420.0) ** 2}
    return Trace("wavy.csv", t, rates, 60.0)


@pytest.fixture
def two(make_policy):
    return make_policy(
        workloads=[
            {"name": "a", "model": "resnet50", "slo_ms": 40, "rate_rps": 900},
            {"name": "b", "model": "alexnet", "slo_ms": 20, "rate_rps": 550},
        ]
    )


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, int, object]] = []

    def begin(self, labels: list[str]) -> None:
        self.labels = labels

    def started(self, index: int, label: str) -> None:
        self.events.append(("started", index, label))

    def advanced(self, index: int, fraction: float) -> None:
        self.events.append(("advanced", index, fraction))

    def finished(self, index: int) -> None:
        self.events.append(("finished", index, None))


def same(a, b) -> None:
    assert a.label == b.label
    assert a.summary() == b.summary()
    for w in a.capacity:
        assert np.array_equal(a.capacity[w], b.capacity[w]), (a.label, w)
        if a.tick_capacity is not None:  # static peak has no ticks
            assert np.array_equal(a.tick_capacity[w], b.tick_capacity[w]), (a.label, w)
    assert np.array_equal(a.cost_per_hour, b.cost_per_hour)
    assert (a.tick_times is None and b.tick_times is None) or np.array_equal(a.tick_times, b.tick_times)


def test_workers_give_the_numbers_of_one_process(two):
    trace = wavy()
    alone = compare(two, trace, workers=1)
    watch = Recorder()
    side_by_side = compare(two, trace, watch=watch, workers=2)
    assert len(alone) == len(side_by_side) == 11
    for a, b in zip(alone, side_by_side):
        same(a, b)
        assert b.trace is trace  # one trace for every result, as in one process
    assert len({r.cost_total_usd for r in alone}) > 3  # the strategies did differ
    n = len(watch.labels)
    assert {i for k, i, _ in watch.events if k == "started"} == set(range(n))
    assert {i for k, i, _ in watch.events if k == "finished"} == set(range(n))
    assert [v for k, i, v in watch.events if k == "started" and i == 0] == ["igniter/last"]
    assert any(k == "advanced" and 0 < v < 1 for k, _, v in watch.events)


def test_a_plan_function_that_cannot_be_pickled_runs_here(two):
    """A closure cannot be sent to a worker: the runs go one after another in this process."""
    calls = []
    real = default_plan_fn(two)

    def counting(*args):
        calls.append(args[1])
        return real(*args)

    trace = wavy()
    out = compare(two, trace, plan_fn=counting, workers=2)
    assert calls  # planned here, not in a worker
    for a, b in zip(out, compare(two, trace, workers=1)):
        same(a, b)


def test_worker_count_is_bounded_by_runs_and_at_least_one():
    assert workers_for(11, 4) == 4
    assert workers_for(3, 8) == 3
    assert workers_for(11, 0) == 1
    assert 1 <= workers_for(11) <= 11
