"""Whether each workload's `target_attainment` is within reach of the policy's settings, and if not,
why. Pure.

Why: a target the settings cannot reach must never look the same as a lower one. With the headroom
at its cap, `target_attainment: 0.9999` plans exactly what 0.999 plans, to the cent; with bursts
that rise faster than a tick and a boot can follow, no headroom the estimator picks covers the
first minutes of each. Both used to pass in silence. A workload is *out of reach* when

- `cap reached`: headroom auto sits at its cap (the errors' quantile lies beyond it), so a higher
  target buys nothing more; or
- its attainment measured over the last hour (core/coverage.py) is below the target, and
  - `burst rise time`: its traffic rose by more than 1 + headroom within one reaction time
    (interval_s + boot_s: a tick to see it, a boot to serve it) in that hour: the bursts outrun the
    headroom; the fast path, bursting into free share, a warm pool (a shorter boot) or a floor
    (`min_rate_rps`) are what reach it;
  - `boot time`: otherwise: capacity was planned but arrived a boot too late (a jump smaller than
    the headroom, or a move); a shorter boot (a warm pool) reaches it.

It is back within reach once neither holds. The controller logs one line per change of state,
and exports it in /v1/headroom (`conditions`) and as the metric igniter_target_out_of_reach.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from autoscaler.core.capacity.forecast import Columns

CAP_REACHED, RISE_TIME, BOOT_TIME = "cap reached", "burst rise time", "boot time"
CAUSES = (CAP_REACHED, RISE_TIME, BOOT_TIME)
EPS = 1e-9


@dataclass(frozen=True, slots=True, kw_only=True)
class ReachInput:
    """One workload at one tick: the target, its headroom (and the cap, in auto mode: None when the
    headroom is a fixed number), the attainment of the last hour, the reaction time
    (interval_s + boot_s) and the rates observed over the last hour, oldest first."""

    target: float
    headroom: float
    cap: float | None
    attainment: float | None
    reaction_s: float
    rates: Sequence[tuple[float, float]] = ()
    rise: float | None = None  # fastest_rise(rates, reaction_s) where the caller has it (fastest_rises)


@dataclass(frozen=True, slots=True, kw_only=True)
class Reach:
    """Out of reach (with its cause and a sentence an operator can act on), or within reach."""

    out: bool
    cause: str | None = None
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"out_of_reach": self.out, "cause": self.cause, "detail": self.detail}


WITHIN = Reach(out=False)


def judge(inp: ReachInput) -> Reach:
    """The workload's state this tick (module docstring)."""
    if inp.cap is not None and inp.headroom >= inp.cap - EPS:
        return Reach(
            out=True,
            cause=CAP_REACHED,
            detail=f"headroom at its cap {inp.cap:g}: target_attainment {inp.target:g} plans no more than a lower one",
        )
    if inp.attainment is None or inp.attainment >= inp.target:
        return WITHIN
    got = f"attainment {inp.attainment:.4f} over the last hour, below target_attainment {inp.target:g}"
    rise = fastest_rise(inp.rates, inp.reaction_s) if inp.rise is None else inp.rise
    if rise > 1.0 + inp.headroom + EPS:
        return Reach(
            out=True,
            cause=RISE_TIME,
            detail=f"{got}: traffic rose {rise:.2f} x within {inp.reaction_s:g} s (interval + boot), "
            f"beyond headroom {inp.headroom:.2f}",
        )
    return Reach(out=True, cause=BOOT_TIME, detail=f"{got}: capacity planned in time arrived a boot late")


def conditions(states: Mapping[str, Reach]) -> list[dict[str, Any]]:
    """Kubernetes-style conditions for /v1/headroom: one `TargetOutOfReach` per workload, status
    "True" with the cause as reason (CapReached, BurstRiseTime, BootTime) and the detail as message."""
    return [
        {
            "type": "TargetOutOfReach",
            "workload": w,
            "status": "True" if r.out else "False",
            "reason": "".join(p.capitalize() for p in r.cause.split()) if r.cause else "WithinReach",
            "message": r.detail,
        }
        for w, r in sorted(states.items())
    ]


def fastest_rise(rates: Sequence[tuple[float, float]], within_s: float) -> float:
    """The largest ratio of a rate to the lowest rate of the `within_s` before it (1 with fewer
    than two points; a rise from 0 counts as from the lowest rate above 0 seen)."""
    positive = [v for _, v in rates if v > 0]
    if len(rates) < 2 or not positive:
        return 1.0
    least = min(positive)
    best, lo = 1.0, 0
    for i, (t, v) in enumerate(rates):
        while rates[lo][0] < t - within_s:
            lo += 1
        if lo < i:
            base = max(min(r for _, r in rates[lo:i]), least)
            best = max(best, v / base)
    return best


def fastest_rises(cols: Columns, within_s: float) -> list[float] | None:
    """fastest_rise of every column's points (Columns.points), with the same floats, across the
    columns at once (issue 50: an hour of reads of 1,000 workloads below target a tick): row i's
    window is the rows from the first at or after its time - within_s up to i (a column's NaN
    skipped, as its points skip them), its least rate the fmin of those; the ratio and the best
    are the same divisions and comparisons. None where a time goes back (take each column)."""
    times, values = cols.times, cols.values
    rows, n = values.shape if values.ndim == 2 else (0, 0)
    if rows and not bool(np.all(times[1:] >= times[:-1])):
        return None
    count = (~np.isnan(values)).sum(axis=0)
    rising = values > 0
    least = np.where(rising, values, np.inf).min(axis=0, initial=np.inf)
    starts = np.searchsorted(times, times - within_s, side="left").tolist()
    best = np.ones(n)
    with np.errstate(all="ignore"):
        for i, lo in enumerate(starts):
            if lo >= i:
                continue
            low = np.fmin.reduce(values[lo:i], axis=0)  # NaN: no point in the window
            ratio = values[i] / np.maximum(low, least)
            best = np.where(~np.isnan(low) & (ratio > best), ratio, best)
    out: list[float] = np.where((count >= 2) & rising.any(axis=0), best, 1.0).tolist()
    return out
