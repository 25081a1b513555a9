"""Instances the cloud takes away: spot interruptions, rebalance recommendations, stops, scheduled
retirements. Pure; one step of reconcile.diff, kept apart so that reconcile stays about plans.

The tick that reads a notice moves the record to GOING_AWAY (lifecycle.going_away). It is then
no longer its slot's instance, so reconcile launches the slot's replacement in the same tick: an
involuntary disruption, never held back by the disruption budget, and the going instance's price
does not count against max_cost_per_hour. Meanwhile the going instance keeps what it runs:

- without a gateway nothing else can take its traffic early, so it serves until every workload it
  serves is covered again by ready planned servers (make-before-break), then it is let go
  (terminated); EC2 reclaims a spot instance two minutes after the warning anyway (it vanishes);
- with a gateway (`drained` is not None: the server names the gateway has drained), its servers
  are drained there at once (`to_drain`: the gateway sends them nothing new and waits for what
  they hold), and it is let go once the gateway reports every one of them drained.

A going instance that serves nothing is let go at once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from autoscaler.core.layout import PlannedServer
from autoscaler.core.lifecycle import Record, State

Key = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Leaving:
    """What to do with the going instances this tick."""

    let_go: tuple[tuple[Record, str], ...] = ()  # (record, why) to terminate now
    to_drain: tuple[Key, ...] = ()  # (slot, attempt) whose servers the gateway should drain


def leaving(
    records: Sequence[Record],
    servers: Mapping[Key, tuple[PlannedServer, ...]],
    covered: Mapping[str, bool],
    drained: frozenset[str] | None = None,
) -> Leaving:
    """The going instances (GOING_AWAY records) to let go, and those still to drain; `servers`:
    what each one's agent was last told to run; `covered`: workload -> every planned server of it
    is ready (a workload the layout does not plan is covered)."""
    let_go: list[tuple[Record, str]] = []
    to_drain: list[Key] = []
    for r in records:
        if r.state is not State.GOING_AWAY:
            continue
        mine = servers.get(r.key, ())
        if not mine:
            let_go.append((r, "going away and serves nothing"))
        elif drained is not None:
            if all(s.name in drained for s in mine):
                let_go.append((r, "going away, drained at the gateway"))
            else:
                to_drain.append(r.key)
        elif all(covered.get(s.workload, True) for s in mine):
            let_go.append((r, "going away, its workloads are served by their replacements"))
    return Leaving(tuple(let_go), tuple(to_drain))
