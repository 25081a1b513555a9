"""core/layout/resize.py: a running server stays as it runs only where its neighbours still do their job,
and the layout then says what those neighbours really carry."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from autoscaler.core.layout.layout import layout_from_plan
from autoscaler.core.layout.layout_types import LayoutInput, PlannedServer, WorkloadInfo
from autoscaler.core.layout.resize import keep_as_running
from autoscaler.planner.types import GpuOut, InstanceOut, PlacementOut, Plan

pytestmark = pytest.mark.unit


def crowded(instance_type: str, servers: Sequence[PlannedServer]) -> list[tuple[bool, float]]:
    """A judge with interference: 10 req/s per share point, less 0.5 % per point the others hold."""
    total = sum(s.mps_percent for s in servers)
    return [(True, 10.0 * s.mps_percent * (1 - 0.005 * (total - s.mps_percent))) for s in servers]


def server(name: str, workload: str, share: float, rate: float) -> PlannedServer:
    return PlannedServer(
        name=name, workload=workload, model="m", gpu_index=0, index=0, batch=4, mps_percent=share, rate_rps=rate
    )


def test_a_running_server_with_more_share_stays_only_if_its_neighbour_keeps_its_rate() -> None:
    """The plan shrinks a (45 % running, 30 % planned) and plans b at 35 % for 290 req/s, which b
    carries beside a 30 % a (297.5) but not beside the running 45 % one (271.25). Keeping a as it
    runs would leave b short, so a is replaced; with b planned for 250 req/s, a may stay."""
    running_a = server("a-0", "a", 45.0, 200.0)
    for b_rate, stays in ((290.0, False), (250.0, True)):
        new_a, b = server("?0.0", "a", 30.0, 200.0), server("?0.1", "b", 35.0, b_rate)
        out = keep_as_running("t", {0: [new_a, b]}, [(running_a, new_a)], crowded)
        assert ("a-0" in out) is stays
        if stays:
            assert out["a-0"].mps_percent == 45.0 and out["a-0"].predicted_throughput_rps == 450.0 * (1 - 0.005 * 35)


def test_the_layout_rejudges_the_neighbours_of_a_server_that_stays_as_it_runs() -> None:
    """a runs at 45 %; the new plan shrinks it to 30 % and predicts b (35 %) beside that at 120
    req/s. a stays as it runs (it carries its rate and b still carries b's), so the layout says
    what b really gets beside the 45 % a: the judge's 271.25, not the plan's 120 (before, a
    neighbour kept the plan's number and the layout's capacity overstated the fleet's)."""

    def gpu(a_share: float) -> InstanceOut:
        a = PlacementOut("a", "alexnet", 4, a_share, 100.0, 5.0, 120.0)
        return InstanceOut(
            "p3", 3.0, (GpuOut(0, "v100", (a, PlacementOut("b", "resnet50", 4, 35.0, 100.0, 5.0, 120.0))),)
        )

    info = {"a": WorkloadInfo("/models/a", 7.5), "b": WorkloadInfo("/models/b", 20.0)}
    base = LayoutInput(
        fleet="f", previous=None, extra_slots={}, taken_slots=frozenset(), reserved_servers={}, workloads=info, rates={}
    )
    first = layout_from_plan(Plan("x", (gpu(45.0),)), base)
    running = first.slots[0].servers
    again = LayoutInput(
        fleet="f",
        previous=first,
        extra_slots={},
        taken_slots=frozenset({"f-p3-0"}),
        reserved_servers={"f-p3-0": frozenset((s.name, s.index) for s in running)},
        workloads=info,
        rates={},
        running={"f-p3-0": running},
        judge=crowded,
    )
    layout = layout_from_plan(Plan("x", (gpu(30.0),)), again)
    by_name = {s.name: s for _, s in layout.servers()}
    assert by_name["a-0"].mps_percent == 45.0
    assert by_name["a-0"].predicted_throughput_rps == 450.0 * (1 - 0.005 * 35)
    assert by_name["b-0"].predicted_throughput_rps == 350.0 * (1 - 0.005 * 45)
