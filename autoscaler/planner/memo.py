"""A plan function with its last few answers kept: the same question again costs a comparison.

A tick asks the planner for the target rates, and again for the held rates when they differ
(loop/tick/controller.py). While nothing moves (a steady fleet: the same rates, corrections,
caps and current plan as the tick before), each tick asks exactly what the tick before asked:
at 1,000 instances that is 0.1-0.2 s of CPU a tick for the same answer. Plan functions are pure
(docs/planner.md: inputs in, a Plan out, no I/O, no clock), so the answer kept is the answer.

"The same question" is strict, so that a kept answer is never one the function could not have
given: the policy by identity (a reloaded policy is a new object, and asks afresh); the rates,
corrections and caps as ordered items with each value's type (a planner may iterate them in the
order given, and 1 and 1.0 are not told apart by ==); the current plan by equality (Plan's own,
which leaves out `stats`, read by no planner). Only the last `size` questions are kept (a tick
asks two), so the memory does not grow with a run.

A plan function that is not pure (a test's scripted planner that changes its answer over time)
must not be wrapped: the controller does not wrap what it is given; loop/service/wiring.py wraps
the default planner, which is pure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from autoscaler.config.policy import Policy
from autoscaler.planner.types import Plan

PlanFn = Callable[[Policy, Mapping[str, float], Mapping[str, float], Mapping[str, int], Plan | None], Plan]
Question = tuple[Any, ...]


def question(
    rates: Mapping[str, float], corrections: Mapping[str, float], caps: Mapping[str, int]
) -> tuple[Question, Question, Question]:
    """The mappings of a question as ordered (key, value, type) items: equal only if a planner
    iterating them could not tell them apart."""
    return tuple(_items(rates)), tuple(_items(corrections)), tuple(_items(caps))


def _items(values: Mapping[str, Any]) -> list[tuple[str, Any, type]]:
    return [(k, v, type(v)) for k, v in values.items()]


class RecentPlans:
    """`fn` with the answers to its last `size` questions kept (see the module docstring)."""

    def __init__(self, fn: PlanFn, size: int = 4) -> None:
        self.fn, self.size = fn, size
        self._kept: tuple[tuple[Policy, tuple[Question, ...], Plan | None, Plan], ...] = ()
        self.hits = self.misses = 0

    def __call__(
        self,
        policy: Policy,
        rates: Mapping[str, float],
        corrections: Mapping[str, float],
        caps: Mapping[str, int],
        current: Plan | None,
    ) -> Plan:
        asked = question(rates, corrections, caps)
        kept = self._kept  # one read: another thread's call replaces the tuple, never changes it
        for pol, q, cur, plan in kept:
            if pol is policy and q == asked and (cur is current or (cur is not None and cur == current)):
                self.hits += 1
                return plan
        self.misses += 1
        plan = self.fn(policy, rates, corrections, caps, current)
        self._kept = ((policy, asked, current, plan), *kept)[: self.size]
        return plan

    def forget(self) -> None:
        self._kept = ()
