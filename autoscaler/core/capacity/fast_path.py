"""The fast path between ticks (Knative KPA's panic mode): when to tick at once, and what such a
tick may do. Pure.

When. A watcher reads each workload's rate over a short window (`scaling.fast_path.window_s`,
default 6 s, KPA's panic window) every poll_s. A workload *panics* when that rate exceeds the
capacity its ready servers carry and the capacity its layout has on its way, or reaches `panic_ratio` (default 2, KPA's panic threshold) times
the rate the current layout was planned for. Then the controller ticks at once, at most once per
`min_gap_s`, never while a tick runs; a standby never does (the leader fence, as for any tick).

What. A fast tick goes through the whole tick (the same forecast, plan, fence and actuator) but
only adds capacity: it plans for no less than the current layout's rates, and of the actions its
diff asks for it keeps launches and configurations that only add servers (stand-ins in free share,
core/surge.py, and servers on new instances). It never scales in, drains, terminates or moves
anything: the next regular tick does that, and absorbs or retires what the fast tick started.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from autoscaler.core.layout.layout_types import PlannedServer
from autoscaler.core.rollout.actions import Action, Configure, Launch

EPS = 1e-9


@dataclass(frozen=True, slots=True, kw_only=True)
class Panic:
    workload: str
    rate: float
    why: str


def panicking(
    rates: Mapping[str, float],
    capacity: Mapping[str, float],
    coming: Mapping[str, float],
    planned: Mapping[str, float],
    ratio: float,
) -> list[Panic]:
    """The workloads whose windowed rate outruns their ready capacity (and the capacity the layout
    has on its way: a boot already under way is no reason to tick again) or `ratio` x the rate
    their layout was planned for."""
    out = []
    for w, rate in sorted(rates.items()):
        cap, plan = capacity.get(w, 0.0), planned.get(w)
        if rate > max(cap, coming.get(w, 0.0)) + EPS and rate > 0:
            out.append(Panic(workload=w, rate=rate, why=f"{rate:.1f} req/s above its ready capacity {cap:.1f}"))
        elif plan is not None and plan > 0 and rate >= ratio * plan - EPS:
            out.append(
                Panic(workload=w, rate=rate, why=f"{rate:.1f} req/s, {rate / plan:.1f} x its planned {plan:.1f}")
            )
    return out


def no_less(planned: Mapping[str, float], current: Mapping[str, float]) -> dict[str, float]:
    """The rates a fast tick plans for: never below the current layout's (it never scales in)."""
    return {w: max(v, current.get(w, 0.0)) for w, v in planned.items()}


def additive(actions: Iterable[Action], applied: Mapping[str, Sequence[PlannedServer]]) -> list[Action]:
    """The actions a fast tick keeps: launches, and configurations that keep every server the slot
    runs (same name, same settings) and add some."""
    out: list[Action] = []
    for a in actions:
        if isinstance(a, Launch):
            out.append(a)
        elif isinstance(a, Configure):
            old = {s.agent_key() for s in applied.get(a.slot, ())}
            if old <= {s.agent_key() for s in a.servers}:
                out.append(a)
    return out
