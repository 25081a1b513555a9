"""What ready capacity actually covered, per workload: the last hour's attainment and the feedback
allowance that both read the same per-tick verdict. Pure, on plain values.

Why apart from the error histogram (core/capacity/headroom.py): the histogram learns how far traffic went
above the forecast, before the planner's rounding and the hold on scale-in add capacity; these
two measure the capacity that was there. The status endpoint exports the first; the second is
adaptive conformal inference's miss level (Gibbs and Candes, NeurIPS 2021), which moves the
quantile the headroom is sized at towards the target measured here.
"""

from __future__ import annotations

import math

BUCKET_S = 300.0
WINDOW_S = 3600.0

Bucket = tuple[float, float, float]  # (start, covered seconds, seconds)


def record(buckets: tuple[Bucket, ...], now: float, dt: float, covered: bool) -> tuple[Bucket, ...]:
    """Add dt seconds, covered or not, to the 5-minute bucket of `now`; drop buckets over an hour old."""
    start = math.floor(now / BUCKET_S) * BUCKET_S
    kept = [b for b in buckets if b[0] > now - WINDOW_S]
    if kept and kept[-1][0] == start:
        s, c, n = kept.pop()
        kept.append((s, c + dt * covered, n + dt))
    else:
        kept.append((start, dt * covered, dt))
    return tuple(kept)


def attained(buckets: tuple[Bucket, ...], now: float) -> float | None:
    """The covered fraction of the last hour (None: no seconds in it). One pass, summed in the
    buckets' order (every workload's, every tick)."""
    cut = now - WINDOW_S
    covered: float = 0  # int 0, as sum() starts: the same floats as summing the live buckets
    total: float = 0
    for start, c, n in buckets:
        if start > cut:
            covered += c
            total += n
    return covered / total if total > 0 else None


def allowance_after(
    allowance: float | None, dt: float, covered: bool, *, goal: float, cap: float, time_s: float
) -> float:
    """The miss level after dt more seconds: up by dt / time_s x goal when covered, down by
    dt / time_s x (1 - goal) when short, held in [goal, cap x goal] (it only ever lowers the
    quantile below the target; core/capacity/headroom.py says why). `goal` is 1 - target."""
    a = goal if allowance is None else allowance
    a += dt / time_s * (goal - (0.0 if covered else 1.0))
    return min(max(a, goal), cap * goal)
