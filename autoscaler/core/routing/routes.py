"""Routing decisions for the gateway, and the runtime operations that carry them out. Pure.

The gateway has one backend per workload. Each server an agent was told to run (applied, with the
address the actuator recorded) belongs in its workload's backend:

- A server of the layout serves with a weight proportional to the rate the plan gives it
  (`rate_rps`, scaled into HAProxy's 1..256, the largest of the workload at 256), but only once its
  agent reports it ready *and* the gateway's own health check (`GET /v2/health/ready`) passes.
  Until then it sits in the backend with weight 0: HAProxy counts a server that has not been
  checked yet as up, so a weight given earlier would send it requests it cannot answer.
- A server the layout dropped keeps serving at the weight of the rate it was planned for while
  reconcile keeps it (its replacements are not ready yet); once reconcile wants it gone it is set
  to `drain` (no new requests; it finishes what it holds). It counts as *drained* when the
  gateway shows it draining with no current session, or `drain_timeout_s` after the drain began
  (time is passed in); only then does reconcile take it out of its agent's assignment, and once it
  has left every assignment the gateway deletes it (maint, then del). Reconcile lets a server go
  only once its workload keeps its floor without it (core/rollout/rollout.py), so its successors serve.
- Should a workload's last serving servers be drained before another serves (a break-before-make
  a policy limit forced, see core/rollout/surge.py), they are not drained yet: they keep serving until a
  replacement does, or until `drain_timeout_s`, which bounds the wait.

`route_ops` diffs what should run against what the gateway reports and orders the operations
make-before-break: servers are added and raised before others are drained or lowered, and deletes
come last.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from autoscaler.core.layout.layout_types import Layout, PlannedServer

MAX_WEIGHT = 256
AdminState = Literal["ready", "drain", "maint"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Route:
    """One server as the gateway should run it."""

    workload: str
    name: str
    address: str  # host:port
    state: AdminState
    weight: int  # 0..256; 0 while not ready
    planned_rate_rps: float
    retiring: bool = False  # the layout no longer has it


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerSeen:
    """One server as the gateway reports it (summed over gateway hosts where there are several)."""

    workload: str
    name: str
    address: str
    admin: AdminState
    status: str  # HAProxy's: UP, DOWN, DRAIN, MAINT, NOLB, "UP 1/2", "no check", ...
    check_ok: bool  # the last health check passed (every host agrees)
    weight: int
    sessions: int  # current sessions (requests in flight)
    requests_total: int
    errors_5xx: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class BackendSeen:
    """One workload's backend: counters of every request the gateway routed to it."""

    workload: str
    requests_total: int
    errors_5xx: int
    sessions: int
    servers_up: int = 0
    rate_max: int = 0  # the busiest second since the gateway's maxima were last cleared (HAProxy's rate_max)


@dataclass(frozen=True, slots=True)
class GatewayView:
    """What the gateway runs now; `backends` names every workload its configuration serves."""

    backends: Mapping[str, BackendSeen] = field(default_factory=dict)
    servers: Mapping[tuple[str, str], ServerSeen] = field(default_factory=dict)  # (workload, name)
    _by_name: Mapping[str, ServerSeen] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        """The servers by name, once: a tick looks up every applied server (thousands at fleet scale)."""
        by_name: dict[str, ServerSeen] = {}
        for s in self.servers.values():
            by_name.setdefault(s.name, s)  # the first of a name, as a scan in order finds it
        object.__setattr__(self, "_by_name", by_name)

    def server(self, name: str) -> ServerSeen | None:
        return self._by_name.get(name)

    def healthy(self) -> frozenset[str]:
        """Servers whose health check passes (whatever their weight)."""
        return frozenset(s.name for s in self.servers.values() if s.check_ok)

    def serving(self) -> frozenset[str]:
        """Servers that receive new requests: ready, checked up and weighted."""
        return frozenset(s.name for s in self.servers.values() if s.admin == "ready" and s.check_ok and s.weight > 0)


# -- operations ------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class AddServer:
    workload: str
    name: str
    address: str


