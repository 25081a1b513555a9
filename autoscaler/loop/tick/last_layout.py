"""The last tick's layout, given again when a tick asks with the same plan and the same inputs.

While a cheaper plan waits out scale_down_delay_s, a tick usually chooses the hold plan it chose the
tick before (the same Plan object: plans are memoised per question) for the same previous layout
(the store's newest: the Layout saved, or its row parsed after a restart; the same object until a
new row is written) at the same rates: then layout_from_plan, a pure function, would make the same
layout again (about half the ticks of the ServeGen replay, a tenth of their time). The inputs are
compared so that "the same" means what layout_from_plan can tell apart: the plan, the previous
layout and the judge by identity; what it copies into the layout (rates, workload facts, the servers
agents run) by repr, which tells 1 from 1.0, -0.0 from 0.0 and one key order from another; what it
only looks things up in or collects into sets (names and slots taken) by equality.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import Any

from autoscaler.core.layout.layout import layout_from_plan
from autoscaler.core.layout.layout_types import Layout, LayoutInput
from autoscaler.planner.types import Plan


def same_input(a: LayoutInput, b: LayoutInput) -> bool:
    """Whether layout_from_plan is bound to give the same layout for `a` as for `b`: every field
    compared as COMPARE says (tests/loop/test_last_layout.py fails for a field it does not name)."""
    return all(COMPARE[f.name](getattr(a, f.name), getattr(b, f.name)) for f in fields(LayoutInput))


def _same_copied(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return a is b or repr(a) == repr(b)


def _same_running(a: Mapping[str, tuple[Any, ...]], b: Mapping[str, tuple[Any, ...]]) -> bool:
    """The store hands out the same parsed tuples while an agent's assignment stays (loop/state/store.py)."""
    if list(a) != list(b):
        return False
    return all(a[k] is b[k] or repr(a[k]) == repr(b[k]) for k in a)


class LastLayout:
    """layout_from_plan with its last answer remembered (one entry: the case is the tick before)."""

    def __init__(self) -> None:
        self._last: tuple[Plan, LayoutInput, Layout] | None = None

    def __call__(self, plan: Plan, inp: LayoutInput) -> Layout:
        last = self._last
        if last is not None and last[0] is plan and same_input(last[1], inp):
            return last[2]
        layout = layout_from_plan(plan, inp)
        self._last = (plan, inp, layout)
        return layout


# How each LayoutInput field is told apart (see the module docstring).
COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "fleet": operator.eq,
    "previous": operator.is_,
    "extra_slots": operator.eq,
    "slot_tops": operator.eq,
    "taken_slots": operator.eq,
    "reserved_servers": operator.eq,
    "workloads": _same_copied,
    "rates": _same_copied,
    "running": _same_running,
    "judge": operator.is_,
    "booting": operator.eq,  # a tuple: its order is the order slots are matched in
    "short": _same_copied,
}
