"""planner/memo.py: the last few plans by question give the very answers the plan function gives."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.model.perfmodel import load_perf_model
from autoscaler.planner import Demand, Plan, make_plan
from autoscaler.planner.memo import RecentPlans
from tests.conftest import PROFILES
from tests.kit.examples import examples
from tests.planner.conftest import P3

MODELS = {"v100": load_perf_model(PROFILES / "v100.yaml")}
SLO = {"a": ("alexnet", 500.0), "r": ("resnet50", 400.0), "v": ("vgg19", 200.0)}
POLICIES = (object(), object())  # a plan function is asked with a policy, told apart by identity


class Counted:
    """A pure plan function (make_plan on the rates asked) that counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(
        self, policy: Any, rates: Mapping[str, float], corrections: Mapping[str, float], caps: Any, current: Any
    ) -> Plan:
        self.calls += 1
        demands = [Demand(w, SLO[w][0], SLO[w][1], r, corrections.get(w, 1.0)) for w, r in rates.items()]
        option = replace(P3, max_instances=caps["p3"]) if caps else P3
        return make_plan(demands, [option], MODELS, current=current)


rates_st = st.dictionaries(st.sampled_from(sorted(SLO)), st.sampled_from([10.0, 40.0, 40, 120.0]), min_size=1)
corrections_st = st.sampled_from([{}, {"a": 1.2}])
caps_st = st.sampled_from([{}, {"p3": 3}])


@pytest.mark.property
@settings(max_examples=examples(25), deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(POLICIES), rates_st, corrections_st, caps_st, st.booleans()), min_size=1, max_size=8
    ),
    st.integers(1, 4),
)
def test_kept_answers_are_the_answers_of_the_function(asks: list[tuple[Any, ...]], size: int) -> None:
    """Random questions, many repeated (a current plan is one the memo gave earlier): every answer
    equals the function's own for that question, and a question just asked is not planned again."""
    fn, direct = Counted(), Counted()
    memo = RecentPlans(fn, size)
    answers: list[Plan] = []
    for policy, rates, corrections, caps, with_current in asks:
        current = answers[-1] if with_current and answers else None
        for _ in range(2):
            got = memo(policy, rates, corrections, caps, current)
            want = direct(policy, rates, corrections, caps, current)
            assert got == want and got.to_json() == want.to_json()
        answers.append(got)
    assert fn.calls <= len(asks) < direct.calls


@pytest.mark.unit
def test_a_question_that_differs_in_any_way_a_planner_could_see_is_planned_again() -> None:
    fn = Counted()
    memo = RecentPlans(fn)
    rates = {"a": 40.0, "r": 10.0}
    first = memo(POLICIES[0], rates, {}, {}, None)
    assert memo(POLICIES[0], dict(rates), {}, {}, None) is first and fn.calls == 1
    memo(POLICIES[1], rates, {}, {}, None)  # another policy object
    memo(POLICIES[0], {"r": 10.0, "a": 40.0}, {}, {}, None)  # another order
    memo(POLICIES[0], {"a": 40, "r": 10.0}, {}, {}, None)  # 40 is not 40.0 to a planner that copies it
    memo(POLICIES[0], rates, {"a": 1.2}, {}, None)
    memo(POLICIES[0], rates, {}, {"p3": 3}, None)
    memo(POLICIES[0], rates, {}, {}, first)  # a current plan
    assert fn.calls == 7
    memo(POLICIES[0], rates, {}, {}, make_plan([], [P3], MODELS))  # another current plan
    memo(POLICIES[0], rates, {}, {}, first)  # kept still (one of the last four)
    assert fn.calls == 8


@pytest.mark.unit
def test_only_the_last_size_questions_are_kept() -> None:
    fn = Counted()
    memo = RecentPlans(fn, size=2)
    for r in (10.0, 20.0, 30.0, 10.0):
        memo(POLICIES[0], {"a": r}, {}, {}, None)
    assert fn.calls == 4  # 10.0 was forgotten by the time it was asked again
    memo(POLICIES[0], {"a": 30.0}, {}, {}, None)
    assert fn.calls == 4
