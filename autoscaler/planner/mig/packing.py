"""Slices -> GPUs: the fewest GPUs whose valid cuts hold a multiset of slices, and where each slice
lands. Pure.

Every valid cut of a GPU is a subset of a maximal one (model/mig.py enumerates them: 19 on an A100
with ParvaGPU's five profiles), so packing is a cutting-stock problem over those patterns: choose
how many GPUs to cut each way so that every profile has at least as many slots as slices. That
integer program is tiny (one variable per pattern, one row per profile) and HiGHS solves it
exactly in milliseconds; slots left over are simply not cut. Slices already running on a kept GPU
(stability) are not moved: new slices first go into free units of those GPUs (largest first, each
at its lowest valid start), and only the rest is packed onto new GPUs this way.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from autoscaler.config.mig import MigGeometry, Slot
from autoscaler.model.mig import cuts

TIME_LIMIT_S = 2.0


def fewest_gpus(geometry: MigGeometry, slices: Counter[str]) -> list[tuple[Slot, ...]]:
    """The cuts of the fewest GPUs that hold `slices` (profile -> count), each cut with exactly the
    slots used (extra slots of a maximal pattern dropped).

    Remembered per question (PACKINGS_KEPT of them): a planner asks the same few multisets again
    and again (each re-plan, and `_together` twice per choice), and a HiGHS solve costs ~20 ms where
    the answer costs a lookup. The solve is deterministic, so the answer is the one it would give."""
    if not slices:
        return []
    return list(_packed(geometry, tuple(sorted(slices.items()))))


PACKINGS_KEPT = 4096


def forget_packings() -> None:
    """Forget the remembered packings (planner/api.py's forget_memos)."""
    _packed.cache_clear()


@lru_cache(maxsize=PACKINGS_KEPT)
def _packed(geometry: MigGeometry, counted: tuple[tuple[str, int], ...]) -> tuple[tuple[Slot, ...], ...]:
    slices = Counter(dict(counted))
    patterns = cuts(geometry, frozenset(slices))
    names = sorted(slices)
    counts = np.array([[sum(1 for n, _ in pat if n == name) for pat in patterns] for name in names], dtype=float)
    need = np.array([slices[n] for n in names], dtype=float)
    # here, not at import: scipy.optimize costs every igniter process ~0.5 s of CPU
    from scipy.optimize import Bounds, LinearConstraint, milp

    res = milp(
        c=np.ones(len(patterns)),
        constraints=LinearConstraint(counts, lb=need, ub=np.inf),
        integrality=np.ones(len(patterns)),
        bounds=Bounds(0, np.inf),
        options={"time_limit": TIME_LIMIT_S},
    )
    if res.x is None:  # no solution within the limit: one pattern per GPU, greedily
        return tuple(_greedy(geometry, slices))
    chosen = [pat for pat, k in zip(patterns, np.round(res.x).astype(int)) for _ in range(k)]
    return tuple(_trim(chosen, slices))


def _trim(chosen: Sequence[tuple[Slot, ...]], slices: Counter[str]) -> list[tuple[Slot, ...]]:
    """Drop slots nothing needs, fullest GPUs first, so the spare room sits on the last GPUs."""
    left = Counter(slices)
    out = []
    for pat in sorted(chosen, key=lambda p: -len(p)):
        keep = []
        for name, start in pat:
            if left[name] > 0:
                left[name] -= 1
                keep.append((name, start))
        if keep:
            out.append(tuple(keep))
    return out


def _greedy(geometry: MigGeometry, slices: Counter[str]) -> list[tuple[Slot, ...]]:
    gpus: list[list[Slot]] = []
    order = sorted(slices.elements(), key=lambda n: -geometry.profile(n).memory_units)
    for name in order:
        for cut in gpus:
            start = free_start(geometry, cut, name)
            if start is not None:
                cut.append((name, start))
                break
        else:
            gpus.append([(name, geometry.profile(name).starts[0])])
    return [tuple(c) for c in gpus]


def free_start(geometry: MigGeometry, cut: Sequence[Slot], name: str) -> int | None:
    """The lowest allowed start where a `name` slice fits beside `cut`, if any."""
    for start in geometry.profile(name).starts:
        if geometry.valid((*cut, (name, start))):
            return start
    return None
