"""`igniter run` between ticks: a notice on the interruption queue ticks at once (Service.poll_job)."""

from __future__ import annotations

from pathlib import Path

from autoscaler.fleet.base import Notice
from autoscaler.fleet.fake import FakeInterruptions
from autoscaler.loop.service import Service
from tests.kit.control import write_policy


def service(tmp_path: Path) -> tuple[Service, FakeInterruptions]:
    path = write_policy(
        tmp_path / "policy.yaml",
        workloads=[{"name": "alex", "model": "alexnet", "slo_ms": 15, "rate_rps": 0}],  # no instance is launched
        agents={"transport": "none"},
        provider={"kind": "local", "state_root": str(tmp_path / "instances")},
    )
    svc = Service(path, tmp_path / "state.sqlite", None)
    source = FakeInterruptions()
    svc.controller.deps.interruptions = source
    return svc, source


def ticks(svc: Service) -> int:
    return int(svc.controller.store._db.execute("SELECT COUNT(*) FROM ticks").fetchone()[0])


def test_a_notice_ticks_at_once_and_nothing_else_does(tmp_path: Path) -> None:
    svc, source = service(tmp_path)
    try:
        svc.poll_job()
        assert ticks(svc) == 0
        source.push(Notice(kind="ignored", detail="state running", token="m-0"))
        svc.poll_job()
        assert ticks(svc) == 0  # names no instance
        source.push(Notice(kind="interruption", instance_ids=("i-1",), token="m-1"))
        svc.poll_job()
        assert ticks(svc) == 1 and source.pending == []  # the tick received and deleted both
        svc.poll_job()
        assert ticks(svc) == 1
    finally:
        svc.close()
