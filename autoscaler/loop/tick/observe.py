"""The observe step of a tick: the provider's instances, the agents' status, the interruption
notices, the gateway and the rates, each read behind its interface, and what the state keeps of
the agents that answered. Kept out of controller.py so the tick reads as its steps; the functions
return the new state, and change nothing else."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from autoscaler.config.policy import AgentsConfig, Policy
from autoscaler.core.fleet.lifecycle import LIVE, Record, State
from autoscaler.fleet.base import Instance, OnRecord
from autoscaler.loop.state.controller_state import ControllerState
from autoscaler.loop.steps.actuator import quarantine
from autoscaler.loop.steps.gateway_step import GatewayStep
from autoscaler.loop.tick.records import Deps, Observation
from autoscaler.rates.base import StatusFed
from autoscaler.transport.base import AgentStatus, TransportError, parse_status
from autoscaler.transport.bounded import agent_deadline_s, call_laned

log = logging.getLogger(__name__)


def observe(
    deps: Deps, policy: Policy, routing: GatewayStep | None, state: ControllerState, now: float
) -> tuple[Observation, ControllerState]:
    """What the tick sees, and the state less the quarantines of instances that are gone, plus
    those this observation found (a host key or login failure)."""
    instances = {i.id: i for i in deps.provider.list_instances()}
    state = replace(state, quarantined={k: q for k, q in state.quarantined.items() if k in instances})
    if deps.gate is not None and deps.contact:
        deps.gate.refresh(list(instances.values()))
    statuses, state = agent_statuses(deps, state, deps.store.open_records(), instances, policy.agents)
    if isinstance(deps.rates.source, StatusFed):
        deps.rates.source.feed(statuses)
    notices = tuple(deps.interruptions.receive()) if deps.interruptions is not None else ()
    gateway = routing.observe(policy, now) if routing is not None else None
    reading = deps.rates.read(now, [w.name for w in policy.workloads])
    return Observation(now, instances, statuses, reading, notices, gateway), state


def agent_statuses(
    deps: Deps,
    state: ControllerState,
    records: Sequence[Record],
    instances: Mapping[str, Instance],
    agents: AgentsConfig | None = None,
) -> tuple[dict[str, AgentStatus], ControllerState]:
    """Slot -> status of each live instance's agent that answered. A going instance is not asked:
    its servers carry the slot's names and must not look like its replacement's. The agents are
    asked in a bounded pool (transport/bounded.py), each under its deadline, those silent last
    time in a lane of their own (a hung node holds none of the pool's slots); the answers are
    taken in the records' order, so the outcome does not depend on who answered first."""
    if not deps.contact:
        return {}, state
    asked: list[tuple[str, Instance]] = []
    suspect: list[bool] = []
    last = max(state.agent_seen.values(), default=None)
    for rec in records:
        inst = instances.get(rec.instance_id or "")
        if rec.state not in LIVE or rec.state is State.GOING_AWAY:
            continue
        if inst is not None and inst.state == "running" and reachable(deps, state, inst):
            asked.append((rec.slot, inst))
            suspect.append(silent_last_time(state, rec, last))
    cfg = agents or AgentsConfig()
    instances_asked = [inst for _, inst in asked]
    replies = call_laned(_read_status(deps), instances_asked, suspect, cfg.max_concurrency, agent_deadline_s(cfg))
    out: dict[str, AgentStatus] = {}
    for (slot, inst), reply in zip(asked, replies, strict=True):
        if isinstance(reply, TransportError):
            state = _status_failed(deps, state, slot, inst, reply)
        else:
            out[slot] = reply
    return out, state


def silent_last_time(state: ControllerState, rec: Record, last: float | None) -> bool:
    """Did this attempt's agent miss the latest tick any agent answered (`last`, the newest time in
    agent_seen: remember_agents stamps every answer of a tick with that tick's time)? One that has
    never answered counts too (a new node: unknown); with nothing remembered (a fresh start) none
    does, and every agent is asked in the main pool as before."""
    if last is None:
        return False
    seen = state.agent_seen.get(rec.key)
    return seen is None or seen < last


def _read_status(deps: Deps) -> Callable[[Instance], AgentStatus]:
    def read(inst: Instance) -> AgentStatus:
        return parse_status(deps.transport.status(inst))

    return read


def _status_failed(
    deps: Deps, state: ControllerState, slot: str, inst: Instance, exc: TransportError
) -> ControllerState:
    """The transport's error table: a retryable failure waits for the next tick; a host key or
    login failure quarantines the node."""
    if exc.retryable:
        log.info("agent of %s did not answer: %s", slot, exc)
    elif exc.decision.record is OnRecord.QUARANTINE:
        return quarantine(state, inst, str(exc), deps.clock())
    else:
        log.warning("agent of %s failed: %s", slot, exc)
    return state


def reachable(deps: Deps, state: ControllerState, inst: Instance) -> bool:
    """Not yet reachable (no pinned host key) is a normal stage of booting, not an error; a
    quarantined node is never contacted again."""
    if inst.id in state.quarantined:
        return False
    return deps.gate is None or deps.gate.reachable(inst)


def remember_agents(
    state: ControllerState, records: Sequence[Record], answered: frozenset[str], now: float
) -> ControllerState:
    """When each live instance's agent last answered (a silent one is replaced, see reconcile);
    what is kept about instances no longer live is dropped."""
    live = {r.key: r.slot for r in records if r.state in LIVE}
    seen = {k: t for k, t in state.agent_seen.items() if k in live}
    seen.update({k: now for k, slot in live.items() if slot in answered})
    rejected = {k: v for k, v in state.rejected.items() if k in live}
    return replace(state, agent_seen=seen, rejected=rejected)


def worst_p99(statuses: Mapping[str, AgentStatus]) -> dict[str, float]:
    """Per workload, the highest p99 latency (ms, over the server's last minute) of its ready
    servers, as their agents report it: what the SLO guard acts on and what /metrics exports against
    the SLO. The worst server rather than a mean: one overloaded GPU misses the SLO for its share of
    the requests even when the others are fast."""
    p99: dict[str, float] = {}
    for st in statuses.values():
        for srv in st.servers:
            if srv.state == "ready" and srv.latency_ms_p99 is not None:
                p99[srv.workload] = max(p99.get(srv.workload, 0.0), srv.latency_ms_p99)
    return p99


def agent_facts(statuses: Mapping[str, AgentStatus], contact: bool) -> tuple[dict[str, int] | None, dict[str, str]]:
    """What the agents that answered say, for health (loop/status/health.py): ready servers per workload
    (None when agents are not contacted: nothing is known), and the errors they report by slot."""
    if not contact:
        return None, {}
    ready: dict[str, int] = {}
    errors: dict[str, str] = {}
    for slot, st in sorted(statuses.items()):
        for srv in st.servers:
            if srv.state == "ready":
                ready[srv.workload] = ready.get(srv.workload, 0) + 1
        failed = [
            f"server {s.name} failed: {s.last_error or 'no error given'}" for s in st.servers if s.state == "failed"
        ]
        said = ([st.error] if st.error else []) + failed
        if said:
            errors[slot] = "; ".join(said)
    return ready, errors
