"""Diff the fleet as observed against the target layout: ordered actions. Pure.

One tick, in named steps (`diff`):
1. records: the newest usable record per slot (older usable attempts are duplicates).
2. launches: slots the layout has and the fleet lacks; replacements of instances not ready in
   time or whose agent went silent; none that would lift the cost above max_cost_per_hour.
3. moves (moves.py): which servers each ready GPU runs after this tick. rollout.py states and
   keeps the invariant (no workload's ready capacity falls below its floor while its replacement
   does not serve); blocking.py tells moves that wait from moves that would wait forever; surge.py
   starts those early as stand-ins on borrowed room or surge instances, or, where a policy limit
   leaves no room, removes the servers in their way first and reports a Breach.
4. configures: an assignment for each ready instance whose servers changed, or whose agent is behind.
5. retire: surplus and idle surge instances whose servers have all left are drained and
   terminated (a surplus one that surge.py keeps for stand-ins stays: a spare); those not ready
   yet are terminated at once. With contacted agents
   (`Limits.agent_drain_s` > 0) a drained instance is terminated only once its agent reports
   none of its servers still stopping (`FleetView.busy_agents`), or agent_drain_s after its drain.
   The serving ones go only as far as the disruption budget allows (disruption.py).
6. closeouts: older attempts, drained instances (as in 5), going instances let go (going_away.py:
   a spot interruption's instance goes once its replacement serves, drained at the gateway if
   one runs), failed launches, orphans. A slot whose instance is going away has no usable record,
   so step 2 launches it again at once.
Actions come in that order: launches, configures, drains, terminations.

With a gateway (`FleetView.drained` not None) a server that may leave drains first: it stays in
its agent's assignment (`Diff.draining` names it, so the gateway sends it nothing new) until the
gateway reports it drained (`FleetView.draining_book`: those whose drain began in an earlier
tick); an instance is drained only once all its servers have left.

A move completes a link per tick (start beside, then stop once the new server reports ready), so
a diff that starts servers while others wait for them says so (`settling`): the controller then
ticks again after scaling.settle_s instead of interval_s. So does one that stops servers while
others are blocked (on MIG a planned slice waits a tick for the units a leaving slice frees). `baseline` (the capacity when the
current change began) goes back to the controller, which hands it in again next tick
(`FleetView.baseline`) until the change is over (`converged`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from autoscaler.core.fleet.disruption import allowed_slots
from autoscaler.core.fleet.going_away import Leaving, leaving
from autoscaler.core.fleet.lifecycle import USABLE, Reason, Record, State
from autoscaler.core.layout.layout_types import Layout, PlannedServer, is_stand_in
from autoscaler.core.rollout.actions import (
    Action,
    Configure,
    Drain,
    FleetView,
    GpuFits,
    Launch,
    Limits,
    Terminate,
    fleet_cost,
    judge_from_fits,
    shares_fit,
)
from autoscaler.core.rollout.moves import Moves, plan_moves
from autoscaler.core.rollout.rollout import RolloutStep
from autoscaler.core.rollout.surge import Breach, is_surge_slot

__all__ = [
    "Action",
    "Configure",
    "Diff",
    "Drain",
    "FleetView",
    "GpuFits",
    "Launch",
    "Limits",
    "Terminate",
    "diff",
    "judge_from_fits",
    "shares_fit",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Diff:
    actions: tuple[Action, ...]
    notes: tuple[str, ...] = ()  # things deliberately not done (budget, waits), for logs and status
    settling: bool = False  # servers start on ready instances while others wait for them
    draining: frozenset[str] = frozenset()  # servers that may leave once the gateway drained them
    to_drain: tuple[tuple[str, int], ...] = ()  # going records whose servers the gateway drains (going_away.py)
    breaches: tuple[Breach, ...] = ()  # invariant broken because a policy limit left no other way
    converged: bool = False  # the fleet is the layout: nothing to start, stop, launch or retire
    baseline: Mapping[str, float] | None = None  # capacity before the change; None once converged
    surge_slots: frozenset[str] = frozenset()  # surge instances kept or launched
    bursts: tuple[str, ...] = ()  # stand-ins started this tick in free share (surge.py: bursting)
    step: RolloutStep | None = None  # the capacity accounting of the moves


def diff(layout: Layout, view: FleetView, now: float, limits: Limits) -> Diff:
    """Ordered actions that move the fleet towards `layout`; see the module docstring."""
    current, extra = _current_records(view.records)
    launches, replaced = _launches(layout, current, view, now, limits)
    notes: list[str] = []
    launches = _within_budget(launches, replaced, view, limits, notes)
    moves = plan_moves(layout, current, view, limits, launches, notes)
    launches += [Launch(s, t, view.max_attempt.get(s, -1) + 1, why) for s, t, why in moves.surge.launches]
    configures, drains, ends = _assign_and_retire(layout, current, view, moves, limits)
    drains, ends = _within_disruption_budget(drains, ends, current, view, limits, notes)
    closeouts, stopping = _closeouts(view, extra, now, limits)
    going = leaving(view.records, view.leaving, _covered(layout, view), view.going_drained, now, limits.drain_timeout_s)
    ends = replaced + ends + closeouts + _let_go(going) + _orphans(view)
    step = moves.step
    converged = step.converged and not launches and not drains and not ends and _all_ready(layout, current)
    settling = (bool(step.started) and (bool(step.blocked) or _retiring_left(step, layout))) or bool(step.draining)
    settling = settling or bool(stopping) or (bool(drains) and limits.agent_drain_s > 0)
    # a planned MIG slice waits for units a slice leaving now (or one its agent still reports) holds
    settling = settling or (bool(step.blocked) and (bool(step.stopped) or bool(view.held_slices)))
    if step.draining:
        notes.append(f"waiting for the gateway to drain {', '.join(sorted(step.draining))}")
    if stopping:
        notes.append(f"waiting for the agents of {', '.join(stopping)} to stop their servers before termination")
    return Diff(
        actions=tuple(launches + configures + drains + ends),
        notes=tuple(notes),
        settling=settling,
        draining=step.draining,
        to_drain=going.to_drain,
        breaches=moves.surge.breaches,
        converged=converged,
        baseline=None if converged else dict(step.baseline),
        surge_slots=moves.surge.keep | {s for s, _, _ in moves.surge.launches},
        bursts=moves.surge.bursts,
        step=step,
    )


# -- 1. records -------------------------------------------------------------------------------------
def _current_records(records: Sequence[Record]) -> tuple[dict[str, Record], list[Record]]:
    """The newest usable record per slot, and older usable attempts (duplicates)."""
    by_slot: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        if r.state in USABLE:
            by_slot[r.slot].append(r)
    current = {slot: max(rs, key=lambda r: r.attempt) for slot, rs in by_slot.items()}
    extra = [r for rs in by_slot.values() for r in rs if r is not current[r.slot]]
    return current, extra


def _all_ready(layout: Layout, current: Mapping[str, Record]) -> bool:
    desired = {s.slot for s in layout.slots}
    return all(r.state is State.READY for r in current.values()) and set(current) == desired


# -- 2. launches ------------------------------------------------------------------------------------
def _launches(
    layout: Layout, current: Mapping[str, Record], view: FleetView, now: float, limits: Limits
) -> tuple[list[Action], list[Action]]:
    """Launch slots with no usable record; replace those not ready in time, or whose agent is lost."""
    launches: list[Action] = []
    replaced: list[Action] = []
    going = {r.slot for r in view.records if r.state is State.GOING_AWAY}
    for spec in layout.slots:
        rec = current.get(spec.slot)
        nxt = view.max_attempt.get(spec.slot, -1) + 1
        ct = spec.capacity_type
        if rec is None:
            why = "replace: going away" if spec.slot in going else "planned"
            launches.append(Launch(spec.slot, spec.instance_type, nxt, why, capacity_type=ct))
        elif rec.state is State.REQUESTED:
            launches.append(
                Launch(spec.slot, spec.instance_type, rec.attempt, "resume interrupted launch", capacity_type=ct)
            )
        elif (end := _replace_reason(rec, view, now, limits)) is not None:
            replaced.append(end)
            launches.append(
                Launch(spec.slot, spec.instance_type, nxt, f"replace: {end.reason.value}", capacity_type=ct)
            )
    return launches, replaced


def _replace_reason(rec: Record, view: FleetView, now: float, limits: Limits) -> Terminate | None:
    if rec.state in (State.PENDING, State.RUNNING) and now - rec.created_at > limits.ready_timeout_s:
        detail = f"not ready after {now - rec.created_at:.0f} s"
        return Terminate(rec.slot, rec.attempt, rec.instance_id, Reason.READY_TIMEOUT, detail)
    seen = view.agent_seen.get(rec.key)
    if rec.state is State.READY and seen is not None and now - seen > limits.ready_timeout_s:
        detail = f"agent silent for {now - seen:.0f} s"
        return Terminate(rec.slot, rec.attempt, rec.instance_id, Reason.AGENT_LOST, detail)
    return None


def _within_budget(
    launches: list[Action], replaced: list[Action], view: FleetView, limits: Limits, notes: list[str]
) -> list[Action]:
    """Drop new launches that would lift the fleet's hourly cost above max_cost_per_hour."""
    if limits.max_cost_per_hour is None:
        return launches
    cost = fleet_cost(view, replaced)
    out: list[Action] = []
    for a in launches:
        assert isinstance(a, Launch)
        price = view.prices.get(a.offering, 0.0)
        if cost + price > limits.max_cost_per_hour + 1e-9:
            notes.append(
                f"launch of {a.slot} ({a.instance_type}) blocked by max_cost_per_hour "
                f"{limits.max_cost_per_hour}: fleet would cost {cost + price:.2f}/h"
            )
            continue
        cost += price
        out.append(a)
    return out


