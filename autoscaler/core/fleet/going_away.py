"""Instances the cloud takes away: spot interruptions, rebalance recommendations, stops, scheduled
retirements. Pure; one step of reconcile.diff, kept apart so that reconcile stays about plans.

The tick that reads a notice moves the record to GOING_AWAY (lifecycle.going_away, with
`leaves_at`: when the cloud takes it). It is then no longer its slot's instance, so reconcile
launches the slot's replacement in the same tick: an involuntary disruption, never held back by
the disruption budget, and the going instance's price does not count against max_cost_per_hour.
Meanwhile the going instance keeps serving:

- without a gateway nothing else can take its traffic early, so it serves until every workload it
  serves is covered again by ready planned servers (make-before-break), then it is let go
  (terminated); EC2 reclaims a spot instance two minutes after the warning anyway (it vanishes);
- with a gateway (`drained` is not None) its servers go on receiving requests until its
  replacement serves (every workload it serves is covered: with a gateway, covered means the
  gateway sends the planned servers requests) or until it is about to be taken, whichever comes
  first; then they are drained there (`to_drain`: the gateway sends them nothing new and waits
  for the requests they hold, at most gateway.drain_timeout_s), and the instance is let go once
  the gateway reports every one of them drained. *About to be taken*: less than `drain_s`
  (drain_timeout_s) is left before `leaves_at`, so a drain begun later could not finish; a spot
  warning (two minutes) with the default 30 s drain serves 90 s more, then drains. A rebalance
  recommendation has no deadline: it waits for the replacement.

A going instance that serves nothing is let go at once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from autoscaler.core.fleet.lifecycle import Record, State
from autoscaler.core.layout.layout_types import PlannedServer

Key = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Leaving:
    """What to do with the going instances this tick."""

    let_go: tuple[tuple[Record, str], ...] = ()  # (record, why) to terminate now
    to_drain: tuple[Key, ...] = ()  # (slot, attempt) whose servers the gateway should drain


def taken_soon(record: Record, now: float, drain_s: float) -> bool:
    """Less than a drain's time is left before the cloud takes it (no deadline: never)."""
    return record.leaves_at is not None and now + drain_s >= record.leaves_at


def leaving(
    records: Sequence[Record],
    servers: Mapping[Key, tuple[PlannedServer, ...]],
    covered: Mapping[str, bool],
    drained: frozenset[Key] | None = None,
    now: float = 0.0,
    drain_s: float = 0.0,
) -> Leaving:
    """The going instances (GOING_AWAY records) to let go, and those whose servers the gateway
    drains now. `servers`: what each one's agent was last told to run; `covered`: workload ->
    every planned server of it is ready (a workload the layout does not plan is covered);
    `drained`: the going records whose servers the gateway has all drained (None: no gateway)."""
    let_go: list[tuple[Record, str]] = []
    to_drain: list[Key] = []
    for r in records:
        if r.state is not State.GOING_AWAY:
            continue
        mine = servers.get(r.key, ())
        served = all(covered.get(s.workload, True) for s in mine)
        if not mine:
            let_go.append((r, "going away and serves nothing"))
        elif drained is None:
            if served:
                let_go.append((r, "going away, its workloads are served by their replacements"))
        elif r.key in drained:
            let_go.append((r, "going away, drained at the gateway"))
        elif served or taken_soon(r, now, drain_s):
            to_drain.append(r.key)
    return Leaving(tuple(let_go), tuple(to_drain))
