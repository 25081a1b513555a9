"""When to adopt a new plan. Pure.

Scale-out acts on the tick that sees the need; scale-in waits until a cheaper plan has held for
scale_down_delay_s. Every tick plans for the *hold* rates: each workload's forecast, but never
below the rate the current layout was planned for, so a workload that grows gets capacity at once
while nothing shrinks. Only when the plan for the forecast alone (the *target*) is cheaper than the
hold plan, and has stayed cheaper for scale_down_delay_s, is the target adopted. Missing rate data
restarts the wait.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True, slots=True)
class Choice:
    use: Literal["target", "hold"]
    cheaper_since: float | None      # persisted between ticks
    why: str


def choose(now: float, target_cost: float, hold_cost: float, cheaper_since: float | None,
           delay_s: float, missing: bool) -> Choice:
    """Adopt the target plan (the forecast alone) or the hold plan (see the module docstring)."""
    if target_cost >= hold_cost - 1e-9:
        return Choice("hold", None, "no cheaper plan")
    if missing:
        return Choice("hold", None, "missing rate data: no scale-in")
    since = now if cheaper_since is None else cheaper_since
    held = now - since
    if held >= delay_s:
        return Choice("target", None, f"cheaper plan held for {held:.0f} s (scale_down_delay_s {delay_s:g})")
    return Choice("hold", since, f"cheaper plan held for {held:.0f} s of {delay_s:g} s")


def hold_rates(forecast: Mapping[str, float], current: Mapping[str, float]) -> dict[str, float]:
    """Per workload, the larger of the forecast and the rate the current layout carries."""
    return {w: max(r, current.get(w, 0.0)) for w, r in forecast.items()}