def _retiring_left(step: RolloutStep, layout: Layout) -> bool:
    """A server the layout no longer wants still runs, other than one whose successor is beside it
    (a handover: once the successor serves it carries nothing, and the next tick removes it; no
    early tick is needed for that)."""
    wanted = {s.agent_key() for _, s in layout.servers()}
    for servers in step.assign.values():
        handed = {s.replaces for s in servers if s.replaces}
        if any(s.agent_key() not in wanted and s.name not in handed for s in servers):
            return True
    return False


# -- 4, 5. configures and retirement ------------------------------------------------------------------
def _assign_and_retire(
    layout: Layout, current: Mapping[str, Record], view: FleetView, moves: Moves, limits: Limits
) -> tuple[list[Action], list[Action], list[Action]]:
    """Configures of ready instances whose servers change; drains and terminations of surplus and
    idle surge instances once every server has left."""
    desired = {s.slot for s in layout.slots}
    by_slot: dict[str, list[PlannedServer]] = defaultdict(list)
    for (slot, _), servers in sorted(moves.step.assign.items()):
        by_slot[slot].extend(servers)
    configures: list[Action] = []
    drains: list[Action] = []
    ends: list[Action] = []
    for slot, rec in sorted(current.items()):
        servers = tuple(by_slot.get(slot, ()))
        applied = view.applied.get(slot)
        kept = slot in desired or slot in moves.surge.keep  # surge instances and spares with stand-ins
        if kept or servers:
            if rec.state is State.READY and (_differs(servers, applied) or slot in view.stale_agents):
                configures.append(Configure(slot, servers, _why(slot, servers, applied, desired)))
            continue
        if rec.state is State.READY and applied:
            drains.append(Drain(slot, rec.attempt, _surplus(slot)))
            if limits.agent_drain_s > 0:
                continue  # terminated once its agent has stopped the servers (_closeouts)
        ends.append(Terminate(slot, rec.attempt, rec.instance_id, Reason.SCALE_IN, _surplus(slot)))
    return configures, drains, ends


