"""The layout's records: slots, planned servers, and what naming needs. Pure.

The lowest module of core/layout/: what a layout *is* (a Layout of SlotSpecs holding
PlannedServers, its JSON form, the plan it realises), apart from how one is made from a plan
(layout.py), which slot an instance becomes (slots.py) and which running servers may stay as they
run (resize.py). Those three import these records; nothing here imports them, so the imports run
one way.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field, fields
from typing import Any

from autoscaler.config.offerings import ON_DEMAND, CapacityType, offering_key
from autoscaler.planner.types import GpuOut, InstanceOut, PlacementOut, Plan, Unplaced

JUDGED_DIGITS = 6  # a share's digits as a judgement reads it (PlannedServer.judged_as)


@dataclass(frozen=True, slots=True, kw_only=True)
class PlannedServer:
    """One inference server on a slot: what the agent is told to run."""

    name: str
    workload: str
    model: str
    gpu_index: int
    index: int  # port = the instance's port base + index
    batch: int
    mps_percent: float
    rate_rps: float = 0.0
    predicted_latency_ms: float = 0.0
    predicted_throughput_rps: float = 0.0
    model_dir: str = ""
    max_queue_delay_ms: float = 0.0
    replaces: str = ""  # the running server this one resizes on the same GPU: it takes over that one's load
    address: str = ""  # host:port where the gateway reaches it; recorded when its agent is told to run it
    mig_profile: str | None = None  # on a MIG GPU: the slice it runs in (docs/planner.md), cut at mig_start
    mig_start: int | None = None
    processes: int = 1  # MPS copies of the workload in that slice (1 off MIG)
    # agent_key's answer, made at its first call: the servers are frozen, and reconcile, rollout and
    # the layout ask it of each server many times a tick. Not a field of the record (no init, no
    # comparison, no JSON); replace() makes a new server, which makes its own.
    _agent_key: tuple[Any, ...] | None = field(default=None, init=False, repr=False, compare=False)
    _judged: tuple[Any, ...] | None = field(default=None, init=False, repr=False, compare=False)  # judged_as's

    def to_json(self) -> dict[str, Any]:
        """Every field by name, in declaration order: dataclasses.asdict's answer for these flat
        fields, without its recursive copy (a layout is serialised every tick)."""
        return {name: getattr(self, name) for name in SERVER_FIELDS}

    def agent_key(self) -> tuple[Any, ...]:
        """What the agent sees; a change here needs a reconfigure (rates and predictions do not)."""
        key = self._agent_key
        if key is None:
            key = self._make_agent_key()
            object.__setattr__(self, "_agent_key", key)
        return key

    def judged_as(self) -> tuple[Any, ...]:
        """What a judgement reads of the server (colocation.server_tuple at JUDGED_DIGITS): its
        workload, model, batch, share rounded, and MIG slice. Made at its first call, like
        agent_key: a stand-in's trials ask it of each server on each GPU they try."""
        key = self._judged
        if key is None:
            mig = (
                (self.mig_profile, self.mig_start, self.processes)
                if self.mig_profile is not None and self.mig_start is not None
                else None
            )
            key = (self.workload, self.model, self.batch, round(self.mps_percent, JUDGED_DIGITS), mig)
            object.__setattr__(self, "_judged", key)
        return key

    def _make_agent_key(self) -> tuple[Any, ...]:
        return (
            self.name,
            self.workload,
            self.model_dir,
            self.gpu_index,
            self.index,
            self.batch,
            round(self.mps_percent, 4),
            round(self.max_queue_delay_ms, 3),
            self.mig_profile,
            self.mig_start,
            self.processes,
        )


SERVER_FIELDS = tuple(f.name for f in fields(PlannedServer) if f.init)


@dataclass(frozen=True, slots=True)
class SlotSpec:
    slot: str
    instance_type: str
    price_per_hour: float
    gpus: tuple[str, ...]  # GPU type name per index
    servers: tuple[PlannedServer, ...]
    _: KW_ONLY
    capacity_type: CapacityType = ON_DEMAND

    @property
    def offering(self) -> str:
        return offering_key(self.instance_type, self.capacity_type)