@dataclass(frozen=True, slots=True)
class SetWeight:
    workload: str
    name: str
    weight: int


@dataclass(frozen=True, slots=True)
class SetState:
    workload: str
    name: str
    state: AdminState


@dataclass(frozen=True, slots=True)
class DelServer:
    workload: str
    name: str


Op = AddServer | SetWeight | SetState | DelServer


def describe(op: Op) -> str:
    """One line for logs and the tick report."""
    where = f"{op.workload}/{op.name}"
    if isinstance(op, AddServer):
        return f"add server {where} {op.address}"
    if isinstance(op, SetWeight):
        return f"set server {where} weight {op.weight}"
    if isinstance(op, SetState):
        return f"set server {where} state {op.state}"
    return f"del server {where}"


# -- what should run -------------------------------------------------------------------------------
def weights(rates: Mapping[str, float]) -> dict[str, int]:
    """Rates scaled into 1..256, the largest at 256 (HAProxy's weights are relative per backend)."""
    top = max(rates.values(), default=0.0)
    if top <= 0:
        return {n: MAX_WEIGHT for n in rates}
    return {n: max(1, min(MAX_WEIGHT, round(MAX_WEIGHT * max(r, 0.0) / top))) for n, r in rates.items()}


@dataclass(frozen=True, slots=True, kw_only=True)
class Readiness:
    """What decides whether a server gets a weight: its agent's word and the gateway's check."""

    ready: frozenset[str]  # servers their agents report ready this tick
    silent: frozenset[str] = frozenset()  # servers whose agent did not answer this tick
    healthy: frozenset[str] = frozenset()  # servers whose gateway health check passes
    serving: frozenset[str] = frozenset()  # servers the gateway sends requests to now

    def live(self, name: str) -> bool:
        """Ready by its agent and checked healthy by the gateway; a server that serves already
        keeps serving while its agent is silent (a slow agent is no reason to take traffic away:
        the health check is the judge of that)."""
        agent_ok = name in self.ready or (name in self.silent and name in self.serving)
        return agent_ok and name in self.healthy


def desired_routes(
    *,
    layout: Layout | None,
    applied: Mapping[str, Sequence[PlannedServer]],
    readiness: Readiness,
    draining: frozenset[str],
    aliases: Mapping[str, str] | None = None,
) -> dict[str, tuple[Route, ...]]:
    """Per workload, the servers its backend should hold. `applied`: instance -> servers its agent
    was told to run (with the addresses the actuator recorded; a server without one is left out),
    under their gateway names; `aliases`: gateway name -> layout name for the servers the layout
    may still plan (GatewayNames.aliases; None: the names are the layout's); `draining`: servers
    reconcile wants to remove."""
    in_layout = {s.name: s for _, s in (layout.servers() if layout else ())}
    planned: dict[str, PlannedServer] = {}
    by_workload: dict[str, list[PlannedServer]] = {}
    for servers in applied.values():
        for s in servers:
            if not s.address:
                continue
            by_workload.setdefault(s.workload, []).append(s)
            own = s.name if aliases is None else aliases.get(s.name)
            if own in in_layout:
                planned[s.name] = in_layout[own]
    return {w: _workload_routes(servers, planned, readiness, draining) for w, servers in sorted(by_workload.items())}


def _workload_routes(
    servers: Sequence[PlannedServer],
    planned: Mapping[str, PlannedServer],
    readiness: Readiness,
    draining: frozenset[str],
) -> tuple[Route, ...]:
    """A layout server's rate is the layout's (rates change without a reconfiguration); a retiring
    server keeps the rate it was planned for."""
    rates = {s.name: (planned[s.name].rate_rps if s.name in planned else s.rate_rps) for s in servers}
    live = {s.name for s in servers if readiness.live(s.name) and s.name not in draining}
    if not live:  # nothing else takes requests yet: the last servers keep serving (drained by the timeout)
        draining = draining - {s.name for s in servers if readiness.live(s.name)}
        live = {s.name for s in servers if readiness.live(s.name) and s.name not in draining}
    scaled = weights({n: r for n, r in rates.items() if n in live})
    return tuple(
        Route(
            workload=s.workload,
            name=s.name,
            address=s.address,
            state="drain" if s.name in draining else "ready",
            weight=scaled.get(s.name, 0),
            planned_rate_rps=rates[s.name],
            retiring=s.name not in planned,
        )
        for s in sorted(servers, key=lambda v: v.name)
    )


