"""Service.tick_job books the early tick a report asks for, and skips a tick while one runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from apscheduler.schedulers.background import BackgroundScheduler

from autoscaler.loop.service.scheduler import Service
from tests.kit.control import Clock, make_controller, make_policy

pytestmark = pytest.mark.unit


def service(tmp_path: Path) -> Service:
    policy = make_policy(
        tmp_path,
        scaling={
            "interval_s": 30,
            "boot_s": 180,
            "settle_s": 5,
            "headroom": 0.0,
            "forecast": "last",
            "scale_down_delay_s": 600,
        },
    )
    svc = Service(tmp_path / "policy.yaml", tmp_path / "state.sqlite", None)  # local provider: nothing launched yet
    svc.controller.store.close()
    svc.controller = make_controller(policy, Clock(2_000_000_000.0))[0]  # fakes on an injected clock
    svc.scheduler = BackgroundScheduler()  # not started: jobs stay pending
    return svc


def test_tick_job_books_a_wake_job_at_wake_at(tmp_path: Path) -> None:
    svc = service(tmp_path)
    svc.tick_job()
    job = svc.scheduler.get_job("wake")  # type: ignore[union-attr]
    assert job is not None and job.trigger.run_date.timestamp() == 2_000_000_000.0 + 180.0
    svc.close()


def test_a_tick_in_progress_skips_the_next(tmp_path: Path) -> None:
    svc = service(tmp_path)
    with svc.ticking:
        svc.tick_job()
    assert svc.controller.store.open_records() == [] and svc.scheduler.get_job("wake") is None  # type: ignore[union-attr]
    svc.close()
