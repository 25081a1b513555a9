"""The vocabulary of reconcile: the actions it returns, the fleet view it reads, the limits it
keeps. Pure."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field

from autoscaler.config.offerings import ON_DEMAND, offering_key
from autoscaler.core.fleet.lifecycle import LIVE, Reason, Record, State
from autoscaler.core.layout.layout_types import PlannedServer
from autoscaler.core.rollout.rollout import Judge, shares_judge
from autoscaler.core.rollout.surge import TypeInfo


@dataclass(frozen=True, slots=True)
class Launch:
    slot: str
    instance_type: str
    attempt: int
    reason: str
    _: KW_ONLY
    capacity_type: str = ON_DEMAND
    pooled: str | None = None  # a stopped warm-pool member to start instead (core/fleet/warm_pool.py)

    @property
    def offering(self) -> str:
        return offering_key(self.instance_type, self.capacity_type)


@dataclass(frozen=True, slots=True)
class Configure:
    slot: str
    servers: tuple[PlannedServer, ...]
    reason: str


@dataclass(frozen=True, slots=True)
class Drain:
    slot: str
    attempt: int
    reason: str


@dataclass(frozen=True, slots=True)
class Terminate:
    slot: str
    attempt: int | None  # None: an orphan instance with no open record
    instance_id: str | None
    reason: Reason
    detail: str = ""
    _: KW_ONLY
    to_pool: str | None = None  # stop it into the warm pool as this member name instead (core/fleet/warm_pool.py)


Action = Launch | Configure | Drain | Terminate


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetView:
    """The fleet as the controller knows it after observing and syncing."""

    records: Sequence[Record]  # open records (see lifecycle.OPEN)
    applied: Mapping[str, tuple[PlannedServer, ...]]  # slot -> servers last applied to its agent
    stale_agents: frozenset[str] = frozenset()  # slots whose agent reports an older assignment generation
    ready_servers: frozenset[str] = frozenset()  # server names that report ready
    max_attempt: Mapping[str, int] = field(default_factory=dict)  # slot -> highest attempt (slots it may launch)
    slot_tops: Mapping[str, int] = field(default_factory=dict)  # stem -> highest number (slots.top_numbers)
    orphans: Sequence[tuple[str, str]] = ()  # (slot, instance id): ours, listed, no record
    prices: Mapping[str, float] = field(default_factory=dict)  # offering (offering_key) -> $/h
    agent_seen: Mapping[tuple[str, int], float] = field(default_factory=dict)  # last answer per (slot, attempt)
    rates: Mapping[str, float] = field(default_factory=dict)  # observed rates now (a missing one: keep all)
    drained: frozenset[str] | None = None  # retiring servers the gateway reports drained; None: no gateway
    baseline: Mapping[str, float] | None = None  # capacity when the current change began (Diff.baseline)
    draining_book: frozenset[str] = frozenset()  # servers the gateway began draining in an earlier tick
    busy_agents: frozenset[tuple[str, int]] = frozenset()  # drained instances whose agent still stops servers
    leaving: Mapping[tuple[str, int], tuple[PlannedServer, ...]] = field(default_factory=dict)  # GOING_AWAY: servers
    # Going (GOING_AWAY) records whose servers the gateway has all drained; None: no gateway.
    going_drained: frozenset[tuple[str, int]] | None = None
    # slot -> (GPU, profile, start) of MIG slices its agent reports that no assigned server runs in
    held_slices: Mapping[str, tuple[tuple[int, str, int], ...]] = field(default_factory=dict)


GpuFits = Callable[[str, Sequence[PlannedServer]], bool]  # (instance type, one GPU's servers) -> fits


def shares_fit(instance_type: str, servers: Sequence[PlannedServer]) -> bool:
    """The model-free test: MPS shares within 100 %."""
    return sum(s.mps_percent for s in servers) <= 100.0 + 1e-6


def judge_from_fits(fits: GpuFits) -> Judge:
    """A judge from a fit predicate: every server at its planned throughput where the GPU fits."""

    def judge(instance_type: str, servers: Sequence[PlannedServer]) -> list[tuple[bool, float]]:
        ok = fits(instance_type, servers)
        return [(ok, s.predicted_throughput_rps if ok else 0.0) for s in servers]

    return judge


@dataclass(frozen=True, slots=True)
class Limits:
    ready_timeout_s: float = 900.0
    max_cost_per_hour: float | None = None
    gpu_fits: GpuFits = shares_fit  # used when `judge` is None
    judge: Judge | None = None  # colocation.server_judge: the performance model per server
    max_surge: int | str | None = None  # scaling.max_surge (None: 1, or 10 % of the fleet if larger)
    max_instances: int | None = None  # scaling.max_instances: the most instances the fleet holds, surge included
    types: Mapping[str, TypeInfo] = field(default_factory=dict)  # the policy's instance types
    fleet: str = "igniter"  # names surge slots
    # How long a drained instance waits for its agent to finish stopping its servers (each answers
    # what it holds, see agents/node) before it is terminated; 0: agents are not contacted, so the
    # instance terminates with its drain.
    agent_drain_s: float = 0.0
    max_unavailable: int | None = None  # voluntary disruptions in flight at most (disruption.py); None: any
    drain_timeout_s: float = 0.0  # the gateway's longest drain: a going instance drains this long before it goes
    burst: bool = True  # scaling.burst: stand-ins in free share while a short workload's capacity boots

    def server_judge(self) -> Judge:
        if self.judge is not None:
            return self.judge
        return shares_judge if self.gpu_fits is shares_fit else judge_from_fits(self.gpu_fits)


def fleet_cost(view: FleetView, replaced: Sequence[Action]) -> float:
    """The hourly cost of the instances we hold, less those terminated among `replaced`."""
    gone = {(a.slot, a.attempt) for a in replaced if isinstance(a, Terminate)}
    held = (r for r in view.records if r.state in LIVE and r.key not in gone)
    live = (r for r in held if r.state not in (State.REQUESTED, State.GOING_AWAY))
    return sum(view.prices.get(r.offering, 0.0) for r in live)
