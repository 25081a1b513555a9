"""`igniter run` between ticks: a notice on the interruption queue ticks at once (Service.poll_job),
on the leader only (a standby reads nothing: a receive would hide the message from the leader)."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoscaler.fleet.base import Notice
from autoscaler.fleet.fake import FakeInterruptions
from autoscaler.loop.service.scheduler import Service
from tests.kit.control import write_policy

pytestmark = pytest.mark.unit


def service(tmp_path: Path, state: str = "state.sqlite") -> tuple[Service, FakeInterruptions]:
    path = write_policy(
        tmp_path / "policy.yaml",
        workloads=[{"name": "alex", "model": "alexnet", "slo_ms": 15, "rate_rps": 0}],  # no instance is launched
        agents={"transport": "none"},
        provider={"kind": "local", "state_root": str(tmp_path / "instances")},
        leader={"kind": "local", "lock_dir": str(tmp_path / "locks")},
    )
    svc = Service(path, tmp_path / state, None)
    source = FakeInterruptions()
    svc.controller.deps.interruptions = source
    return svc, source


def ticks(svc: Service) -> int:
    return int(svc.controller.store._db.execute("SELECT COUNT(*) FROM ticks").fetchone()[0])


def test_a_notice_ticks_at_once_and_nothing_else_does(tmp_path: Path) -> None:
    svc, source = service(tmp_path)
    try:
        assert svc.fence.held
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


def test_a_standby_never_reads_the_queue(tmp_path: Path) -> None:
    leader, _ = service(tmp_path)
    try:
        standby, source = service(tmp_path, "standby.sqlite")
        try:
            assert not standby.fence.held
            source.push(Notice(kind="interruption", instance_ids=("i-1",), token="m-1"))
            standby.poll_job()
            assert source.polls == 0 and ticks(standby) == 0 and len(source.pending) == 1
        finally:
            standby.close()
    finally:
        leader.close()


def test_the_queue_is_fenced_like_the_provider() -> None:
    """build_controller wraps the interruption source: receive, done and poll need the lease."""
    import time

    import pytest

    from autoscaler.leader.base import Fence, NotLeader
    from autoscaler.loop.service.wiring import _fenced_interruptions

    inner = FakeInterruptions()
    inner.push(Notice(kind="interruption", instance_ids=("i-1",), token="m-1"))
    lost = _fenced_interruptions(inner, Fence(time.monotonic))
    assert lost is not None
    for call in (lost.receive, lost.poll, lambda: lost.done([])):
        with pytest.raises(NotLeader):
            call()
    held = _fenced_interruptions(inner, Fence.always())
    assert held is not None and held.poll() and [n.token for n in held.receive()] == ["m-1"]


def test_a_receive_refused_at_send_is_no_error(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The term ran out as the poll's ReceiveMessage was sent (loop/service/fence.py's bind_aws): the job
    logs it and ticks nothing; no traceback."""
    from autoscaler.leader.base import LeaseLost

    class Refused(FakeInterruptions):
        def poll(self) -> bool:
            raise LeaseLost("lease lost: sqs ReceiveMessage refused: not the leader (the term of token 1 ran out)")

    svc, _ = service(tmp_path)
    try:
        svc.controller.deps.interruptions = Refused()
        with caplog.at_level("INFO"):
            svc.poll_job()
        assert ticks(svc) == 0
        assert "interruption poll stopped: lease lost" in caplog.text
        assert not [r for r in caplog.records if r.levelname == "ERROR"]
    finally:
        svc.close()
