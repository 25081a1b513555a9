"""A replay's plan function, memoised (MemoPlanner), and the plans several replays share (PlanMemo)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

from autoscaler.config.policy import Policy
from autoscaler.loop.tick.records import PlanFn
from autoscaler.planner.kept import Kept
from autoscaler.planner.types import Plan

PLANNED_WORKLOADS_KEPT = 1 << 16  # PlanMemo: workloads in all the questions kept at most

# What `--compare` varies that no plan function reads: the forecast and the headroom only change
# the rates a tick asks for, and the rates are part of every key.
NOT_PLANNED_WITH = {"scaling": {"forecast", "headroom"}}


class PlanMemo:
    """Plans by question, oldest forgotten first beyond `size` of them or `weight` workloads
    among their questions (planner/kept.py: a plan of 1,000 workloads holds some 0.4 MB, and its
    key the current plan besides). One replay has its own; the replays
    of a `--compare` in one process share one (and start from the plans the parent made, e.g. the
    static peak's), so a question one strategy asked is not planned again for the next. Sharing
    never changes a number: a key holds everything the plan function is given (its identity, the
    policy less NOT_PLANNED_WITH, rates, corrections, caps and the current plan), and plan
    functions are pure (docs/planner.md)."""

    def __init__(self, size: int = 256, weight: int = PLANNED_WORKLOADS_KEPT) -> None:
        self.plans: Kept[tuple[Any, ...], Plan] = Kept(size, weight, lambda key: len(key[1]))
        self.hits = self.misses = 0

    def get(self, key: tuple[Any, ...]) -> Plan | None:
        plan = self.plans.get(key)
        if plan is None:
            self.misses += 1
        else:
            self.hits += 1
        return plan

    def put(self, key: tuple[Any, ...], plan: Plan) -> None:
        """Keep `plan`; `key` is (scope, rates, corrections, caps, current) as MemoPlanner makes it."""
        self.plans.put(key, plan)

    def update(self, other: Mapping[tuple[Any, ...], Plan]) -> None:
        """Plans made elsewhere (the parent's, for a worker process)."""
        self.plans.update(other)


def scope_of(fn: PlanFn, policy: Policy) -> tuple[Hashable, str]:
    """The part of a memo key that is fixed for a replay: the plan function itself (by identity:
    two functions never share plans) and what of the policy a plan can depend on."""
    return fn, policy.model_dump_json(exclude=NOT_PLANNED_WITH)


def question(
    rates: Mapping[str, float], corrections: Mapping[str, float], caps: Mapping[str, int], current: Plan | None
) -> tuple[Any, ...]:
    """The part of a memo key that a tick varies (Plan equality leaves out `stats`, which no
    planner reads)."""
    return tuple(sorted(rates.items())), tuple(sorted(corrections.items())), tuple(sorted(caps.items())), current


class MemoPlanner:
    """The plan function with its answers remembered. Planners are pure (docs/planner.md), so a tick that
    asks the same question as an earlier one (same rates, corrections, caps and current plan; the
    common case while a trace row's rate holds) gets the same plan without planning again. The
    policy is fixed per replay (`scope_of`); `memo` may be shared with other replays (PlanMemo)."""

    def __init__(self, fn: PlanFn, policy: Policy, memo: PlanMemo | None = None) -> None:
        self.fn, self.memo, self.policy = fn, memo if memo is not None else PlanMemo(), policy
        self.scope = scope_of(fn, policy)
        self.hits = self.misses = 0

    def __call__(
        self,
        policy: Policy,
        rates: Mapping[str, float],
        corrections: Mapping[str, float],
        caps: Mapping[str, int],
        current: Plan | None,
    ) -> Plan:
        scope = self.scope if policy is self.policy else scope_of(self.fn, policy)
        key = (scope, *question(rates, corrections, caps, current))
        plan = self.memo.get(key)
        if plan is None:
            self.misses += 1
            plan = self.fn(policy, rates, corrections, caps, current)
            self.memo.put(key, plan)
        else:
            self.hits += 1
        return plan
