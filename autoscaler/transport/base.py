"""The Transport contract: hand an assignment to an instance's agent and read its status.

Errors are data: a TransportError carries a `kind`, and TRANSPORT_ERRORS says what the controller
does about it (the same columns as the provider's table in fleet/base.py; an agent has no
capacity row):

| kind        | record                      | retry                               | operator sees                    |
|-------------|-----------------------------|-------------------------------------|----------------------------------|
| unreachable | kept; a silent agent is     | next tick (timeouts, refused        | log line (status); tick report   |
| (throttled) | replaced after ready_timeout| connections, a garbled reply)       | `failed` (apply)                 |
| not_ready   | kept                        | next tick: not contacted before it  | DEBUG log                        |
| (not found) |                             | has an address and a pinned key     |                                  |
| auth        | node quarantined: never     | never blindly: the node is replaced | ERROR log; /v1/fleet and the tick|
| (host key)  | contacted again             | (its agent stays silent)            | report `quarantined`; kind=host_key|
| permanent   | kept                        | not the same assignment again: only | tick report `failed`; the agent's|
|             |                             | once the assignment changes         | status `assignment_error`        |

A host key other than the pinned one is what a man in the middle looks like, and an SSH server
refusing our key will refuse it again: retrying either every tick only repeats the alarm.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from autoscaler.fleet.base import Decision, Instance, OnRecord, Retry


class TransportFault(StrEnum):
    UNREACHABLE = "unreachable"
    NOT_READY = "not_ready"
    AUTH = "auth"  # the host key does not match (or is unknown), or the host refused our key
    PERMANENT = "permanent"  # the agent rejected the assignment, or cannot be run at all


TRANSPORT_ERRORS: dict[TransportFault, Decision] = {
    TransportFault.UNREACHABLE: Decision(OnRecord.KEEP, Retry.NEXT_TICK, "transport", "tick report failed (apply)"),
    TransportFault.NOT_READY: Decision(OnRecord.KEEP, Retry.NEXT_TICK, "transport", "not contacted yet"),
    TransportFault.AUTH: Decision(
        OnRecord.QUARANTINE, Retry.NEVER, "host_key", "/v1/fleet quarantined; tick report quarantined"
    ),
    TransportFault.PERMANENT: Decision(
        OnRecord.KEEP, Retry.CHANGED, "transport", "tick report failed; agent status assignment_error"
    ),
}


class TransportError(Exception):
    """The agent could not be reached or refused; `kind` names its row of TRANSPORT_ERRORS."""

    def __init__(self, message: str, kind: TransportFault = TransportFault.UNREACHABLE) -> None:
        super().__init__(message)
        self.kind = kind

    @property
    def decision(self) -> Decision:
        return TRANSPORT_ERRORS[self.kind]

    @property
    def retryable(self) -> bool:
        """Whether the same call may simply be made again next tick."""
        return self.decision.retry is Retry.NEXT_TICK


class Transport(Protocol):
    def apply(self, instance: Instance, assignment: dict[str, Any]) -> None:
        """Run `igniter-agent apply -` on the instance with the assignment JSON on stdin."""
        ...

    def status(self, instance: Instance) -> dict[str, Any]:
        """Return the agent's status document (what `igniter-agent status --json` prints), read
        from the status.json its daemon keeps current (transport/status_file.py): NOT_READY while
        it has written none, UNREACHABLE (silent) when its heartbeat is stale."""
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
    assignment_generation: int | None  # the `generation` of the assignment it holds
    running: bool  # the agent process holds its state directory
    servers: tuple[ServerStatus, ...] = ()
    error: str | None = None  # e.g. the agent rejected its assignment
    draining: tuple[str, ...] = ()  # servers it stopped that are still finishing what they hold
    mig: Any = None  # the agent's `mig` status (each GPU's MIG mode and slices) where MIG is on

    def ready_names(self) -> set[str]:
        return {s.name for s in self.servers if s.state == "ready"}


def parse_status(data: Any) -> AgentStatus:
    """Validate the agent's status JSON leniently: unknown keys are ignored, wrong shapes raise."""
    if not isinstance(data, dict) or not isinstance(data.get("servers", []), list):
        raise TransportError(f"agent status is not the expected object: {str(data)[:200]}")
    servers = tuple(_server(s) for s in data.get("servers", []) if isinstance(s, dict) and s.get("name"))
    gen = data.get("generation")
    draining = data.get("draining", [])
    return AgentStatus(
        int(gen) if isinstance(gen, int | float) else None,
        data.get("agent_running", True) is not False,
        servers,
        data.get("assignment_error"),
        tuple(str(s["name"]) for s in draining if isinstance(s, dict) and s.get("name"))
        if isinstance(draining, list)
        else (),
        mig if isinstance(mig := data.get("mig"), dict) and mig.get("enabled") else None,
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
