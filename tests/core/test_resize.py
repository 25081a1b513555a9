"""core/resize.py: a running server stays as it runs only where its neighbours still do their job."""

from __future__ import annotations

from collections.abc import Sequence

from autoscaler.core.layout import PlannedServer
from autoscaler.core.resize import keep_as_running


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