def _within_disruption_budget(
    drains: list[Action],
    ends: list[Action],
    current: Mapping[str, Record],
    view: FleetView,
    limits: Limits,
    notes: list[str],
) -> tuple[list[Action], list[Action]]:
    """Surplus slots retired now only as far as the disruption budget allows (disruption.py): a
    drain and a scale-in termination are both the start of one voluntary disruption."""
    slots = {a.slot for a in drains} | {a.slot for a in ends}
    ok, held = allowed_slots([current[s] for s in sorted(slots)], view.records, view.applied, limits.max_unavailable)
    notes.extend(held)
    return [a for a in drains if a.slot in ok], [a for a in ends if a.slot in ok]


def _covered(layout: Layout, view: FleetView) -> dict[str, bool]:
    """Workload -> whether every server the layout plans for it reports ready at its planned size
    (what lets a going instance go: its replacement serves)."""
    applied = {s.name: s.agent_key() for servers in view.applied.values() for s in servers}
    covered: dict[str, bool] = {}
    for _, srv in layout.servers():
        ready = srv.name in view.ready_servers and applied.get(srv.name, srv.agent_key()) == srv.agent_key()
        covered[srv.workload] = covered.get(srv.workload, True) and ready
    return covered


def _let_go(going: Leaving) -> list[Action]:
    return [Terminate(r.slot, r.attempt, r.instance_id, Reason.LET_GO, why) for r, why in going.let_go]


