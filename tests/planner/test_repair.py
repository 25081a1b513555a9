"""The repair pass's re-plan on other GPU types (try_replace): its quick refusal when it must fail
gives the answer trying would give, and leaves the pool as trying leaves it."""

from __future__ import annotations

import pytest

from autoscaler.planner import Demand, InstanceOption
from autoscaler.planner import repair as repair_mod
from autoscaler.planner.igniter import Config
from autoscaler.planner.repair import try_replace
from autoscaler.planner.shares import predict
from autoscaler.planner.state import Gpu, GpuPool
from autoscaler.planner.tasks import decompose
from tests.planner.conftest import G4, P3

pytestmark = pytest.mark.unit

SMALL = Demand("a", "alexnet", 20.0, 100.0)
NEIGHBOUR = Demand("b", "resnet50", 40.0, 60.0)


def _pool(models, options: list[InstanceOption], on: list[tuple[str, Demand]]) -> tuple[GpuPool, list[Gpu]]:
    """A pool with one floating GPU of the given type per demand, each running that demand alone."""
    fleet = GpuPool(models, options)
    tasks, _ = decompose([d for _, d in on], models, fleet.prices)
    gpus = []
    for (gpu, _), task in zip(on, tasks, strict=True):
        g = fleet.open_floating(gpu)
        size = task.sizes[gpu]
        fleet.set(g, [task], [size], [size.lower], predict(models[gpu], [size], [size.lower]), [False])
        gpus.append(g)
    return fleet, gpus


def _state(fleet: GpuPool) -> tuple[object, ...]:
    """The pool as the plan would be built from it (GPU ids left out: a GPU opened and closed
    again by a failed try uses one up, which changes no order)."""
    gpus = sorted((g.gpu, [t.workload for t in g.tasks], g.shares, g.kept) for g in fleet.open_gpus())
    return gpus, fleet.used, fleet.spare


CASES = {
    # the group on the cheap T4, no V100 open: the first piece would open a V100 dearer than the group
    "dearer type, none open": ([G4, P3], [("t4-synthetic", SMALL)], 0, True),
    # a V100 with room is open: the T4's task can move onto it for nothing, so try it
    "dearer type with an open GPU": ([G4, P3], [("t4-synthetic", SMALL), ("v100", NEIGHBOUR)], 0, False),
    # the group on the dear V100, the T4 cheaper: new T4s may cost less, so try it
    "a cheaper type": ([G4, P3], [("v100", SMALL)], 0, False),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_quick_refusal_is_what_trying_would_give(models, monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    options, on, group, bound = CASES[case]
    quick, gpus = _pool(models, options, on)
    price = quick.prices[gpus[group].gpu]
    others = [g for g in quick.prices if g != gpus[group].gpu]
    assert repair_mod._bound_to_fail(quick, [gpus[group]], others, price) is bound
    quick_ok = try_replace(quick, [gpus[group]], price, Config())

    slow, slow_gpus = _pool(models, options, on)
    monkeypatch.setattr(repair_mod, "_bound_to_fail", lambda *_: False)
    assert try_replace(slow, [slow_gpus[group]], price, Config()) is quick_ok
    assert _state(quick) == _state(slow)


def test_a_task_moves_onto_an_open_gpu_of_a_dearer_type(models) -> None:
    """The case a refusal that ignored open GPUs would get wrong: closing the T4 costs nothing."""
    fleet, gpus = _pool(models, [G4, P3], [("t4-synthetic", SMALL), ("v100", NEIGHBOUR)])
    assert try_replace(fleet, [gpus[0]], fleet.prices["t4-synthetic"], Config()) is True
    assert [sorted(t.workload for t in g.tasks) for g in fleet.open_gpus()] == [["a", "b"]]
