"""Transports that do not reach a real agent: `none` (agents not contacted) and a recording fake."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from autoscaler.fleet.base import Instance
from autoscaler.transport.base import TransportError, TransportFault


class NoneTransport:
    """`agents.transport: none`: the controller manages instances only and never contacts agents
    (used where agent addresses are unreachable, e.g. moto's 10.x instances in tests)."""

    contact = False

    def apply(self, instance: Instance, assignment: dict[str, Any]) -> None:
        return None

    def status(self, instance: Instance) -> dict[str, Any]:
        raise TransportError("agents.transport is none: agents are not contacted", TransportFault.PERMANENT)

    def close(self) -> None:
        return None


@dataclass
class FakeTransport:
    """Records applies; reports each instance's last assignment back as its status.

        Servers are `ready` unless named in `not_ready`; `p99` sets latency per workload and
        `requests` the requests_total per server name; instance ids in `unreachable` fail, and those
        in `errors` raise that error (e.g. a host key mismatch) from every call; `draining` lists,
        per instance id, servers its agent reports still draining (a graceful stop under way); `mig`, the
    MIG status every agent reports."""

    applies: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    not_ready: set[str] = field(default_factory=set)
    unreachable: set[str] = field(default_factory=set)
    reject: bool = False
    p99: dict[str, float] = field(default_factory=dict)
    mig: dict[str, Any] | None = None  # the `mig` status every agent reports (MIG on the node)
    requests: dict[str, int] = field(default_factory=dict)
    errors: dict[str, TransportError] = field(default_factory=dict)
    draining: dict[str, list[str]] = field(default_factory=dict)
    calls: list[tuple[str, str]] = field(default_factory=list)  # (apply | status, instance id)
    _current: dict[str, dict[str, Any]] = field(default_factory=dict)

    def apply(self, instance: Instance, assignment: dict[str, Any]) -> None:
        self.calls.append(("apply", instance.id))
        self._check(instance)
        if self.reject:
            raise TransportError(f"{instance.id}: assignment rejected (fake)", TransportFault.PERMANENT)
        self.applies.append((instance.id, assignment))
        self._current[instance.id] = assignment

    def status(self, instance: Instance) -> dict[str, Any]:
        self.calls.append(("status", instance.id))
        self._check(instance)
        current = self._current.get(instance.id, {"generation": None, "servers": []})
        servers = [
            {
                "name": s["name"],
                "workload": s["workload"],
                "port": s["port"],
                "state": "starting" if s["name"] in self.not_ready else "ready",
                "requests_total": self.requests.get(s["name"], 0),
                "latency_ms_p99": self.p99.get(s["workload"]),
            }
            for s in current["servers"]
        ]
        draining = [{"name": n, "state": "draining"} for n in self.draining.get(instance.id, [])]
        out = {"generation": current["generation"], "agent_running": True, "servers": servers, "draining": draining}
        return out | ({"mig": self.mig} if self.mig is not None else {})

    def forget(self, instance_id: str) -> None:
        """Simulate an agent that restarted with an empty state directory."""
        self._current.pop(instance_id, None)

    def close(self) -> None:
        return None

    def _check(self, instance: Instance) -> None:
        if instance.id in self.errors:
            raise self.errors[instance.id]
        if instance.id in self.unreachable:
            raise TransportError(f"{instance.id}: unreachable (fake)")
