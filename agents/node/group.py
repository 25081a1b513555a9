"""One assigned server as the daemon sees it: `processes` copies of one spec, on one port.

On a MIG slice the planner runs several MPS processes of one workload (ParvaGPU's rows measure
a slice by batch and process count), so a server spec may ask for `processes` > 1. The copies
bind the same port with SO_REUSEPORT, so the kernel spreads connections over them and the
gateway still sees one server at one address. Each copy is its own supervised process (its own
restarts, stats file `NAME~i.stats.json` and log); the group is `ready` once every copy is,
`failed` when one is, and drains as one. With one process the group is exactly that process.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agents.node.supervisor import ManagedServer, RestartPolicy, ServerFiles, Starter
from agents.spec import ServerSpec

ORDER = ("failed", "draining", "starting", "stopped", "ready")  # the group shows its worst member's state
COUNTERS = ("requests_total", "items_total", "batches_total", "errors_total", "in_flight", "restarts")


def process_name(name: str, i: int) -> str:
    """Copy i's file name: the spec's own name for the first, `NAME~i` (not a valid server name,
    so it cannot collide with one) for the others."""
    return name if i == 0 else f"{name}~{i}"


class ServerGroup:
    """The ManagedServer interface the daemon uses, over `spec.processes` ManagedServers."""

    def __init__(self, spec: ServerSpec, state_dir: Path, launch: Starter, policy: RestartPolicy, now: float) -> None:
        self.members = [
            ManagedServer(spec, ServerFiles.under(state_dir, process_name(spec.name, i)), launch, policy, now)
            for i in range(spec.processes)
        ]

    @property
    def spec(self) -> ServerSpec:
        return self.members[0].spec

    @spec.setter
    def spec(self, spec: ServerSpec) -> None:
        for member in self.members:
            member.spec = spec

    @property
    def proc(self) -> Any:
        return self.members[0].proc

    @property
    def state(self) -> str:
        return min((m.state for m in self.members), key=ORDER.index)

    def tick(self, now: float, hold: bool = False) -> None:
        for member in self.members:
            member.tick(now, hold)

    def drain(self, now: float, timeout_s: float) -> None:
        for member in self.members:
            member.drain(now, timeout_s)

    def refuse(self, reason: str) -> None:
        for member in self.members:
            member.refuse(reason)

    def holds_port(self) -> bool:
        return any(m.holds_port() for m in self.members)

    def describe(self) -> dict[str, Any]:
        """One status entry: the first copy's fields, counters summed over the copies, and every pid."""
        parts = [m.describe() for m in self.members]
        out = dict(parts[0], state=self.state, processes=len(parts))
        out["pids"] = [p["pid"] for p in parts if p["pid"] is not None]
        for key in COUNTERS:
            out[key] = sum(p.get(key) or 0 for p in parts)
        out["last_error"] = next((p["last_error"] for p in parts if p["last_error"]), None)
        return out
