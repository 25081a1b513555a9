"""What the act step did in a round (loop/steps/actuator.py, launches.py, pool_step.py): the
tick report's lines, the errors by kind for the metrics, the offerings without capacity."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

log = logging.getLogger("autoscaler.loop.steps.actuator")


@dataclass
class Outcome:
    done: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    capacity: list[str] = field(default_factory=list)  # offerings (offering_key) that reported no capacity
    errors: dict[str, int] = field(default_factory=dict)  # kind -> count, for metrics
    notes: list[str] = field(default_factory=list)  # decisions the tick report shows (backoff, quarantine)
    warm_started: list[tuple[str, int]] = field(default_factory=list)  # (slot, attempt) that started a pool member
    pool_returns: int = 0  # retiring instances stopped into the warm pool instead of terminated

    @property
    def warm_starts(self) -> int:
        return len(self.warm_started)

    def error(self, kind: str, message: str) -> None:
        self.failed.append(message)
        self.errors[kind] = self.errors.get(kind, 0) + 1
        log.warning("%s", message)
