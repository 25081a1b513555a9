"""Which trace rows a change of plan made short (`reconfig_short_steps`), as the replay goes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from autoscaler.core.rollout.surge import is_surge_slot
from autoscaler.fleet.sim import Lifetime
from autoscaler.loop.tick.controller import TickReport
from autoscaler.sim.recuts import Cut, GpuKey, Recuts


class Moves:
    """What changes of plan did to capacity, for `reconfig_short_steps`. A change begins at a tick
    that brings a new layout (or, at rest, any work to do) and lasts until the fleet is at rest
    again (TickReport.converged); every row meanwhile is judged against the capacity the fleet had
    just before that tick (NaN for rows at rest). A layout that follows another before the first
    is done starts a new change: a workload planned to grow that grows late is a forecast's
    shortfall (it never had the capacity), one that lost capacity it had is the change's.
    Also counts the ticks where a policy limit broke the invariant (TickReport.breaches), by limit,
    and bills the instances a re-plan no longer wanted that stay as surge instances for stand-ins
    (spares, core/rollout/surge.py) as surge: their slots are not named as surge slots. MIG re-cuts
    are counted apart, with the rows and surge of the changes they belong to (sim/recuts.py)."""

    def __init__(self, names: list[str], n: int) -> None:
        self.base = {w: np.full(n, np.nan) for w in names}
        self.last: dict[str, float] = {}
        self.pre: dict[str, float] = {}
        self.change: dict[str, float] | None = None
        self.layout: Any = None
        self.breaches: dict[str, int] = {}
        self.spares: frozenset[str] = frozenset()  # held as surge since the last tick
        self.spare_hours = 0.0
        self.spare_cost_usd = 0.0
        self.recuts = Recuts(n)

    def begin(self, running: Mapping[GpuKey, Cut] | None = None) -> None:
        """Before a tick; `running`: the MIG cut each ready GPU runs (recuts.running_cuts)."""
        self.pre = dict(self.last)
        self.recuts.begin(running or {})

    def end(self, report: TickReport) -> None:
        layout = _signature(report.layout)
        if report.converged:
            self.change = None
        elif self.change is None or layout != self.layout:
            self.change = self.pre
        self.layout = layout
        self.recuts.end(report.layout, self.change is not None)
        for b in report.breaches:
            self.breaches[b["limit"]] = self.breaches.get(b["limit"], 0) + 1
        self.spares = frozenset(s for s in report.surge_slots if not is_surge_slot(s))

    def bill(self, start: float, end: float, lifetimes: Iterable[Lifetime]) -> None:
        """The spares' hours in [start, end) (most ticks hold none: nothing to scan), and the
        surge of a re-cut under way."""
        self.recuts.bill(start, end, lifetimes, self.spares)
        if not self.spares:
            return
        for life in lifetimes:
            if life.slot in self.spares and life.start <= start and (life.end is None or life.end > start):
                hours = ((end if life.end is None else min(end, life.end)) - start) / 3600.0
                self.spare_hours += hours
                self.spare_cost_usd += hours * life.price_per_hour

    def record(self, lo: int, hi: int, cap: Mapping[str, float]) -> None:
        for w, arr in self.base.items():
            arr[lo:hi] = np.nan if self.change is None else self.change.get(w, 0.0)
        self.recuts.record(lo, hi)
        self.last = dict(cap)


def _signature(layout: Any) -> Any:
    if layout is None:
        return None
    return tuple((s.slot, tuple(sorted(v.agent_key() for v in s.servers))) for s in layout.slots)
