"""A gateway that keeps its state in memory: records every call, and can be told to fail.

It applies operations as HAProxy would (a server is added with weight 0 and must be maint to be
deleted), passes every health check unless the server is in `unhealthy`, and reports the sessions
set in `sessions`. Used where a real haproxy is not the point (controller unit tests).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from autoscaler.core.routing.routes import (
    AddServer,
    BackendSeen,
    DelServer,
    GatewayView,
    Op,
    Route,
    ServerSeen,
    SetState,
    SetWeight,
    describe,
)
from autoscaler.gateway.base import STILL_CONNECTED, GatewayError, GatewaySpec, route_one


@dataclass
class FakeGateway:
    spec: GatewaySpec | None = None
    servers: dict[tuple[str, str], ServerSeen] = field(default_factory=dict)
    requests: dict[str, int] = field(default_factory=dict)  # workload -> requests_total
    rate_max: dict[str, int] = field(default_factory=dict)  # workload -> busiest second since cleared
    clears: int = 0
    sessions: dict[str, int] = field(default_factory=dict)  # server name -> current sessions
    unhealthy: set[str] = field(default_factory=set)
    fail_start: str | None = None  # ensure raises GatewayError(this)
    fail_observe: bool = False
    fail_ops: set[str] = field(default_factory=set)  # server names whose operations fail
    ops: list[Op] = field(default_factory=list)
    ensures: int = 0
    stopped: bool = False

    def ensure(self, spec: GatewaySpec) -> bool:
        if self.fail_start is not None:
            raise GatewayError(self.fail_start, retryable=False)
        changed = spec != self.spec
        self.spec, self.ensures, self.stopped = spec, self.ensures + 1, False
        return changed

    def observe(self) -> GatewayView:
        if self.fail_observe or self.spec is None:
            raise GatewayError("runtime API: connection refused (fake)")
        servers = {k: self._live(s) for k, s in self.servers.items()}
        sessions: dict[str, int] = {}
        up: dict[str, int] = {}
        for s in servers.values():  # one pass, not one per workload (benchmarks run 20,000 servers)
            sessions[s.workload] = sessions.get(s.workload, 0) + s.sessions
            up[s.workload] = up.get(s.workload, 0) + (1 if s.check_ok else 0)
        backends = {
            w: BackendSeen(
                workload=w,
                requests_total=self.requests.get(w, 0),
                errors_5xx=0,
                sessions=sessions.get(w, 0),
                servers_up=up.get(w, 0),
                rate_max=self.rate_max.get(w, 0),
            )
            for w in self.spec.workloads
        }
        return GatewayView(backends, servers)

    def clear_maxima(self) -> None:
        if self.fail_observe or self.spec is None:
            raise GatewayError("runtime API: connection refused (fake)")
        self.rate_max.clear()
        self.clears += 1

    def _live(self, s: ServerSeen) -> ServerSeen:
        """`s` as a check and the session count see it now: `s` itself where they see it as it
        was (a dataclasses.replace per server per observe was a tenth of a steady tick's CPU in
        benchmarks/fleet_scale.py at 2,000 instances, some 9,000 servers: CPU a real gateway's
        view does not spend)."""
        ok = s.name not in self.unhealthy and s.admin != "maint"
        status, sessions = "UP" if ok else "DOWN", self.sessions.get(s.name, 0)
        if s.check_ok == ok and s.status == status and s.sessions == sessions:
            return s
        return replace(s, check_ok=ok, status=status, sessions=sessions)

    def apply(self, ops: Sequence[Op]) -> list[str]:
        errors = []
        for op in ops:
            self.ops.append(op)
            error = self._one(op)
            if error:
                errors.append(f"{describe(op)}: {error}")
        return errors

    def _one(self, op: Op) -> str | None:
        key = (op.workload, op.name)
        if op.name in self.fail_ops:
            return "failed (fake)"
        if isinstance(op, AddServer):
            if key in self.servers:
                return "Already exists a server with the same name in backend."
            self.servers[key] = ServerSeen(
                workload=op.workload,
                name=op.name,
                address=op.address,
                admin="ready",
                status="UP",
                check_ok=True,
                weight=0,
                sessions=0,
                requests_total=0,
            )
            return None
        if key not in self.servers:
            return "No such server."
        if isinstance(op, SetWeight):
            self.servers[key] = replace(self.servers[key], weight=op.weight)
        elif isinstance(op, SetState):
            self.servers[key] = replace(self.servers[key], admin=op.state)
        elif isinstance(op, DelServer):
            if self.sessions.get(op.name, 0):
                return STILL_CONNECTED
            del self.servers[key]
        return None

    def route(self, desired: Mapping[str, Sequence[Route]], seen: GatewayView) -> tuple[list[Op], list[str]]:
        return route_one(self, desired, seen)

    def stop(self) -> None:
        self.stopped = True
        self.servers.clear()
        self.spec = None

    def close(self) -> None:
        return None

    def weights(self, workload: str) -> dict[str, int]:
        return {s.name: s.weight for s in self.servers.values() if s.workload == workload and s.admin == "ready"}
