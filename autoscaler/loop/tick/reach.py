"""The controller's out-of-reach step: core/capacity/reach.py judges each workload every tick; this says so
once per change of state (one log line naming the cause) and hands the states to the tick report,
which the status endpoint exports (/v1/headroom's `conditions`, igniter_target_out_of_reach)."""

from __future__ import annotations

import logging

from autoscaler.config.policy import Policy
from autoscaler.core.capacity.forecast import Columns
from autoscaler.core.capacity.reach import WITHIN, Reach, ReachInput, fastest_rises, judge
from autoscaler.loop.state.store import Store
from autoscaler.loop.tick.tuning import headroom_config

log = logging.getLogger(__name__)

HISTORY_S = 3600.0  # the rates a rise is looked for in: the hour the attainment is measured over


class ReachWatch:
    """Each workload's last state, so that only a change is logged (a restart logs the state once)."""

    def __init__(self) -> None:
        self.last: dict[str, Reach] = {}

    def update(
        self,
        policy: Policy,
        store: Store,
        now: float,
        headroom: dict[str, float],
        attainment: dict[str, float | None],
    ) -> dict[str, Reach]:
        sc = policy.scaling
        cap = _cap(policy)
        reaction_s = sc.interval_s + sc.boot_s
        history: Columns | None = None
        rises: dict[str, float] | None = None
        out: dict[str, Reach] = {}
        for w in policy.workloads:
            h, got = headroom.get(w.name, 0.0), attainment.get(w.name)
            rates: list[tuple[float, float]] = []
            rise: float | None = None
            if got is not None and got < sc.target_attainment:  # read only when a rise may decide
                if history is None:
                    # the rows the forecast holds (keep: its window may reach further back)
                    history = store.rate_window(now - HISTORY_S, now, keep=True)
                    found = fastest_rises(history, reaction_s)
                    rises = None if found is None else dict(zip(history.names, found, strict=True))
                if rises is not None:
                    rise = rises.get(w.name, 1.0)  # no reads: fastest_rise of none
                elif w.name in history.names:
                    rates = history.points(history.names.index(w.name))
            inp = ReachInput(
                target=sc.target_attainment,
                headroom=h,
                cap=cap,
                attainment=got,
                reaction_s=reaction_s,
                rates=rates,
                rise=rise,
            )
            out[w.name] = judge(inp)
            self._say(w.name, out[w.name])
        return out

    def _say(self, workload: str, state: Reach) -> None:
        before = self.last.get(workload, WITHIN)
        self.last[workload] = state
        if state.out and (not before.out or before.cause != state.cause):
            log.warning("target out of reach for %s (%s): %s", workload, state.cause, state.detail)
        elif before.out and not state.out:
            log.info("target within reach again for %s (was: %s)", workload, before.cause)


def _cap(policy: Policy) -> float | None:
    """Headroom auto's cap (None with a fixed headroom: a number the operator chose has no cap)."""
    return headroom_config(policy).cap if policy.scaling.headroom == "auto" else None
