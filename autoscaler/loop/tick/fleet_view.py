"""What is serving now: the fleet as reconcile and the gateway step see it, built from the store's
open records and assignments and this tick's observation.

It answers, once per tick and in one place, which slots are live (the newest attempt of each;
going-away instances apart, as they leave), what each one's agent was told to run, which servers
are ready (reported ready by their agents; with a gateway, only those it also sends requests to,
so a replacement covers its workload once it really serves), which agents hold an older
assignment than the one stored, and which drained instances' agents may still be stopping
servers. No side effects: the controller reads the store and passes its answers in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from autoscaler.core.fleet.lifecycle import LIVE, Record, State
from autoscaler.core.layout.layout_types import PlannedServer
from autoscaler.core.rollout.reconcile import FleetView
from autoscaler.core.routing.routes import GatewayNames
from autoscaler.loop.state.controller_state import ControllerState
from autoscaler.loop.tick.records import Observation

Key = tuple[str, int]
Applied = Mapping[Key, tuple[int, tuple[PlannedServer, ...]]]


@dataclass(frozen=True, slots=True)
class Live:
    """The live records of a tick: every serving one by attempt (going-away ones too), the
    current record of each slot (those not going away), and what each current slot runs."""

    serving: list[Record]
    current: dict[str, Record]
    applied: dict[str, tuple[PlannedServer, ...]]


def live_records(records: Sequence[Record], applied_all: Applied) -> Live:
    serving = [r for r in sorted(records, key=lambda r: r.attempt) if r.state in LIVE]
    current = {r.slot: r for r in serving if r.state is not State.GOING_AWAY}
    applied = {s: applied_all[r.key][1] for s, r in current.items() if r.key in applied_all}
    return Live(serving, current, applied)


def agent_ready(fleet: Live, obs: Observation, *, contact: bool) -> frozenset[str]:
    """Servers their agents report ready; without agents to ask (transport none), every server
    assigned to a ready instance."""
    if contact:
        return frozenset(n for st in obs.statuses.values() for n in st.ready_names())
    return frozenset(
        s.name for slot, servers in fleet.applied.items() if fleet.current[slot].state is State.READY for s in servers
    )


def ready_servers(fleet: Live, obs: Observation, *, contact: bool, names: GatewayNames | None) -> frozenset[str]:
    """agent_ready; with a gateway, only the servers it also sends requests to."""
    ready = agent_ready(fleet, obs, contact=contact)
    if obs.gateway is None or names is None:
        return ready
    return ready & names.to_layout(obs.gateway.serving())


def busy_agents(records: Sequence[Record], applied_all: Applied, obs: Observation, *, contact: bool) -> frozenset[Key]:
    """Drained instances whose agent may still be stopping servers: it reports some still
    draining or running, holds an older assignment than its drain, or did not answer."""
    if not contact:
        return frozenset()
    out = set()
    for r in records:
        if r.state is not State.DRAINING:
            continue
        st = obs.statuses.get(r.slot)
        gen = applied_all[r.key][0] if r.key in applied_all else 0
        if st is None or st.draining or st.servers or (st.assignment_generation or 0) < gen:
            out.add(r.key)
    return frozenset(out)


def held_slices(fleet: Live, obs: Observation) -> dict[str, tuple[tuple[int, str, int], ...]]:
    """Per current slot, the MIG slices its agent reports (`status.mig`) that no server of its
    assignment runs in: an old slice whose server is still stopping (the agent destroys it once
    the server exited), or one the agent did not create. Their units are not free yet."""
    out = {}
    for slot in fleet.current:
        st = obs.statuses.get(slot)
        if st is None or not isinstance(st.mig, dict):
            continue
        used = {(s.gpu_index, s.mig_profile, s.mig_start) for s in fleet.applied.get(slot, ())}
        held = sorted(
            (g["index"], sl["profile"], sl["start"])
            for g in st.mig.get("gpus") or []
            if isinstance(g, dict) and isinstance(g.get("index"), int)
            for sl in g.get("slices") or []
            if isinstance(sl, dict)
            and sl.get("uuid")
            and isinstance(sl.get("profile"), str)
            and isinstance(sl.get("start"), int)
            and (g["index"], sl["profile"], sl["start"]) not in used
        )
        if held:
            out[slot] = tuple(held)
    return out


def stale_agents(fleet: Live, applied_all: Applied, obs: Observation) -> frozenset[str]:
    """Slots whose agent answered with an older assignment than the one stored for it."""
    return frozenset(
        s
        for s, r in fleet.current.items()
        if r.key in applied_all
        and s in obs.statuses
        and (obs.statuses[s].assignment_generation or 0) < applied_all[r.key][0]
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ViewInput:
    """The store's answers and the controller's settings that a FleetView is built from."""

    records: list[Record]
    applied_all: Applied
    max_attempt: Mapping[str, int]  # of the slots the tick may launch (the layout's, the open records')
    slot_tops: Mapping[str, int]  # the slot names ever used (store_slots.py)
    orphans: list[tuple[str, str]]  # (slot, instance id) of live instances no record owns
    prices: Mapping[str, float]
    state: ControllerState
    contact: bool
    names: GatewayNames | None  # with a gateway: its server names in the layout's terms


def fleet_view(obs: Observation, inp: ViewInput) -> FleetView:
    """The fleet for reconcile: open records, what each agent runs, which servers are ready."""
    fleet = live_records(inp.records, inp.applied_all)
    leaving = {
        r.key: inp.applied_all[r.key][1]
        for r in fleet.serving
        if r.state is State.GOING_AWAY and r.key in inp.applied_all
    }
    return FleetView(
        records=inp.records,
        applied=fleet.applied,
        stale_agents=stale_agents(fleet, inp.applied_all, obs),
        ready_servers=ready_servers(fleet, obs, contact=inp.contact, names=inp.names),
        max_attempt=dict(inp.max_attempt),
        slot_tops=dict(inp.slot_tops),
        orphans=inp.orphans,
        prices=dict(inp.prices),
        agent_seen=inp.state.agent_seen,
        leaving=leaving,
        rates=dict(obs.reading.rates),
        baseline=inp.state.rollout_baseline,
        busy_agents=busy_agents(inp.records, inp.applied_all, obs, contact=inp.contact),
        held_slices=held_slices(fleet, obs),
    )
