"""The Transport contract: hand an assignment to an instance's agent and read its status."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from autoscaler.fleet.base import Instance


class TransportError(Exception):
    """The agent could not be reached or refused; `retryable` is False for auth/host-key failures."""

    def __init__(self, message: str, retryable: bool = True) -> None:
        super().__init__(message)
        self.retryable = retryable


class Transport(Protocol):
    def apply(self, instance: Instance, assignment: dict[str, Any]) -> None:
        """Run `igniter-agent apply -` on the instance with the assignment JSON on stdin."""
        ...

    def status(self, instance: Instance) -> dict[str, Any]:
        """Return the parsed output of `igniter-agent status --json` on the instance."""
        ...

    def close(self) -> None: ...


class HostKeyGate(Protocol):
    """Which instances may be contacted yet: an SSH agent is reached only once its host key is
    pinned from a trusted channel (transport/trust.py). Without a gate, every running one may be."""

    def refresh(self, instances: Sequence[Instance]) -> None:
        """Learn the keys of new instances and forget those of instances no longer listed."""
        ...

    def reachable(self, instance: Instance) -> bool: ...


@dataclass(frozen=True, slots=True)
class ServerStatus:
    """One server as its agent reports it (see `igniter-agent status --json`)."""

    name: str
    workload: str
    state: str  # starting | ready | failed | stopped
    requests_total: int = 0
    latency_ms_p99: float | None = None
    pid: int | None = None
    restarts: int = 0
    last_error: str | None = None


@dataclass(frozen=True, slots=True)
class AgentStatus:
    generation: int | None
    running: bool  # the agent process holds its state directory
    servers: tuple[ServerStatus, ...] = ()
    error: str | None = None  # e.g. the agent rejected its assignment

    def ready_names(self) -> set[str]:
        return {s.name for s in self.servers if s.state == "ready"}


def parse_status(data: Any) -> AgentStatus:
    """Validate the agent's status JSON leniently: unknown keys are ignored, wrong shapes raise."""
    if not isinstance(data, dict) or not isinstance(data.get("servers", []), list):
        raise TransportError(f"agent status is not the expected object: {str(data)[:200]}")
    servers = tuple(_server(s) for s in data.get("servers", []) if isinstance(s, dict) and s.get("name"))
    gen = data.get("generation")
    return AgentStatus(
        int(gen) if isinstance(gen, int | float) else None,
        data.get("agent_running", True) is not False,
        servers,
        data.get("assignment_error"),
    )


def _server(raw: dict[str, Any]) -> ServerStatus:
    p99 = raw.get("latency_ms_p99")
    return ServerStatus(
        str(raw["name"]),
        str(raw.get("workload", "")),
        str(raw.get("state", "")),
        int(raw.get("requests_total") or 0),
        float(p99) if isinstance(p99, int | float) else None,
        raw.get("pid"),
        int(raw.get("restarts") or 0),
        raw.get("last_error"),
    )
