"""When to adopt a new plan. Pure.

Scale-out acts on the tick that sees the need; scale-in waits until a cheaper plan has held for
scale_down_delay_s. Every tick plans for the *hold* rates: each workload's forecast, but never
below the rate the current layout was planned for, so a workload that grows gets capacity at once
while nothing shrinks. Only when the plan for the forecast alone (the *target*) is cheaper than the
hold plan, and has stayed cheaper for scale_down_delay_s, is the target adopted. Missing rate data
restarts the wait. A hold plan that leaves out (a type's max_instances) a workload the target
places is no hold: it keeps one workload's headroom by keeping another dark, so the target is
adopted at once, as a scale-out for the workload it places. `next_wake` says when to tick before
the next interval.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True, slots=True)
class Choice:
    use: Literal["target", "hold"]
    cheaper_since: float | None  # persisted between ticks
    why: str


def choose(
    now: float,
    target_cost: float,
    hold_cost: float,
    cheaper_since: float | None,
    delay_s: float,
    missing: bool,
    *,
    places: Sequence[str] = (),
) -> Choice:
    """Adopt the target plan (the forecast alone) or the hold plan (see the module docstring).
    `places`: the workloads the target places and the hold plan leaves out (`newly_placed`)."""
    if places and not missing:
        return Choice("target", None, f"it places {', '.join(places)}, which the hold plan leaves out")
    if target_cost >= hold_cost - 1e-9:
        return Choice("hold", None, "no cheaper plan")
    if missing:
        return Choice("hold", None, "missing rate data: no scale-in")
    since = now if cheaper_since is None else cheaper_since
    held = now - since
    if held >= delay_s:
        return Choice("target", None, f"cheaper plan held for {held:.0f} s (scale_down_delay_s {delay_s:g})")
    return Choice("hold", since, f"cheaper plan held for {held:.0f} s of {delay_s:g} s")


def newly_placed(target_unplaced: Iterable[str], hold_unplaced: Iterable[str]) -> list[str]:
    """The workloads the hold plan leaves out (a limit: no room) that the target plan places. Held
    at its highest rate, the hold plan can stay out of the caps' reach for good while the forecast
    fits: the Controller's log showed one A100 type at max_instances 3 hold a plan that gave both
    GPUs to r's old peak and left m (11,340 req/s) out, 15.21/h against 10.14/h, to the end."""
    return sorted(set(hold_unplaced) - set(target_unplaced))


def hold_rates(forecast: Mapping[str, float], current: Mapping[str, float]) -> dict[str, float]:
    """Per workload, the larger of the forecast and the rate the current layout carries."""
    return {w: max(r, current.get(w, 0.0)) for w, r in forecast.items()}


def next_wake(
    now: float,
    booting: Sequence[float],
    boot_s: float,
    settle_s: float,
    settling: bool,
    due: Sequence[float] = (),
) -> float | None:
    """When to tick before the next interval, or None. An instance launched at t is expected to be
    ready at t + boot_s: ticking then puts its servers to work at once instead of up to a whole
    interval later (the forecast's horizon, boot_s + interval_s, counts on it). A diff that left
    make-before-break work waiting on servers it just started (`settling`) ticks after settle_s.
    `due`: other times a tick is needed (a going instance's drain begins); those past are done.
    Never sooner than settle_s from now; a boot overdue by more than boot_s is left to the interval.
    `booting`: the launch times of instances not ready yet. settle_s 0 turns wake-ups off."""
    if settle_s <= 0:
        return None
    soonest = now + settle_s
    times = [t + boot_s for t in booting if now - (t + boot_s) < boot_s]
    times.extend(t for t in due if t > now)
    if settling:
        times.append(soonest)
    return max(min(times), soonest) if times else None
