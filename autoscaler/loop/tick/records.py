"""The records a tick passes around: what it depends on (Deps), what it saw (Observation) and what
it did (TickReport, the shape /v1/plan, the simulator and the demo read). Kept apart from the
controller so that readers of a report need not import the loop's machinery."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from autoscaler.config.policy import CLOUD_MODEL_ROOT, Policy
from autoscaler.core.capacity.error_window import Recent
from autoscaler.core.capacity.reach import Reach
from autoscaler.core.layout.layout_types import Layout
from autoscaler.core.routing.routes import GatewayView
from autoscaler.fleet.base import Instance, InterruptionSource, Notice, Provider
from autoscaler.gateway.base import Gateway
from autoscaler.loop.state.store import Store
from autoscaler.loop.steps.actuator import Outcome
from autoscaler.loop.steps.gateway_step import GatewayReport
from autoscaler.loop.steps.pool_step import PoolReport
from autoscaler.planner.types import Plan
from autoscaler.rates.reader import RateReader, Reading
from autoscaler.transport.base import AgentStatus, HostKeyGate, Transport

# (policy, rates, corrections, caps by instance type, current plan) -> plan
PlanFn = Callable[[Policy, Mapping[str, float], Mapping[str, float], Mapping[str, int], Plan | None], Plan]
# the same question -> a cost the planner's plan surely does not exceed, or None (wiring.default_bound)
BoundFn = Callable[[Policy, Mapping[str, float], Mapping[str, float], Mapping[str, int], Plan | None], float | None]


@dataclass
class Deps:
    provider: Provider
    transport: Transport
    rates: RateReader
    store: Store
    planner: PlanFn
    clock: Callable[[], float]
    contact: bool = True  # False: agents are never contacted (transport none)
    gate: HostKeyGate | None = None  # SSH to cloud nodes: contact an agent only once its host key is pinned
    interruptions: InterruptionSource | None = None  # spot interruption / maintenance notices (EC2: SQS)
    gateway: Gateway | None = None  # the data plane; None: no gateway (servers count as drained at once)
    model_root: str = CLOUD_MODEL_ROOT  # <model_root>/<model> for a workload without model_dir (fleet/samples.py)
    bound: BoundFn | None = None  # for `planner` only: lets a scale-in wait skip the target plan (Controller._waiting)


@dataclass(frozen=True)
class Observation:
    now: float
    instances: Mapping[str, Instance]
    statuses: Mapping[str, AgentStatus]  # slot -> status of agents that answered
    reading: Reading
    notices: tuple[Notice, ...] = ()  # read from the interruption source this tick
    gateway: GatewayView | None = None  # what the gateway runs (None: no gateway, or it failed)


@dataclass
class TickReport:
    tick: int
    now: float
    ok: bool = True
    error: str | None = None
    fast: bool = False  # a fast tick (core/rollout/fast_path.py): it only added capacity
    decision: str = ""
    layout: Layout | None = None
    observed: dict[str, float] = field(default_factory=dict)
    forecast: dict[str, float] = field(default_factory=dict)
    headroom: dict[str, float] = field(default_factory=dict)  # planned above the base forecast (tuning.tune)
    forecast_error: dict[str, float] = field(default_factory=dict)  # observed / the forecast boot_s earlier - 1
    recent_errors: Recent = field(default_factory=Recent)  # those of the last hour, per quantile (when asked)
    attainment: dict[str, float | None] = field(default_factory=dict)  # ready capacity >= rate, last hour
    burst_floor: dict[str, float] = field(default_factory=dict)  # busiest peak of the last scale_down_delay_s (auto)
    headroom_quantile: dict[str, float] = field(default_factory=dict)  # the errors' quantile headroom auto sizes at
    ramp_floor: dict[str, float] = field(default_factory=dict)  # where a sustained rise goes by the horizon (auto)
    periods: dict[str, list[float]] = field(default_factory=dict)  # forecast auto: the periods found, seconds
    ahead: dict[str, float] = field(default_factory=dict)  # forecast auto: the seasonal rise that raised the forecast
    reach: dict[str, Reach] = field(
        default_factory=dict
    )  # target_attainment out of reach, and why (core/capacity/reach.py)
    missing: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    settling: bool = False  # make-before-break work waits on servers just started: tick again soon
    draining: list[str] = field(default_factory=list)  # servers that may leave once the gateway drained them
    breaches: list[dict[str, Any]] = field(default_factory=list)  # invariant broken: a policy limit left no room
    converged: bool = False  # the fleet is the layout (no move under way)
    surge_slots: list[str] = field(default_factory=list)  # surge instances kept or launched this tick
    bursts: list[str] = field(default_factory=list)  # stand-ins started in free share this tick
    warm_pool: PoolReport | None = None  # the warm pool after this tick (None: no pool, or a fast tick)
    wake_at: float | None = None  # tick again then, before the next interval (scaling.next_wake)
    outcome: Outcome = field(default_factory=Outcome)
    gateway: GatewayReport | None = None
    rounds: int = 0
    duration_s: float = 0.0
    overrun: bool = False  # took more than half of scaling.interval_s (a warning; igniter_tick_overruns_total)
    quarantined: dict[str, str] = field(default_factory=dict)  # instance id -> why it is not contacted
    backoff_until: float | None = None  # provider mutations wait until then (throttled, unauthorised)
    ready_servers: dict[str, int] | None = None  # per workload, servers its agents report ready (None: not contacted)
    agent_errors: dict[str, str] = field(default_factory=dict)  # slot -> what its agent reports wrong (a refusal)
    latency_p99_ms: dict[str, float] = field(default_factory=dict)  # per workload, its worst ready server's p99

    def summary(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "error": self.error,
            "fast": self.fast,
            "decision": self.decision,
            "observed": self.observed,
            "forecast": self.forecast,
            "headroom": self.headroom,
            "attainment_1h": self.attainment,
            "out_of_reach": {w: r.cause for w, r in self.reach.items() if r.out},
            "missing": self.missing,
            "notes": self.notes,
            "settling": self.settling,
            "draining": self.draining,
            "breaches": self.breaches,
            "converged": self.converged,
            "surge_slots": self.surge_slots,
            "bursts": self.bursts,
            "warm_pool": self.warm_pool.to_json() if self.warm_pool else None,
            "wake_at": self.wake_at,
            "rounds": self.rounds,
            "done": self.outcome.done,
            "failed": self.outcome.failed,
            "cost_per_hour": self.layout.cost_per_hour if self.layout else None,
            "quarantined": self.quarantined,
            "backoff_until": self.backoff_until,
            "gateway": self.gateway.summary() if self.gateway else None,
        }
