"""The adopt step of a tick, between observe and sync: the instances no record knows (a fresh or
lost state file, a standby that took over from another host, an advisory run's first tick) are
taken as they run (core/fleet/adopt.py decides). Their agents are asked what they run (reads only,
in a bounded pool), the records and assignments are written to the store, and, where the store
holds no layout yet, the layout that runs; the observation gains the adopted agents' answers, so
the rest of the tick sees these servers as serving, as the store that was lost did."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from autoscaler.config.offerings import offering_prices
from autoscaler.config.policy import Policy
from autoscaler.core.fleet.adopt import Adopted, AdoptInput, GatewayAddress, adopt, adoptable
from autoscaler.core.fleet.lifecycle import State, unclaimed
from autoscaler.core.layout.layout_types import Judge
from autoscaler.core.rollout.surge_types import is_surge_slot
from autoscaler.core.routing.routes import GatewayView, gateway_name
from autoscaler.fleet.base import Instance
from autoscaler.loop.state.controller_state import ControllerState
from autoscaler.loop.tick.inputs import workload_info
from autoscaler.loop.tick.observe import _status_failed, reachable
from autoscaler.loop.tick.records import Deps, Observation
from autoscaler.transport.base import AgentStatus, TransportError, parse_status

log = logging.getLogger(__name__)
POOL = 16  # agents asked at once (a fleet of thousands adopted in one tick)


@dataclass(frozen=True, slots=True)
class AdoptResult:
    obs: Observation  # with the adopted agents' answers
    state: ControllerState
    adopted: Adopted | None  # None: nothing to adopt


def adopt_step(deps: Deps, policy: Policy, judge: Judge, state: ControllerState, obs: Observation) -> AdoptResult:
    """Adopt the instances no record knows; write what was adopted; return the observation and
    state the rest of the tick goes on with."""
    store = deps.store
    records = store.open_records()
    found = adoptable(obs.instances.values(), records, store.closed_among(unclaimed(obs.instances.values(), records)))
    if not found:
        return AdoptResult(obs, state, None)
    raw, state = _statuses(deps, state, [i for i in found if i.state == "running"])
    out = adopt(_input(deps, policy, judge, found, raw, obs), obs.now)
    store.apply(list(out.changes))
    for key, (gen, servers) in sorted(out.applied.items()):
        store.set_applied(key, servers, gen, obs.now)
        store.next_assignment_generation(gen)  # a new assignment goes above what the agent holds
    if out.layout is not None and store.current_layout() is None:
        store.save_layout(out.layout, "adopted: what ran before this controller", obs.now)
        state = replace(state, plan_generation=max(state.plan_generation, out.plan_generation))
    if out.silent:  # its silence counts from now: past ready_timeout_s it is replaced (AGENT_LOST)
        state = replace(state, agent_seen={**state.agent_seen, **dict.fromkeys(out.silent, obs.now)})
    for note in out.notes:
        log.warning("%s", note)
    log.info(
        "adopted %d instance(s) no record knew (%d with servers: %s)",
        len(found),
        len(out.applied),
        ", ".join(f"{slot}#{attempt}" for slot, attempt in sorted(out.applied)) or "none",
    )
    going = {c.record.instance_id for c in out.changes if c.record.state is State.GOING_AWAY}
    return AdoptResult(_with_statuses(obs, [i for i in found if i.id not in going], raw), state, out)


def _input(
    deps: Deps,
    policy: Policy,
    judge: Judge,
    found: Sequence[Instance],
    raw: Mapping[str, Mapping[str, Any]],
    obs: Observation,
) -> AdoptInput:
    agents = policy.agents
    return AdoptInput(
        instances=found,
        statuses=raw,
        gateway=None if obs.gateway is None else _addresses(obs.gateway),
        hosts={i.id: agents.host_override or i.address or "127.0.0.1" for i in found},  # as the actuator binds
        port_bases={i.id: agents.server_base_port if i.port_base is None else i.port_base for i in found},
        workloads=workload_info(policy, deps.model_root),
        models={w.name: w.model for w in policy.workloads},
        gpus={t.name: (t.gpu,) * t.gpus for t in policy.instance_types},
        prices=offering_prices(policy),
        rates=dict(obs.reading.rates),
        judge=judge,
        contact=deps.contact,
        surge=frozenset(i.slot for i in found if is_surge_slot(i.slot)),
        held=() if obs.gateway is None else [(w, n, s.address) for (w, n), s in sorted(obs.gateway.servers.items())],
    )


def _addresses(view: GatewayView) -> GatewayAddress:
    """Where the gateway holds a server of an instance's attempt (under its gateway name)."""

    def address(workload: str, name: str, attempt: int) -> str | None:
        seen = view.servers.get((workload, gateway_name(name, attempt)))
        return None if seen is None else seen.address

    return address


def _statuses(
    deps: Deps, state: ControllerState, found: Sequence[Instance]
) -> tuple[dict[str, dict[str, Any]], ControllerState]:
    """Instance id -> its agent's status document, for the agents that answered (read only); a
    host key or login failure quarantines the node, as observe does."""
    if not deps.contact:
        return {}, state
    asked = [i for i in found if reachable(deps, state, i)]
    with ThreadPoolExecutor(max_workers=max(1, min(POOL, len(asked)))) as pool:
        answers = list(pool.map(lambda i: _ask(deps, i), asked))
    out: dict[str, dict[str, Any]] = {}
    for inst, answer in zip(asked, answers, strict=True):
        if isinstance(answer, TransportError):
            state = _status_failed(deps, state, inst.slot, inst, answer)
        elif isinstance(answer, dict):
            out[inst.id] = answer
    return out, state


def _ask(deps: Deps, inst: Instance) -> Any:
    try:
        answer = deps.transport.status(inst)
        parse_status(answer)  # the shape observe accepts, or not adopted as answering
        return answer
    except TransportError as exc:
        return exc


def _with_statuses(obs: Observation, found: Sequence[Instance], raw: Mapping[str, Mapping[str, Any]]) -> Observation:
    """The observation with the adopted agents' answers, by slot (the newest attempt's; a going
    one's are left out, as observe leaves them out: its servers carry the slot's names)."""
    statuses: dict[str, AgentStatus] = dict(obs.statuses)
    for inst in sorted(found, key=lambda i: i.attempt):
        if inst.id in raw:
            statuses[inst.slot] = parse_status(raw[inst.id])
    return replace(obs, statuses=statuses)
