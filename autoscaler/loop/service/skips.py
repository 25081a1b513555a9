"""The scheduler's expected skips, kept out of the warnings.

Every job runs with max_instances=1, and APScheduler logs a WARNING ("skipped: maximum number of
running instances reached") each time a job comes due while its previous run still goes. For the
watchers polled every second or two (the ready watch, the fast path, the interruption poll) and
the booked early tick, that is the design: the ready watch runs a whole event tick inline, so in
the first half-minute of a fleet coming up it was skipped 16 times, each a warning that said
nothing was wrong (issue 51). Their skips go to DEBUG; the interval tick's stay a warning: a tick
that outlasts scaling.interval_s is worth seeing.
"""

from __future__ import annotations

import logging

EXPECTED = frozenset({"ready-watch", "fast-path", "interruptions", "wake"})  # job ids (scheduler.py)
SCHEDULER_LOGGER = "apscheduler.scheduler"

log = logging.getLogger(__name__)


class ExpectedSkips(logging.Filter):
    """Drops APScheduler's max-instances warning for the jobs in EXPECTED, logging it at DEBUG."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        job_id = getattr(args[0], "id", None) if args else None
        if job_id in EXPECTED and "maximum number of running instances" in str(record.msg):
            log.debug("job %s: skipped while its previous run goes on", job_id)
            return False
        return True


def quiet_expected_skips() -> None:
    """Install the filter on APScheduler's logger, once per process."""
    logger = logging.getLogger(SCHEDULER_LOGGER)
    if not any(isinstance(f, ExpectedSkips) for f in logger.filters):
        logger.addFilter(ExpectedSkips())