# -- names -----------------------------------------------------------------------------------------
def gateway_name(name: str, attempt: int) -> str:
    """A server's name at the gateway: its own on a slot's first instance, `<name>.a<attempt>` on a
    later one. A going instance (spot interruption) and its replacement run the slot's servers at
    the same time, and a backend cannot hold two servers of one name; a name fixed by the attempt
    never changes while the server runs, so no rename (a delete and an add under load) is needed.
    (A layout name always ends in `-<n>`, so no gateway name is another server's layout name.)"""
    return name if attempt == 0 else f"{name}.a{attempt}"


@dataclass(frozen=True, slots=True)
class GatewayNames:
    """What the agents were told to run, under the gateway's names (see gateway_name): every
    current instance's servers and every going instance's, which the layout no longer counts."""

    applied: Mapping[str, tuple[PlannedServer, ...]]  # instance ("slot#attempt") -> servers, renamed
    aliases: Mapping[str, str]  # gateway name -> layout name: current instances' servers only
    going: Mapping[tuple[str, int], tuple[str, ...]]  # going record -> its servers' gateway names

    def to_gateway(self, names: Iterable[str]) -> frozenset[str]:
        """Current instances' servers (layout names) under their gateway names."""
        back = {v: k for k, v in self.aliases.items()}
        return frozenset(back[n] for n in names if n in back)

    def to_layout(self, names: Iterable[str]) -> frozenset[str]:
        """Gateway names of current instances' servers under their layout names (others left out)."""
        return frozenset(self.aliases[n] for n in names if n in self.aliases)

    def going_servers(self, keys: Iterable[tuple[str, int]]) -> frozenset[str]:
        return frozenset(n for k in keys for n in self.going.get(k, ()))

    def going_drained(self, drained: frozenset[str]) -> frozenset[tuple[str, int]]:
        """The going records whose servers are all drained."""
        return frozenset(k for k, names in self.going.items() if all(n in drained for n in names))


def gateway_names(
    current: Mapping[str, tuple[int, Sequence[PlannedServer]]],
    going: Mapping[tuple[str, int], Sequence[PlannedServer]],
    renames: Renames | None = None,
) -> GatewayNames:
    """`current`: slot -> (its current record's attempt, the servers applied to it); `going`:
    (slot, attempt) of each going record -> the servers applied to it. `renames`: the caller's
    copies kept from its earlier calls (none: each server copied afresh)."""
    rename = renames or Renames()
    applied: dict[str, tuple[PlannedServer, ...]] = {}
    aliases: dict[str, str] = {}
    for slot, (attempt, servers) in sorted(current.items()):
        applied[f"{slot}#{attempt}"] = rename(servers, attempt)
        aliases.update({gateway_name(s.name, attempt): s.name for s in servers})
    names: dict[tuple[str, int], tuple[str, ...]] = {}
    for (slot, attempt), servers in sorted(going.items()):
        applied[f"{slot}#{attempt}"] = rename(servers, attempt)
        names[(slot, attempt)] = tuple(gateway_name(s.name, attempt) for s in servers)
    rename.turn()
    return GatewayNames(applied, aliases, names)


def _renamed(servers: Sequence[PlannedServer], attempt: int) -> tuple[PlannedServer, ...]:
    return tuple(replace(s, name=gateway_name(s.name, attempt)) for s in servers)


_Renamed = tuple[Sequence[PlannedServer], int, tuple[PlannedServer, ...]]  # applied, attempt, renamed


