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
    min_servers: int = 1  # scaling.redundancy: 2 = N+1 servers in different fault domains
    spread: str = "gpu"  # the fault domain two of its servers must not share: "gpu" or "instance"

    @property
    def redundant(self) -> bool:
        return self.min_servers > 1


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
    """One server (or, on a MIG GPU, one slice of `processes` MPS copies of one workload).

    On a MIG GPU `mig_profile`/`mig_start` say where the slice is cut (start in memory-slice units,
    as `nvidia-smi mig -lgipp` prints placements), `batch`/`processes` the measured row it runs,
    and the predictions are that row's (throughput: processes x one process's). `mps_percent`
    there is the slice's share of the GPU's compute slices (3g of 7: 42.86 %), so per-GPU share
    sums keep their meaning; the agent sets no MPS thread limit inside a slice."""

    workload: str
    model: str
    batch: int
    mps_percent: float
    rate_rps: float
    predicted_latency_ms: float
    predicted_throughput_rps: float
    _: KW_ONLY
    mig_profile: str | None = None
    mig_start: int | None = None
    processes: int = 1

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"workload": self.workload, "model": self.model}
        if self.mig_profile is not None:
            out |= {"mig_profile": self.mig_profile, "mig_start": self.mig_start, "processes": self.processes}
        return out | {
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
