"""The warm pool's decisions, pure: which launches start a pooled instance instead of a new one,
what the pool needs this tick (members to launch, to stop, to terminate), and how big `auto` makes
it. The calls are the provider's (fleet/base.py WarmPool); loop/steps/pool_step.py carries them out.

Why per type: a pooled instance is a stopped instance of one type, and only a launch of that type
can start it. Why spot launches never take from the pool: a started pooled instance is on-demand
(as in EC2 Auto Scaling, whose warm pools hold no spot instances).

`auto` (docs/operations.md "Warm pool"): for each type, the most instances of it launched within any
one boot_s over the last day -- the largest scale-out a pool would have had to carry while new
instances booted -- capped at `max`. Launches within boot_s of the fleet's very first launch are
its bring-up, not a burst, and do not count.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from autoscaler.config.offerings import ON_DEMAND
from autoscaler.config.scaling import WarmPoolConfig
from autoscaler.fleet.base import Instance

DAY_S = 86400.0
WARMING = ("pending", "running")


@dataclass(frozen=True, slots=True, kw_only=True)
class Wanted:
    """One launch reconcile asks for (or one instance it retires: Retiring), as the pool sees it."""

    slot: str
    attempt: int
    instance_type: str
    capacity_type: str = ON_DEMAND


@dataclass(frozen=True, slots=True, kw_only=True)
class PoolChanges:
    """What the pool needs this tick: types to launch a member of (one entry each), members to
    stop (initialised), members to terminate (over the target, or stuck warming)."""

    launch: tuple[str, ...] = ()
    stop: tuple[str, ...] = ()
    terminate: tuple[str, ...] = ()

    def empty(self) -> bool:
        return not (self.launch or self.stop or self.terminate)


# An initialised instance the plan retires this tick (scale-in, after its drain): the same facts
# as a launch's, (slot, attempt) of one type and capacity type.
Retiring = Wanted


def returns(
    want: Mapping[str, int],
    members: Sequence[Instance],
    claimed: Collection[str],
    retiring: Sequence[Retiring],
    pending: Mapping[str, int],
) -> list[tuple[str, int]]:
    """(slot, attempt) of the retiring instances stopped into the pool instead of terminated (EC2
    Auto Scaling's ReuseOnScaleIn): on-demand ones of a type whose pool -- its members not claimed
    this tick, and launches not yet answered (`pending`) -- is below its target, as many as it
    lacks. A refill then costs no launch and no warm-up: the instance is initialised already."""
    room = {t: n - pending.get(t, 0) for t, n in want.items()}
    for m in members:
        if m.id not in claimed and m.instance_type in room:
            room[m.instance_type] -= 1
    out: list[tuple[str, int]] = []
    for r in retiring:
        if r.capacity_type == ON_DEMAND and room.get(r.instance_type, 0) > 0:
            room[r.instance_type] -= 1
            out.append((r.slot, r.attempt))
    return out


def refill_waits(claimed: Mapping[str, float], now: float, delay_s: float) -> frozenset[str]:
    """The types whose refill waits: a member was claimed within `delay_s`. The burst that claimed
    it is followed by a scale-in (scale_down_delay_s after the traffic falls), whose retiring
    instances refill the pool with no launch and no warm-up (`returns`); a launch now would be the
    warm-up that return saves. Past `delay_s` (no scale-in came: the traffic stayed up) it launches."""
    return frozenset(t for t, at in claimed.items() if now - at < delay_s)


def pooled_types(cfg: WarmPoolConfig, policy_types: Sequence[str]) -> tuple[str, ...]:
    """The types with a pool: those the policy names in `types`, else all of them."""
    return tuple(cfg.types) if cfg.types else tuple(policy_types)


def auto_size(launched_at: Sequence[float], now: float, window_s: float, cap: int, bring_up: float | None) -> int:
    """The most launches within any `window_s` over the last day, the bring-up (launches within
    window_s of `bring_up`, the fleet's first launch) excepted; see the module."""
    start = now - DAY_S if bring_up is None else max(now - DAY_S, bring_up + window_s + 1e-9)
    times = sorted(t for t in launched_at if start <= t <= now)
    best, lo = 0, 0
    for hi, t in enumerate(times):
        while t - times[lo] > window_s:
            lo += 1
        best = max(best, hi - lo + 1)
    return min(best, cap)


def targets(
    cfg: WarmPoolConfig,
    types: Sequence[str],
    launches: Mapping[str, Sequence[float]],
    now: float,
    boot_s: float,
    bring_up: float | None = None,
) -> dict[str, int]:
    """Members to keep per pooled type: `size`, or auto_size from the type's launches of the last day."""
    if cfg.size == "auto":
        return {t: auto_size(launches.get(t, ()), now, boot_s, cfg.cap, bring_up) for t in types}
    return {t: min(int(cfg.size), cfg.cap) for t in types}


def assign(wanted: Sequence[Wanted], members: Sequence[Instance]) -> dict[tuple[str, int], str]:
    """(slot, attempt) -> the stopped member each on-demand launch starts, oldest member first;
    the launches a type's stopped members do not cover launch new instances."""
    free: dict[str, list[Instance]] = {}
    for m in sorted(members, key=lambda m: (m.launched_at, m.id)):
        if m.state == "stopped":
            free.setdefault(m.instance_type, []).append(m)
    out: dict[tuple[str, int], str] = {}
    for w in wanted:
        stock = free.get(w.instance_type)
        if w.capacity_type == ON_DEMAND and stock:
            out[(w.slot, w.attempt)] = stock.pop(0).id
    return out


def refill(
    want: Mapping[str, int],
    members: Sequence[Instance],
    initialised: frozenset[str],
    *,
    now: float,
    timeout_s: float,
    waiting: Collection[str] = (),
) -> PoolChanges:
    """Launch what each type lacks (except the `waiting` types': see refill_waits), stop the
    members that are initialised, terminate a type's members beyond its target (stopped ones
    first, the oldest first: their disks are the stalest) and any that warmed longer than
    `timeout_s` (a boot that never finished)."""
    stuck = {
        m.id for m in members if m.state in WARMING and m.id not in initialised and now - m.launched_at > timeout_s
    }
    live = [m for m in members if m.id not in stuck]
    launch: list[str] = []
    extra: list[str] = []
    for itype in sorted({*want, *(m.instance_type for m in live)}):
        mine = [m for m in live if m.instance_type == itype]
        target = want.get(itype, 0)
        launch += [itype] * (max(0, target - len(mine)) if itype not in waiting else 0)
        order = sorted(mine, key=lambda m: (m.state != "stopped", m.launched_at, m.id))
        extra += [m.id for m in order[: max(0, len(mine) - target)]]
    stop = [m.id for m in live if m.state == "running" and m.id in initialised and m.id not in extra]
    return PoolChanges(launch=tuple(launch), stop=tuple(sorted(stop)), terminate=tuple(sorted(stuck | set(extra))))
