"""Layout servers -> the `igniter-agent apply` body for one instance (the agent owns that contract). Pure."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agents.spec import Assignment, ServerSpec
from autoscaler.core.layout.layout_types import PlannedServer


def assignment_json(
    servers: Iterable[PlannedServer], generation: int, port_base: int, host: str = "127.0.0.1"
) -> dict[str, Any]:
    """`igniter-agent apply` input for one instance, built as the agent's own model of it
    (agents/spec.py Assignment: the agent side owns that contract) and validated on the way, so
    the autoscaler never describes the JSON a second time nor sends what an agent would reject.
    `host` is the address its servers bind: the instance's own address, where a gateway on
    another host reaches them (loopback for local instances)."""
    specs = [
        ServerSpec(
            name=s.name,
            workload=s.workload,
            model_dir=s.model_dir,
            batch=s.batch,
            mps_percent=100.0 if s.mig_profile is not None else round(s.mps_percent, 4),
            gpu_index=s.gpu_index,
            port=port_base + s.index,
            host=host,
            max_queue_delay_ms=s.max_queue_delay_ms,
            **_slice(s),
        )
        for s in sorted(servers, key=lambda v: v.index)
    ]
    return Assignment(generation=generation, servers=specs).model_dump(mode="json", exclude_unset=True)


def _slice(s: PlannedServer) -> dict[str, Any]:
    """A server on a MIG GPU names its slice and its process count (agents/spec.py); inside the
    slice its processes run without an MPS thread limit (100 %), as the measured rows were taken.
    The layout's mps_percent there is the slice's share of the GPU, for the per-GPU sums only."""
    out: dict[str, Any] = {"processes": s.processes} if s.processes != 1 else {}
    if s.mig_profile is not None and s.mig_start is not None:
        out |= {"mig_profile": s.mig_profile, "mig_start": s.mig_start}
    return out
