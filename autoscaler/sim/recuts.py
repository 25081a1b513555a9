"""MIG re-cuts in a replay, counted like moves: how many, the surge they used, the rows they left
short (docs/simulate.md, "MIG GPUs").

A *re-cut* is a new layout asking a running GPU for a cut (its set of slices, by profile and
start) other than the one it runs: each slice it no longer wants is destroyed, each new one
created, in the order core/rollout keeps the invariant with (free units first, else a stand-in
elsewhere). One is counted per GPU and per cut asked for, however many ticks it takes; a GPU of an
instance the layout retires, or a new instance's first cut, is no re-cut. Stand-ins are not part
of the cut they run beside (they leave once their move is done).

A change of plan that re-cuts a GPU (sim/changes.Moves: from the tick that brings it until the
fleet is at rest) marks its rows: the rows of it that `reconfig_short_steps` counts are the re-cuts'
shortfall, and the surge instances alive meanwhile (spares held for stand-ins included) are billed
to re-cuts. A change can move MPS servers beside its re-cuts; its surge is all billed to them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from autoscaler.core.layout.layout_types import PlannedServer, is_stand_in
from autoscaler.core.rollout.surge import is_surge_slot
from autoscaler.fleet.sim import Lifetime

GpuKey = tuple[str, int]  # (slot, GPU index)
Cut = frozenset[tuple[str, int]]  # (slice profile, start) per slice


def running_cuts(assigned: Iterable[tuple[str, Iterable[PlannedServer]]]) -> dict[GpuKey, Cut]:
    """Per (slot, GPU) of the (slot, servers) its agents run: the slices the planned servers hold."""
    out: dict[GpuKey, set[tuple[str, int]]] = {}
    for slot, servers in assigned:
        for s in servers:
            if s.mig_profile is not None and s.mig_start is not None and not is_stand_in(s.name):
                out.setdefault((slot, s.gpu_index), set()).add((s.mig_profile, s.mig_start))
    return {k: frozenset(v) for k, v in out.items()}


def planned_cuts(layout: Any) -> dict[GpuKey, Cut]:
    """Per (slot, GPU) of a layout, the cut it plans (empty for a GPU it plans no slice on)."""
    out: dict[GpuKey, Cut] = {(s.slot, i): frozenset() for s in layout.slots for i in range(len(s.gpus))}
    for slot, cut in running_cuts((s.slot, s.servers) for s in layout.slots).items():
        out[slot] = cut
    return out


class Recuts:
    """The re-cuts of one replay (module docstring); Moves drives it tick by tick."""

    def __init__(self, n: int) -> None:
        self.count = 0
        self.rows = np.zeros(n, dtype=bool)  # rows of a change that re-cuts a GPU
        self.asked: dict[GpuKey, Cut] = {}  # the cut last asked of each GPU
        self.running: Mapping[GpuKey, Cut] = {}  # before the tick
        self.under_way = False  # the change under way re-cuts a GPU
        self.surge_hours = 0.0
        self.surge_cost_usd = 0.0
        self.surge_slots: set[str] = set()

    def begin(self, running: Mapping[GpuKey, Cut]) -> None:
        self.running = running

    def end(self, layout: Any, change: bool) -> None:
        """After a tick: count the GPUs the layout re-cuts; `change`: a change is under way."""
        if layout is not None:
            wanted = planned_cuts(layout)
            for key, cut in self.running.items():
                if not cut or key not in wanted:
                    continue
                if wanted[key] != cut and self.asked.get(key) != wanted[key]:
                    self.count += 1
                    self.under_way = change
                self.asked[key] = wanted[key]
        self.under_way = self.under_way and change

    def record(self, lo: int, hi: int) -> None:
        self.rows[lo:hi] = self.under_way

    def bill(self, start: float, end: float, lifetimes: Iterable[Lifetime], spares: frozenset[str]) -> None:
        """The surge instances (and spares) alive in [start, end) while a re-cut is under way."""
        if not self.under_way:
            return
        for life in lifetimes:
            if not (is_surge_slot(life.slot) or life.slot in spares):
                continue
            if life.start < end and (life.end is None or life.end > start):
                hours = ((end if life.end is None else min(end, life.end)) - max(start, life.start)) / 3600.0
                self.surge_hours += hours
                self.surge_cost_usd += hours * life.price_per_hour
                self.surge_slots.add(life.slot)