class Renames:
    """The servers applied to an instance under the gateway's names (`_renamed`), copied once per
    applied tuple and kept while callers ask for it: the store hands out the same parsed tuple
    while an agent's assignment stays (loop/state/store.py), and a tick names the fleet twice (the
    diff, the routes), which at 2,000 MIG instances copied 37,000 servers a tick. An entry holds
    its tuple, so the identity it is found by is not reused while it is kept; one that the last
    two calls of `gateway_names` did not ask for goes. Not thread-safe: one per controller."""

    def __init__(self) -> None:
        self._asked: dict[int, _Renamed] = {}  # this call's
        self._before: dict[int, _Renamed] = {}  # the call before's

    def __call__(self, servers: Sequence[PlannedServer], attempt: int) -> tuple[PlannedServer, ...]:
        key = id(servers)
        hit = self._asked.get(key) or self._before.get(key)
        if hit is None or hit[0] is not servers or hit[1] != attempt:
            hit = (servers, attempt, _renamed(servers, attempt))
        self._asked[key] = hit
        return hit[2]

    def turn(self) -> None:
        """A call's end: what it asked for is kept through the next call."""
        self._before, self._asked = self._asked, {}


# -- the diff --------------------------------------------------------------------------------------
def route_ops(desired: Mapping[str, Sequence[Route]], seen: GatewayView) -> tuple[Op, ...]:
    """Operations that move the gateway from `seen` to `desired`, make-before-break: adds and
    raises, then drains and lowers, then deletes. Workloads the gateway has no backend for are
    left out (the configuration must gain the backend first)."""
    want = {(r.workload, r.name): r for rs in desired.values() for r in rs if r.workload in seen.backends}
    first: list[Op] = []
    then: list[Op] = []
    last: list[Op] = []
    for key, r in sorted(want.items()):
        s = seen.servers.get(key)
        if s is not None and s.address != r.address:
            last.append(DelServer(r.workload, r.name))  # re-added next tick, once it is gone
            continue
        if s is None:
            first.append(AddServer(r.workload, r.name, r.address))
            continue
        _adjust(r, s, first, then)
    for key, s in sorted(seen.servers.items()):
        if key not in want:
            last.append(DelServer(s.workload, s.name))
    return tuple(first + then + last)


def _adjust(r: Route, s: ServerSeen, first: list[Op], then: list[Op]) -> None:
    """Weight and state changes of one server that exists: raises first, lowers and drains then."""
    if r.weight != s.weight:
        (first if r.weight > s.weight else then).append(SetWeight(r.workload, r.name, r.weight))
    if r.state != s.admin:
        (first if r.state == "ready" else then).append(SetState(r.workload, r.name, r.state))


# -- draining --------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class DrainProgress:
    """The drain book after this tick (server -> when its drain began) and which are drained."""

    started: Mapping[str, float]
    drained: frozenset[str]

    @property
    def waiting(self) -> frozenset[str]:
        return frozenset(self.started) - self.drained


def drain_progress(
    *,
    started: Mapping[str, float],
    removing: frozenset[str],
    seen: GatewayView | None,
    now: float,
    timeout_s: float,
) -> DrainProgress:
    """A server to remove begins draining now unless it already is (servers no longer to be removed
    are forgotten: the plan wants them again). It is drained once the gateway shows it draining
    with no current session, or is gone from the gateway (nothing routes to it), or `timeout_s`
    after its drain began; without a gateway view only the timeout counts."""
    book = {n: float(started.get(n, now)) for n in sorted(removing)}
    drained = frozenset(n for n, t in book.items() if now - t >= timeout_s or _quiet(n, seen))
    return DrainProgress(book, drained)


def _quiet(name: str, seen: GatewayView | None) -> bool:
    if seen is None:
        return False
    s = seen.server(name)
    return s is None or (s.admin in ("drain", "maint") and s.sessions == 0)


# -- measured rates --------------------------------------------------------------------------------
Sample = tuple[float, int]  # (time, requests_total)


def counter_rate(prev: Sample | None, now: float, total: int) -> float | None:
    """Requests per second since `prev`; a counter that went down was reset (the gateway restarted)
    and counts from zero. None without a previous sample or time between them."""
    if prev is None or now <= prev[0]:
        return None
    delta = total - prev[1] if total >= prev[1] else total
    return delta / (now - prev[0])
