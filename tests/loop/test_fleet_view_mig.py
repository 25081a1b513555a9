"""fleet_view.held_slices: the MIG slices an agent reports that no server of its assignment runs in
(an old slice whose server is still stopping, or a slice the agent did not create)."""

from __future__ import annotations

import pytest

from autoscaler.core.fleet.lifecycle import Record, State
from autoscaler.core.layout.layout_types import PlannedServer
from autoscaler.loop.tick.fleet_view import held_slices, live_records
from autoscaler.loop.tick.records import Observation
from autoscaler.rates.reader import Reading
from autoscaler.transport.base import parse_status

pytestmark = pytest.mark.unit


def test_slices_no_assigned_server_runs_in_are_held() -> None:
    rec = Record(slot="s0", attempt=0, instance_type="a100", state=State.READY, created_at=0.0, updated_at=0.0)
    b0 = PlannedServer(
        name="b-0",
        workload="b",
        model="m",
        gpu_index=0,
        index=0,
        batch=8,
        mps_percent=42.0,
        mig_profile="3g.40gb",
        mig_start=4,
    )
    fleet = live_records([rec], {("s0", 0): (3, (b0,))})
    slices = [
        {"profile": "3g.40gb", "start": 4, "uuid": "MIG-b", "owned": True, "state": "ready", "servers": ["b-0"]},
        {"profile": "3g.40gb", "start": 0, "uuid": "MIG-a", "owned": True, "state": "ready", "servers": ["a-0"]},
        {"profile": "4g.40gb", "start": 0, "uuid": None, "owned": True, "state": "waiting", "servers": ["a-1"]},
    ]
    status = parse_status(
        {"generation": 3, "servers": [], "mig": {"enabled": True, "gpus": [{"index": 0, "slices": slices}]}}
    )
    obs = Observation(now=0.0, instances={}, statuses={"s0": status}, reading=Reading({}, {}, frozenset()))
    assert held_slices(fleet, obs) == {"s0": ((0, "3g.40gb", 0),)}  # a-0's: not assigned, still there
    assert (
        held_slices(fleet, Observation(now=0.0, instances={}, statuses={}, reading=Reading({}, {}, frozenset()))) == {}
    )
