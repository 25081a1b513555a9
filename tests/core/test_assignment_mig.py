"""The agent's assignment for servers on MIG slices: the slice, its process count, no MPS limit
inside it, validated by the agent's own contract on the way."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agents.spec import Assignment
from autoscaler.core.layout.assignment import assignment_json
from autoscaler.core.layout.layout_types import PlannedServer

pytestmark = pytest.mark.unit


def _server(name: str, index: int, **extra: object) -> PlannedServer:
    base = {"workload": "w", "model": "m", "gpu_index": 0, "batch": 8, "mps_percent": 42.8571, "model_dir": "/m"}
    return PlannedServer(name=name, index=index, **(base | extra))  # type: ignore[arg-type]


def test_a_slice_reaches_the_agent_with_its_processes_and_no_mps_limit() -> None:
    mig = _server("w-0", 0, mig_profile="3g.40gb", mig_start=4, processes=2)
    plain = _server("w-1", 1, mps_percent=30.0)
    body = assignment_json([mig, plain], 3, 8100)
    assert body["servers"][0] == {
        "name": "w-0",
        "workload": "w",
        "model_dir": "/m",
        "batch": 8,
        "mps_percent": 100.0,
        "gpu_index": 0,
        "port": 8100,
        "host": "127.0.0.1",
        "max_queue_delay_ms": 0.0,
        "mig_profile": "3g.40gb",
        "mig_start": 4,
        "processes": 2,
    }
    assert not {"mig_profile", "mig_start", "processes"} & set(body["servers"][1])
    assert Assignment.model_validate(body).servers[0].mig_slice() == (0, "3g.40gb", 4)


def test_a_slice_change_is_a_reconfigure() -> None:
    a = _server("w-0", 0, mig_profile="3g.40gb", mig_start=0)
    assert a.agent_key() != _server("w-0", 0, mig_profile="3g.40gb", mig_start=4).agent_key()
    assert a.agent_key() != _server("w-0", 0, mig_profile="3g.40gb", mig_start=0, processes=2).agent_key()


def test_what_the_agent_would_refuse_is_not_sent() -> None:
    with pytest.raises(ValidationError, match="processes"):
        assignment_json([_server("w-0", 0, mig_profile="3g.40gb", mig_start=0, processes=65)], 1, 8100)
