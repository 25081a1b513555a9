"""Measured profiles: a GPU described by measured rows instead of fitted coefficients.

A MIG GPU (A100, H100, H200) is cut into hardware-isolated slices, and a slice's neighbours do not
change its speed, so no interference model is needed: for each model and slice profile the profile
holds what was measured, per (batch, MPS processes of that one model in the slice): one process's
throughput and its latency per batch with its neighbours running (ParvaGPU's table, SC'24).

The planner reads it through autoscaler/model/mig.py (`MigModel`). No row exists for two
different models in one slice, so the format has none.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from autoscaler.config.mig import BUNDLED, MigGeometry

Finite = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class MeasuredRow(BaseModel):
    """One measurement: `processes` copies of one model at `batch` in one slice of `slice`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    slice: str
    batch: Annotated[int, Field(ge=1)]
    processes: Annotated[int, Field(ge=1)]
    throughput_rps: Finite  # of ONE process; the slice serves processes x this
    latency_ms: Finite  # per batch, of one process with its neighbours running

    @property
    def slice_throughput_rps(self) -> float:
        return self.processes * self.throughput_rps


class MeasuredSource(BaseModel):
    """Where the rows came from (recorded by `igniter profile import`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: str = "parvagpu-csv"
    path: str = ""
    files: tuple[str, ...] = ()
    note: str = ""


class MeasuredProfile(BaseModel):
    """A profile of kind `measured`: rows per model, and the GPU's MIG geometry (a bundled one by
    name, or declared inline)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["measured"]
    gpu: str
    geometry: str | MigGeometry
    source: MeasuredSource = Field(default_factory=MeasuredSource)
    models: Annotated[dict[str, Annotated[tuple[MeasuredRow, ...], Field(min_length=1)]], Field(min_length=1)]

    @model_validator(mode="after")
    def _slices_exist(self) -> MeasuredProfile:
        if isinstance(self.geometry, str) and self.geometry not in BUNDLED:
            raise ValueError(f"unknown geometry {self.geometry!r} (bundled: {', '.join(BUNDLED)})")
        mig = self.mig
        for name, rows in self.models.items():
            bad = next((r.slice for r in rows if not mig.has(r.slice)), None)
            if bad is not None:
                raise ValueError(f"models.{name}: slice {bad!r} is not a profile of this GPU's geometry")
        return self

    @property
    def mig(self) -> MigGeometry:
        return BUNDLED[self.geometry] if isinstance(self.geometry, str) else self.geometry
