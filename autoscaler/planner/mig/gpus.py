"""The MIG planner's working state: slices on GPUs on instances, before they become a Plan. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field

from autoscaler.config.mig import Slot
from autoscaler.planner.mig.segments import Segment
from autoscaler.planner.types import InstanceOption


@dataclass(slots=True)
class Slice:
    workload: str
    model: str
    slot: Slot
    seg: Segment
    kept: bool = False


@dataclass(slots=True)
class Gpu:
    gpu: str
    slices: list[Slice] = field(default_factory=list)

    def cut(self) -> list[Slot]:
        return [s.slot for s in self.slices]

    def load(self, workload: str) -> float:
        """The throughput `workload`'s slices on this GPU serve: what it loses with this GPU."""
        return sum(s.seg.throughput_rps for s in self.slices if s.workload == workload)


@dataclass(slots=True)
class Inst:
    option: InstanceOption
    gpus: list[Gpu]