@dataclass(frozen=True, slots=True)
class Layout:
    """The fleet the controller converges to: slots with servers, and what the plan left out."""

    planner: str
    slots: tuple[SlotSpec, ...]
    unplaced: tuple[Unplaced, ...] = ()
    rates: Mapping[str, float] = field(default_factory=dict)  # the demand each workload was planned for

    @property
    def cost_per_hour(self) -> float:
        return round(sum(s.price_per_hour for s in self.slots), 6)

    def slot(self, name: str) -> SlotSpec | None:
        return next((s for s in self.slots if s.slot == name), None)

    def servers(self) -> list[tuple[str, PlannedServer]]:
        return [(s.slot, srv) for s in self.slots for srv in s.servers]

    def capacity(self) -> dict[str, float]:
        """Predicted throughput per workload: what the layout can carry."""
        out: dict[str, float] = {}
        for _, srv in self.servers():
            out[srv.workload] = out.get(srv.workload, 0.0) + srv.predicted_throughput_rps
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "planner": self.planner,
            "cost_per_hour": self.cost_per_hour,
            "rates": dict(self.rates),
            "slots": [
                {
                    "slot": s.slot,
                    "instance_type": s.instance_type,
                    "capacity_type": s.capacity_type,
                    "price_per_hour": s.price_per_hour,
                    "gpus": list(s.gpus),
                    "servers": [v.to_json() for v in s.servers],
                }
                for s in self.slots
            ],
            "unplaced": [u.to_json() for u in self.unplaced],
        }


def layout_from_json(data: Mapping[str, Any]) -> Layout:
    """Inverse of Layout.to_json (the store keeps layouts as JSON)."""
    slots = tuple(
        SlotSpec(
            s["slot"],
            s["instance_type"],
            float(s["price_per_hour"]),
            tuple(s["gpus"]),
            tuple(PlannedServer(**v) for v in s["servers"]),
            capacity_type=s.get("capacity_type", ON_DEMAND),
        )
        for s in data["slots"]
    )
    unplaced = tuple(Unplaced(u["workload"], u["reason"]) for u in data.get("unplaced", []))
    return Layout(data["planner"], slots, unplaced, dict(data.get("rates", {})))


def layout_to_plan(layout: Layout) -> Plan:
    """The plan a layout realises, in slot order: the `current` the planner re-plans against."""
    instances = tuple(
        InstanceOut(
            s.instance_type,
            s.price_per_hour,
            tuple(
                GpuOut(i, gpu, tuple(_placement(v) for v in s.servers if v.gpu_index == i))
                for i, gpu in enumerate(s.gpus)
            ),
            capacity_type=s.capacity_type,
        )
        for s in layout.slots
    )
    return Plan(layout.planner, instances, layout.unplaced)


def _placement(srv: PlannedServer) -> PlacementOut:
    return PlacementOut(
        srv.workload,
        srv.model,
        srv.batch,
        srv.mps_percent,
        srv.rate_rps,
        srv.predicted_latency_ms,
        srv.predicted_throughput_rps,
        mig_profile=srv.mig_profile,
        mig_start=srv.mig_start,
        processes=srv.processes,
    )


# (instance type, servers on one GPU) -> per server: (meets its latency budget, predicted throughput)
Judge = Callable[[str, Sequence[PlannedServer]], Sequence[tuple[bool, float]]]


@dataclass(frozen=True, slots=True)
class WorkloadInfo:
    model_dir: str
    max_queue_delay_ms: float


@dataclass(frozen=True, slots=True, kw_only=True)
class LayoutInput:
    """Everything besides the plan that naming needs."""

    fleet: str
    previous: Layout | None
    extra_slots: Mapping[str, str]  # slot -> offering (offering_key): live slots the previous layout lacks
    # The slot names ever used (none is used again: launch tokens), as the highest number per stem
    # (slots.top_numbers: what the store keeps) and as names besides (a test's, the layout's own)
    slot_tops: Mapping[str, int] = field(default_factory=dict)
    taken_slots: frozenset[str] = frozenset()
    reserved_servers: Mapping[str, frozenset[tuple[str, int]]]  # slot -> (name, index) still running
    workloads: Mapping[str, WorkloadInfo]
    rates: Mapping[str, float]
    running: Mapping[str, tuple[PlannedServer, ...]] = field(default_factory=dict)  # slot -> servers its agent runs
    judge: Judge | None = None  # with it, a resized server that already does its placement's job stays (resize.py)
    booting: tuple[str, ...] = ()  # slots launched whose agent runs nothing yet, the soonest ready first (slots.py)
    short: Mapping[str, float] = field(default_factory=dict)  # workload -> observed rate above its ready capacity


STAND_IN = re.compile(r"-s\d+$")


def is_stand_in(name: str) -> bool:
    """A stand-in (surge.py) is named `<original>-s<k>`; layout servers (`<workload>-<k>`) never end that way."""
    return STAND_IN.search(name) is not None
