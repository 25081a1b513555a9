"""GPUs -> instances: the cheapest set of instances that holds the planned GPUs of each type.

Placement works on GPUs; which instance types hold them is a separate, small problem: for N GPUs
of one type, choose counts x_t of the instance types with that GPU minimising sum(price_t x_t)
subject to sum(gpus_t x_t) >= N and x_t <= max_instances_t. With no caps this is an unbounded
covering knapsack, solved exactly by dynamic programming over N; with caps it goes to HiGHS.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from autoscaler.planner.types import InstanceOption


def cover(n: int, options: Sequence[InstanceOption], limits: Sequence[int | None]) -> list[tuple[InstanceOption, int]]:
    """Instance counts holding `n` GPUs at least cost (ties: fewer instances). `limits[i]` caps
    options[i] (None: no cap). Raises ValueError when the caps cannot hold `n`."""
    if n <= 0:
        return []
    pairs = list(zip(options, limits))
    if len(pairs) == 1 and pairs[0][1] is None:
        return [(pairs[0][0], math.ceil(n / pairs[0][0].gpus))]
    if all(lim is None for _, lim in pairs):
        return _cover_dp(n, list(options))
    return _cover_milp(n, pairs)


def _cover_dp(n: int, options: list[InstanceOption]) -> list[tuple[InstanceOption, int]]:
    """best[k]: cheapest (cost, instances) holding k GPUs; reconstructed through `pick`."""
    best = [(0.0, 0)] + [(math.inf, 0)] * n
    pick = [-1] * (n + 1)
    for k in range(1, n + 1):
        for i, o in enumerate(options):
            c, m = best[max(0, k - o.gpus)]
            cand = (round(c + o.price_per_hour, 9), m + 1)
            if cand < best[k]:
                best[k], pick[k] = cand, i
    counts = [0] * len(options)
    k = n
    while k > 0:
        counts[pick[k]] += 1
        k = max(0, k - options[pick[k]].gpus)
    return [(o, c) for o, c in zip(options, counts) if c]


def _cover_milp(n: int, pairs: list[tuple[InstanceOption, int | None]]) -> list[tuple[InstanceOption, int]]:
    # here, not at import: scipy.optimize costs every igniter process ~0.5 s of CPU
    from scipy.optimize import Bounds, LinearConstraint, milp

    price = np.array([o.price_per_hour for o, _ in pairs])
    gpus = np.array([[o.gpus for o, _ in pairs]], dtype=float)
    upper = np.array([np.inf if lim is None else lim for _, lim in pairs], dtype=float)
    if np.isfinite(upper).all() and float((gpus @ upper)[0]) < n:
        raise ValueError(f"max_instances allow only {int((gpus @ upper)[0])} GPUs, {n} needed")
    # a tiny per-instance term breaks price ties towards fewer instances
    res = milp(
        price + 1e-6, constraints=LinearConstraint(gpus, lb=n), integrality=np.ones(len(pairs)), bounds=Bounds(0, upper)
    )
    if res.x is None:
        raise ValueError(f"no instance mix holds {n} GPUs: {res.message}")
    return [(o, round(x)) for (o, _), x in zip(pairs, res.x) if round(x) > 0]
