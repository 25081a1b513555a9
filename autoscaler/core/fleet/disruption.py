"""The disruption budget: how many voluntary disruptions may be in flight at once. Pure; one step of
reconcile.diff, kept apart so that reconcile stays about plans (Karpenter's NodePool budgets).

Voluntary disruptions are the ones the autoscaler chooses: retiring a serving instance the layout
no longer wants (scale-in, and consolidation onto fewer or cheaper instances: both leave surplus
slots). In flight are the instances being disrupted now, for any reason: draining, terminating
(until the provider no longer lists them) or going away. A new voluntary disruption starts only
while fewer than `max_unavailable` are in flight (scaling.disruption_budget, a count or a
percentage of the fleet rounded up, resolved by the caller); the rest wait for a later tick and
the tick's notes say so. Involuntary ones are never held back and are not in this step at all:
replacements of instances that failed, went silent or are going away (spot interruptions),
closing duplicates, failed launches and orphans. A surplus instance that is not serving yet
(requested, pending or running without its agent) disrupts nothing and is retired freely.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from autoscaler.core.fleet.lifecycle import Record, State
from autoscaler.core.layout.layout_types import PlannedServer

IN_FLIGHT = frozenset({State.DRAINING, State.TERMINATING, State.GOING_AWAY})


def in_flight(records: Sequence[Record]) -> int:
    """Instances being disrupted now (draining, terminating, going away)."""
    return sum(r.state in IN_FLIGHT for r in records)


def allowed_slots(
    surplus: Sequence[Record],
    records: Sequence[Record],
    applied: Mapping[str, tuple[PlannedServer, ...]],
    max_unavailable: int | None,
) -> tuple[frozenset[str], list[str]]:
    """Which surplus slots may be retired this tick, and notes for those that wait. `surplus`:
    the current record of each surplus slot with nothing still needed on it. Serving (ready)
    slots are budgeted, emptiest first (fewest servers, then name); the others always go."""
    serving = sorted(
        (r for r in surplus if r.state is State.READY), key=lambda r: (len(applied.get(r.slot, ())), r.slot)
    )
    free = {r.slot for r in surplus if r.state is not State.READY}
    if max_unavailable is None:
        return frozenset(free | {r.slot for r in serving}), []
    room = max(0, max_unavailable - in_flight(records))
    go, wait = serving[:room], serving[room:]
    notes = [
        f"scale-in of {', '.join(r.slot for r in wait)} held by the disruption budget: "
        f"{in_flight(records)} in flight, max_unavailable {max_unavailable}"
    ]
    return frozenset(free | {r.slot for r in go}), notes if wait else []
