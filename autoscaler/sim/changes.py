"""Which trace rows a change of plan made short (`reconfig_short_steps`), as the replay goes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from autoscaler.loop.controller import TickReport


class Moves:
    """What changes of plan did to capacity, for `reconfig_short_steps`. A change begins at a tick
    that brings a new layout (or, at rest, any work to do) and lasts until the fleet is at rest
    again (TickReport.converged); every row meanwhile is judged against the capacity the fleet had
    just before that tick (NaN for rows at rest). A layout that follows another before the first
    is done starts a new change: a workload planned to grow that grows late is a forecast's
    shortfall (it never had the capacity), one that lost capacity it had is the change's.
    Also counts the ticks where a policy limit broke the invariant (TickReport.breaches), by limit."""

    def __init__(self, names: list[str], n: int) -> None:
        self.base = {w: np.full(n, np.nan) for w in names}
        self.last: dict[str, float] = {}
        self.pre: dict[str, float] = {}
        self.change: dict[str, float] | None = None
        self.layout: Any = None
        self.breaches: dict[str, int] = {}

    def begin(self) -> None:
        self.pre = dict(self.last)

    def end(self, report: TickReport) -> None:
        layout = _signature(report.layout)
        if report.converged:
            self.change = None
        elif self.change is None or layout != self.layout:
            self.change = self.pre
        self.layout = layout
        for b in report.breaches:
            self.breaches[b["limit"]] = self.breaches.get(b["limit"], 0) + 1

    def record(self, lo: int, hi: int, cap: Mapping[str, float]) -> None:
        for w, arr in self.base.items():
            arr[lo:hi] = np.nan if self.change is None else self.change.get(w, 0.0)
        self.last = dict(cap)


def _signature(layout: Any) -> Any:
    if layout is None:
        return None
    return tuple((s.slot, tuple(sorted(v.agent_key() for v in s.servers))) for s in layout.slots)
