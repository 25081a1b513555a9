"""APScheduler's "skipped: maximum number of running instances reached" is a warning only where
it means something: a watcher polled every second that is skipped while its previous run (an
event tick run inline) goes on is the design and logs at DEBUG (16 warnings in the first
half-minute of `igniter run`, issue 51); the interval tick outlasting its interval still warns."""

from __future__ import annotations

import logging
import threading
from collections import Counter

import pytest
from apscheduler.events import EVENT_JOB_MAX_INSTANCES, JobSubmissionEvent
from apscheduler.schedulers.background import BackgroundScheduler

from autoscaler.loop.service.skips import SCHEDULER_LOGGER, quiet_expected_skips

pytestmark = pytest.mark.unit


def test_a_watchers_skips_are_debug_and_a_long_ticks_skips_still_warn(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    quiet_expected_skips()
    quiet_expected_skips()  # once per process, however often a service starts
    assert len(logging.getLogger(SCHEDULER_LOGGER).filters) == 1
    release, skipped = threading.Event(), Counter[str]()
    enough = threading.Event()

    def count(event: JobSubmissionEvent) -> None:
        skipped[event.job_id] += 1
        if min(skipped["tick"], skipped["ready-watch"]) >= 3:
            enough.set()

    scheduler = BackgroundScheduler(job_defaults={"coalesce": True, "max_instances": 1})
    scheduler.add_listener(count, EVENT_JOB_MAX_INSTANCES)
    for job_id in ("tick", "ready-watch"):  # each run blocks until released: every later one is skipped
        scheduler.add_job(release.wait, "interval", seconds=0.05, id=job_id, name=job_id, kwargs={"timeout": 10})
    scheduler.start()
    try:
        assert enough.wait(10), skipped
    finally:
        release.set()
        scheduler.shutdown(wait=True)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert any('"tick' in w and "maximum number of running instances" in w for w in warnings), warnings
    assert not any("ready-watch" in w or "ready_watch" in w for w in warnings), warnings
    assert any("job ready-watch: skipped" in r.getMessage() and r.levelno == logging.DEBUG for r in caplog.records)
