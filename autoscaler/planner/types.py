"""Typed planner inputs and outputs. The Plan serialises to the JSON contract in docs/planner.md."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from autoscaler.config.offerings import ON_DEMAND, CapacityType, offering_key


@dataclass(frozen=True, slots=True)
class Demand:
    """A workload to plan: its rate is the forecast (already with headroom) the plan must carry."""

    workload: str
    model: str
    slo_ms: float
    rate_rps: float
    correction: float = 1.0  # SLO-guard factor (>= 1) that inflates the model's predicted latency
    _: KW_ONLY
    on_demand_floor: float = 0.0  # share of rate_rps that must sit on on-demand instances (with spot offered)
    gpus: frozenset[str] | None = None  # the GPU types it may be placed on (None: any)


@dataclass(frozen=True, slots=True)
class InstanceOption:
    """An offering the planner may open: an instance type, bought on-demand or as spot. A type with
    a spot price is two options with the same name; `max_instances` caps each offering apart."""

    name: str
    gpu: str
    gpus: int
    price_per_hour: float
    max_instances: int | None = None
    _: KW_ONLY
    capacity_type: CapacityType = ON_DEMAND

    @property
    def key(self) -> str:
        return offering_key(self.name, self.capacity_type)


@dataclass(frozen=True, slots=True)
class PlacementOut:
    workload: str
    model: str
    batch: int
    mps_percent: float
    rate_rps: float
    predicted_latency_ms: float
    predicted_throughput_rps: float

    def to_json(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "model": self.model,
            "batch": self.batch,
            "mps_percent": round(self.mps_percent, 4),
            "rate_rps": round(self.rate_rps, 6),
            "predicted_latency_ms": round(self.predicted_latency_ms, 4),
            "predicted_throughput_rps": round(self.predicted_throughput_rps, 4),
        }


@dataclass(frozen=True, slots=True)
class GpuOut:
    index: int
    gpu: str
    placements: tuple[PlacementOut, ...]

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "gpu": self.gpu, "placements": [p.to_json() for p in self.placements]}


@dataclass(frozen=True, slots=True)
class InstanceOut:
    instance_type: str
    price_per_hour: float
    gpus: tuple[GpuOut, ...]
    _: KW_ONLY
    capacity_type: CapacityType = ON_DEMAND

    @property
    def key(self) -> str:
        return offering_key(self.instance_type, self.capacity_type)

    def to_json(self) -> dict[str, Any]:
        return {
            "instance_type": self.instance_type,
            "capacity_type": self.capacity_type,
            "price_per_hour": self.price_per_hour,
            "gpus": [g.to_json() for g in self.gpus],
        }


@dataclass(frozen=True, slots=True)
class Unplaced:
    workload: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"workload": self.workload, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class Plan:
    """A fleet plan. `moved` counts placements that changed relative to the previous plan, if any."""

    planner: str
    instances: tuple[InstanceOut, ...]
    unplaced: tuple[Unplaced, ...] = ()
    moved: int = 0
    stats: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def cost_per_hour(self) -> float:
        return round(sum(i.price_per_hour for i in self.instances), 6)

    @property
    def gpu_count(self) -> int:
        return sum(len(i.gpus) for i in self.instances)

    def to_json(self) -> dict[str, Any]:
        return {
            "planner": self.planner,
            "cost_per_hour": self.cost_per_hour,
            "instances": [i.to_json() for i in self.instances],
            "unplaced": [u.to_json() for u in self.unplaced],
            "moved": self.moved,
        }
