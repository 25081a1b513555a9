"""Segments and cuts chosen together: the fewest GPUs for a set of workloads on one MIG GPU type.
Pure.

segments.py gives each workload its lightest segment set alone, and packing.py the fewest GPUs for
those slices; both exact, but apart. A workload whose lightest set holds two 3g slices strands a
compute slice (3g + 3g is a whole A100 with 6 of 7 compute slices used), where 3g + 2g + 1g or
2g + 2g + 2g might have served as well. So, for up to JOINT_MAX workloads, one integer program
chooses both: per workload and slice profile how many slices (each at its best usable row), per
valid cut how many GPUs, covering every rate with the fewest GPUs. The objective counts GPUs
only, so it is integral and HiGHS stops as soon as a plan meets the rounded-up LP bound; slices
the solution holds beyond a workload's need are then dropped (`_trim`). Where optimality cannot be
proved quickly (the LP bound is a GPU below the optimum), the best plan found within TIME_LIMIT_S
is used if it packs onto fewer GPUs than the separate choice.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from autoscaler.config.mig import MigGeometry
from autoscaler.model.mig import cuts
from autoscaler.planner.mig.segments import Segment

JOINT_MAX = 150  # workloads; beyond, the separate choice (fast, a few % more GPUs at most)
TIME_LIMIT_S = 3.0  # wall clock, a safety net: the ParvaGPU scenarios need ~50 ms of CPU


def choose_jointly(
    geometry: MigGeometry, wants: Sequence[tuple[float, tuple[Segment, ...]]]
) -> list[list[Segment]] | None:
    """Per want (rate, candidate segments), the segments to run; None when the program finds
    nothing better within its limit (the caller keeps its own choice).

    Remembered per question (CHOICES_KEPT of them): a replay re-plans the same rates again and
    again against other current plans (tests/sim/test_rollout_property.py: 485 programs, 123 of
    them distinct), and HiGHS is deterministic, so the remembered answer is the one it would give."""
    if not wants or len(wants) > JOINT_MAX or any(not segs for _, segs in wants):
        return None
    chosen = _chosen(geometry, tuple((rate, tuple(segs)) for rate, segs in wants))
    return None if chosen is None else [list(segs) for segs in chosen]


CHOICES_KEPT = 4096


def forget_choices() -> None:
    """Forget the remembered choices (planner/api.py's forget_memos)."""
    _chosen.cache_clear()


@lru_cache(maxsize=CHOICES_KEPT)
def _chosen(
    geometry: MigGeometry, wants: tuple[tuple[float, tuple[Segment, ...]], ...]
) -> tuple[tuple[Segment, ...], ...] | None:
    names = sorted({s.slice for _, segs in wants for s in segs})
    patterns = cuts(geometry, frozenset(names))
    cols = [(w, s) for w, (_, segs) in enumerate(wants) for s in segs]
    ny, nx = len(cols), len(patterns)
    cover = np.zeros((len(wants), ny + nx))
    slots = np.zeros((len(names), ny + nx))
    upper = np.empty(ny + nx)
    for j, (w, s) in enumerate(cols):
        cover[w, j] = s.throughput_rps
        slots[names.index(s.slice), j] = 1.0
        upper[j] = math.ceil(wants[w][0] / s.throughput_rps)
    for k, pat in enumerate(patterns):
        for name, _ in pat:
            slots[names.index(name), ny + k] -= 1.0
    upper[ny:] = sum(upper[:ny])
    cost = np.concatenate([np.zeros(ny), np.ones(nx)])
    # here, not at import: scipy.optimize costs every igniter process ~0.5 s of CPU
    from scipy.optimize import Bounds, LinearConstraint, milp

    res = milp(
        c=cost,
        constraints=[
            LinearConstraint(cover, lb=[r * (1 - 1e-9) for r, _ in wants], ub=np.inf),
            LinearConstraint(slots, lb=-np.inf, ub=0.0),
        ],
        integrality=np.ones(ny + nx),
        bounds=Bounds(0, upper),
        options={"time_limit": TIME_LIMIT_S},
    )
    if res.x is None or res.status not in (0, 1):
        return None
    counts = np.round(res.x[:ny]).astype(int)
    out: list[list[Segment]] = [[] for _ in wants]
    for (w, s), n in zip(cols, counts):
        out[w].extend([s] * int(n))
    return tuple(tuple(_trim(segs, rate)) for segs, (rate, _) in zip(out, wants))


def _trim(segs: list[Segment], rate: float) -> list[Segment]:
    """Drop slices the rate does not need, smallest throughput first (the GPU count stays)."""
    keep = sorted(segs, key=lambda s: -s.throughput_rps)
    total = sum(s.throughput_rps for s in keep)
    for s in sorted(segs, key=lambda s: s.throughput_rps):
        if total - s.throughput_rps >= rate * (1 - 1e-9):
            keep.remove(s)
            total -= s.throughput_rps
    return keep
