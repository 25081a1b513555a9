"""layout._running_as_planned matches a slot's placements to the servers that run them exactly as
planned by comparing agent keys without building a server per pair (issue 50). Held here to the
way it was written before: build `_spec(v.name, v.index, ...)` for every running server and compare
its agent key, on servers that differ from a placement in one field at a time."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.core.layout.layout import _running_as_planned, _spec
from autoscaler.core.layout.layout_types import SERVER_FIELDS, PlannedServer, WorkloadInfo, is_stand_in
from autoscaler.planner.types import GpuOut, InstanceOut, PlacementOut
from tests.kit.examples import examples

INFO = {"a": WorkloadInfo("/models/a", 7.5), "b": WorkloadInfo("/models/b", 20.0)}  # "c": none
WORKLOADS = st.sampled_from(["a", "b", "c"])
SHARES = st.sampled_from([30.0, 30.00001, 30.001, 60.0])  # agent keys round shares to 4 places
MIG = st.sampled_from([(None, None, 1), ("1g.5gb", 0, 1), ("1g.5gb", 1, 1), ("1g.5gb", 0, 2)])


def plain(
    inst: InstanceOut, running: tuple[PlannedServer, ...], info: Mapping[str, WorkloadInfo]
) -> tuple[tuple[PlannedServer, ...], list[tuple[GpuOut, PlacementOut]]]:
    """_running_as_planned as it was: a server built for every (placement, running server) pair."""
    free = [v for v in running if not is_stand_in(v.name)]
    same: list[PlannedServer] = []
    left: list[tuple[GpuOut, PlacementOut]] = []
    for g in inst.gpus:
        for p in g.placements:
            cur = next((v for v in free if _spec(v.name, v.index, g.index, p, info).agent_key() == v.agent_key()), None)
            if cur is None:
                left.append((g, p))
                continue
            free.remove(cur)
            same.append(_spec(cur.name, cur.index, g.index, p, info))
    return tuple(same), left


placements = st.builds(
    lambda w, batch, share, mig: PlacementOut(
        w, "alexnet", batch, share, 50.0, 5.0, 100.0, mig_profile=mig[0], mig_start=mig[1], processes=mig[2]
    ),
    WORKLOADS,
    st.sampled_from([4, 8]),
    SHARES,
    MIG,
)
servers = st.builds(
    lambda name, k, w, gi, batch, share, mig, dirq: PlannedServer(
        name=f"{name}-{k}",
        workload=w,
        model="alexnet",
        gpu_index=gi,
        index=k,
        batch=batch,
        mps_percent=share,
        model_dir=dirq[0],
        max_queue_delay_ms=dirq[1],
        mig_profile=mig[0],
        mig_start=mig[1],
        processes=mig[2],
    ),
    st.sampled_from(["a", "b", "c", "a-0"]),  # "a-0-s1": a stand-in
    st.sampled_from([0, 1]).map(lambda k: k if k else 1),
    WORKLOADS,
    st.sampled_from([0, 1]),
    st.sampled_from([4, 8]),
    SHARES,
    MIG,
    st.sampled_from([("/models/a", 7.5), ("/models/b", 20.0), ("", 0.0), ("/models/a", 7.5004)]),
)


@pytest.mark.property
@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.lists(placements, max_size=4), min_size=1, max_size=2), st.lists(servers, max_size=8))
def test_running_as_planned_is_the_spec_comparison(gpus, running) -> None:
    """The same servers kept (equal, in order) and the same placements left, in order."""
    inst = InstanceOut("p3", 3.0, tuple(GpuOut(i, "v100", tuple(ps)) for i, ps in enumerate(gpus)))
    run = tuple(running)
    assert _running_as_planned(inst, run, INFO) == plain(inst, run, INFO)


@pytest.mark.unit
def test_each_field_of_the_agent_key_can_refuse_a_match() -> None:
    """A running server that differs from the placement in any one field the agent sees is not
    kept (the property above would miss a field only if no example differed in it alone)."""
    p = PlacementOut("a", "alexnet", 4, 30.0, 50.0, 5.0, 100.0)
    inst = InstanceOut("p3", 3.0, (GpuOut(0, "v100", (p,)),))
    srv = _spec("a-3", 3, 0, p, INFO)
    assert _running_as_planned(inst, (srv,), INFO)[0] == (srv,)
    for change in (
        {"workload": "b"},
        {"model_dir": "/elsewhere"},
        {"gpu_index": 1},
        {"batch": 8},
        {"mps_percent": 30.001},
        {"max_queue_delay_ms": 7.6},
        {"mig_profile": "1g.5gb"},
        {"mig_start": 0},
        {"processes": 2},
    ):
        other = PlannedServer(**{**{f: getattr(srv, f) for f in SERVER_FIELDS}, **change})
        assert _running_as_planned(inst, (other,), INFO) == ((), [(inst.gpus[0], p)]), change