def _surplus(slot: str) -> str:
    return "surge instance no longer needed" if is_surge_slot(slot) else "surplus slot"


def _differs(wanted: Sequence[PlannedServer], applied: Sequence[PlannedServer] | None) -> bool:
    if applied is None:
        return True
    return sorted(s.agent_key() for s in wanted) != sorted(s.agent_key() for s in applied)


def _why(slot: str, wanted: Sequence[PlannedServer], applied: Sequence[PlannedServer] | None, desired: set[str]) -> str:
    if applied is None:
        return "first assignment"
    added = {s.name for s in wanted} - {s.name for s in applied}
    removed = {s.name for s in applied} - {s.name for s in wanted}
    if not added and not removed:
        return "servers changed or agent behind"
    what = f"add {sorted(added)} remove {sorted(removed)}"
    if slot not in desired:
        return f"{_surplus(slot)}: {what}" + ("" if added else ": keep servers until replacements are ready")
    stand = sorted(n for n in added if is_stand_in(n))
    return what + (f" (stand-ins {stand})" if stand else "")


# -- 6. closeouts -----------------------------------------------------------------------------------
def _closeouts(view: FleetView, extra: Sequence[Record], now: float, limits: Limits) -> tuple[list[Action], list[str]]:
    """Older usable attempts, drained instances and failed launches are closed. A drained instance
    is terminated once its agent reports none of its servers still stopping (a server answers what
    it holds before it exits; terminating its instance first would cut those requests off), or
    `limits.agent_drain_s` after its drain began. Also the slots that still wait for that."""
    out: list[Action] = [
        Terminate(r.slot, r.attempt, r.instance_id, Reason.DUPLICATE, "a newer attempt exists") for r in extra
    ]
    waiting: list[str] = []
    for r in view.records:
        if r.state is State.DRAINING:
            if r.key in view.busy_agents and now - r.updated_at < limits.agent_drain_s:
                waiting.append(r.slot)
                continue
            detail = (
                "drained"
                if r.key not in view.busy_agents
                else f"its agent still stops servers after {now - r.updated_at:.0f} s"
            )
            out.append(Terminate(r.slot, r.attempt, r.instance_id, Reason.SCALE_IN, detail))
        elif r.state is State.FAILED:
            out.append(Terminate(r.slot, r.attempt, r.instance_id, Reason.RELEASE, "failed launch"))
    return out, sorted(waiting)


def _orphans(view: FleetView) -> list[Action]:
    """Listed fleet instances no live record claims are terminated (again: terminating twice is
    harmless). That includes a record's own instance when its record is TERMINATING and it is still
    running: a crash came between the transition and the provider call (loop/steps/actuator.py), and
    this re-send is what finishes it (loop/steps/pool_step.py turns it back into a pool return when that
    was the intent)."""
    ending = {r.instance_id for r in view.records if r.state is State.TERMINATING}
    return [
        Terminate(
            slot,
            None,
            iid,
            Reason.SCALE_IN,
            "terminating, still listed: re-sent" if iid in ending else "fleet instance with no open record",
        )
        for slot, iid in view.orphans
    ]
