"""The GPU profile format: what `igniter-agent profile` measures and the autoscaler fits its
performance model from (the format is described in policies/profiles/README.md).

The profiler writes it and validates what it writes against these models; the autoscaler reads it
through autoscaler/config/profile.py. It lives on the agent side, with the other wire contracts,
because a GPU VM installs only the agent.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Pos = Annotated[float, Field(gt=0)]
NonNeg = Annotated[float, Field(ge=0)]
Row3 = Annotated[list[Pos], Field(min_length=3, max_length=3)]
Grid3 = Annotated[list[Row3], Field(min_length=3, max_length=3)]


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ColocationSweep(_Frozen):
    """1..5 identical workloads run together: fits power->clock and the scheduling-delay growth."""

    colocated_workloads: list[Annotated[int, Field(ge=1)]]
    power_w: list[Pos]
    sm_clock_mhz: list[Pos]
    idle_time_per_kernel_ms: list[NonNeg]

    @model_validator(mode="after")
    def _same_length(self) -> ColocationSweep:
        n = len(self.colocated_workloads)
        if n < 2 or any(len(v) != n for v in (self.power_w, self.sm_clock_mhz, self.idle_time_per_kernel_ms)):
            raise ValueError("all sweep lists need the same length, at least 2")
        return self


class Hardware(_Frozen):
    max_sm_clock_mhz: Pos
    power_limit_w: Pos
    idle_power_w: Pos
    resource_unit_percent: Annotated[float, Field(gt=0, le=100)]
    pcie_bandwidth_bytes_per_ms: Pos
    memory_mb: Pos | None = None
    colocation_sweep: ColocationSweep


class GridSpec(_Frozen):
    batch_sizes: Annotated[list[Annotated[int, Field(ge=1)]], Field(min_length=3, max_length=3)]
    mps_percent: Annotated[list[Annotated[float, Field(gt=0, le=100)]], Field(min_length=3, max_length=3)]


class PairProbe(_Frozen):
    """Two instances at batch 1, 20 % each: how much the neighbour's L2 traffic slows this one."""

    active_time_solo_ms: Pos
    active_time_colocated_ms: Pos
    power_w: Pos
    sm_clock_mhz: Pos
    interfering_l2_utilization_percent: Pos


class MemorySpec(_Frozen):
    base: NonNeg
    per_batch_item: NonNeg = 0.0


class ModelProfile(_Frozen):
    kernels: Annotated[int, Field(ge=1)]
    input_bytes_per_request: NonNeg
    output_bytes_per_request: NonNeg
    solo_idle_time_ms: NonNeg
    gpu_latency_ms: Grid3
    power_w: Grid3
    sm_clock_mhz: Grid3
    l2_cache_utilization_percent_at_grid_diagonal: Row3
    pair_probe: PairProbe
    memory_mb: MemorySpec | None = None


class Profile(_Frozen):
    """One GPU type's profile, validated on load."""

    gpu: str
    instance_example: str | None = None
    source: str | None = None
    hardware: Hardware
    grid: GridSpec
    models: Annotated[dict[str, ModelProfile], Field(min_length=1)]

    @field_validator("grid")
    @classmethod
    def _increasing(cls, grid: GridSpec) -> GridSpec:
        for name in ("batch_sizes", "mps_percent"):
            vals = getattr(grid, name)
            if list(vals) != sorted(set(vals)):
                raise ValueError(f"{name} must be strictly increasing")
        return grid
