"""What surge.py takes and gives: the surge budget, the instances it may use, its plan, and the
Breach a policy limit causes. Pure records; the allocation is surge.py's."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from autoscaler.core.layout.layout_types import PlannedServer
from autoscaler.core.rollout.rollout_types import EPS, Judge

SURGE_SLOT = re.compile(r"-surge(\d+)$")


def is_surge_slot(slot: str) -> bool:
    return SURGE_SLOT.search(slot) is not None


def surge_budget(setting: int | str | None, fleet_size: int) -> int:
    """Surge instances allowed at once: an int, "N%" of the planned fleet (rounded up, as
    Kubernetes rounds maxSurge), or None for the default max(1, 10 %)."""
    if setting is None:
        return max(1, math.ceil(0.1 * fleet_size - EPS))
    if isinstance(setting, str):
        return math.ceil(float(setting.rstrip("%")) / 100.0 * fleet_size - EPS)
    return int(setting)


@dataclass(frozen=True, slots=True, kw_only=True)
class TypeInfo:
    name: str
    gpu: str
    gpus: int
    price_per_hour: float
    max_instances: int | None = None
    # On a MIG GPU type: each slice profile's allowed starts (config/mig.py), so a stand-in for a
    # slice can go wherever such a slice fits on another GPU, not only at its planned start.
    mig_starts: tuple[tuple[str, tuple[int, ...]], ...] = ()

    def starts(self, profile: str) -> tuple[int, ...]:
        """The allowed starts of a slice profile on this type's GPU (() off MIG or unknown)."""
        return next((s for p, s in self.mig_starts if p == profile), ())


@dataclass(frozen=True, slots=True, kw_only=True)
class SurgeSlot:
    """A live surge instance; a ready one's GPUs are part of the Tick."""

    slot: str
    instance_type: str
    ready: bool
    since: float = 0.0  # launch time: of two instances booting, the one launched first is ready first


@dataclass(frozen=True, slots=True, kw_only=True)
class Breach:
    """Servers removed before their replacements serve because a policy limit left no other way."""

    slot: str
    gpu: int
    servers: tuple[str, ...]
    workloads: tuple[str, ...]
    limit: str  # max_surge | max_instances | max_cost_per_hour
    detail: str

    def to_json(self) -> dict[str, object]:
        return {
            "slot": self.slot,
            "gpu": self.gpu,
            "servers": list(self.servers),
            "workloads": list(self.workloads),
            "limit": self.limit,
            "detail": self.detail,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class SurgeInput:
    fleet: str
    types: Mapping[str, TypeInfo]  # every instance type of the policy
    budget: int  # surge instances allowed at once
    slots: Sequence[SurgeSlot]  # live surge instances
    live_by_type: Mapping[str, int]  # live instances per type, launches of this tick included
    max_instances: int | None = None  # the most instances the fleet may hold (scaling.max_instances)
    cost_per_hour: float  # the fleet's hourly cost, launches of this tick included
    max_cost_per_hour: float | None
    slot_tops: Mapping[str, int] = field(default_factory=dict)  # the slot names ever used, as LayoutInput's
    taken_slots: frozenset[str] = frozenset()  # ... and names besides (live slots)
    names: frozenset[str]  # server names in use (layout and applied)
    judge: Judge
    frozen: bool = False  # nothing changes and nothing is on its way: a busy budget never frees up
    # Planned instances booting or launched this tick: (slot, type, their planned servers). Room
    # they will have to spare takes a stand-in before a surge instance is launched (it is ready as
    # soon as a new surge instance would be, and costs nothing extra).
    booting: Sequence[tuple[str, str, tuple[PlannedServer, ...]]] = ()
    # Instances the layout no longer wants (not surge instances), booting or ready: each may stay
    # as a surge instance for stand-ins (module docstring, 4) instead of being retired.
    spare: Sequence[SurgeSlot] = ()
    # Planned servers on instances not ready yet: (server, instance type, the instance's launch
    # time, inf if launched this tick), for capacity that serves sooner (module docstring).
    late: Sequence[tuple[PlannedServer, str, float]] = ()
    burst: bool = True  # stand-ins for late servers may start in free share of ready GPUs (bursting.py)
    burst_only: bool = False  # the fleet is at rest but for instances booting: bursts, and nothing else


@dataclass(frozen=True, slots=True, kw_only=True)
class SurgePlan:
    launches: tuple[tuple[str, str, str], ...] = ()  # (slot, instance type, reason)
    keep: frozenset[str] = frozenset()  # surge slots still needed
    breaches: tuple[Breach, ...] = ()
    notes: tuple[str, ...] = ()
    stand_ins: tuple[str, ...] = ()  # started this tick
    bursts: tuple[str, ...] = ()  # of those, the ones started in free share for a short workload
