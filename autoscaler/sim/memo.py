"""A replay's plan function, memoised (MemoPlanner)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from autoscaler.config.policy import Policy
from autoscaler.loop.tick import PlanFn
from autoscaler.planner.types import Plan


class MemoPlanner:
    """The plan function with its answers remembered. Planners are pure (docs/planner.md), so a tick that
    asks the same question as an earlier one (same rates, corrections, caps and current plan; the
    common case while a trace row's rate holds) gets the same plan without planning again."""

    def __init__(self, fn: PlanFn, size: int = 256) -> None:
        self.fn, self.size = fn, size
        self.memo: dict[tuple[Any, ...], Plan] = {}
        self.hits = self.misses = 0

    def __call__(
        self,
        policy: Policy,
        rates: Mapping[str, float],
        corrections: Mapping[str, float],
        caps: Mapping[str, int],
        current: Plan | None,
    ) -> Plan:
        key = (tuple(sorted(rates.items())), tuple(sorted(corrections.items())), tuple(sorted(caps.items())), current)
        plan = self.memo.get(key)
        if plan is None:
            self.misses += 1
            plan = self.memo[key] = self.fn(policy, rates, corrections, caps, current)
            if len(self.memo) > self.size:
                self.memo.pop(next(iter(self.memo)))
        else:
            self.hits += 1
        return plan
