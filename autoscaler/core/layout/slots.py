"""Which slot each planned instance becomes: an existing one it can take over, or a new name. Pure.

A plan lists instances in no particular order; the fleet needs identities that survive
re-planning. Each planned instance is matched to the existing slot of the same offering (the
previous layout's, then live slots it lacks) that keeps most of its GPU share in place, so a
small plan change moves few servers; the rest get `<fleet>-<type>-<n>` names no slot has had.
Used by core/layout/layout.py.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from autoscaler.config.offerings import SPOT
from autoscaler.core.layout.layout_types import LayoutInput, PlannedServer
from autoscaler.planner.types import InstanceOut, Plan


@dataclass(frozen=True, slots=True)
class _Candidate:
    """An existing slot a planned instance may take over, with its counts computed once per plan
    (not once per planned instance: that made matching quadratic in Counter construction)."""

    slot: str
    shares: dict[tuple[int, str], float]  # (GPU index, workload) -> MPS % its servers hold
    placements: Counter[tuple[int, str]]  # (GPU index, workload) -> servers
    workloads: Counter[str]
    ordinal: int
    leaving: tuple[PlannedServer, ...] = ()  # a live slot the previous layout lacks: what its agent still runs


def _candidates(inp: LayoutInput) -> dict[str, list[_Candidate]]:
    """Existing slots (previous layout, then live slots it lacks) by offering: a spot slot is
    never matched to an on-demand instance of the plan, nor the other way round."""
    none: tuple[PlannedServer, ...] = ()
    pairs = [(s.slot, s.offering, s.servers, none) for s in (inp.previous.slots if inp.previous else ())]
    seen = {p[0] for p in pairs}
    pairs.extend(
        (slot, itype, none, inp.running.get(slot, none))
        for slot, itype in sorted(inp.extra_slots.items())
        if slot not in seen
    )
    out: dict[str, list[_Candidate]] = {}
    for slot, itype, servers, leaving in pairs:
        have = Counter((v.gpu_index, v.workload) for v in servers)
        out.setdefault(itype, []).append(
            _Candidate(
                slot,
                _share_map((v.gpu_index, v.workload, v.mps_percent) for v in servers),
                have,
                Counter(w for _, w in have.elements()),
                _ordinal(slot),
                tuple(leaving),
            )
        )
    return out


def _fits_beside(inst: InstanceOut, leaving: Sequence[PlannedServer]) -> bool:
    """Whether `inst`'s placements start beside the servers a leaving slot still runs (those that
    run exactly as planned stay): taking over a leaving instance saves a boot only then. Otherwise
    each placement would wait for room that a server carrying its workload's capacity holds, a
    resize in place that needs surge capacity, and a new instance boots as fast without it."""
    left = list(leaving)
    for g in inst.gpus:
        share = 0.0
        for p in g.placements:
            same = next(
                (
                    v
                    for v in left
                    if (v.gpu_index, v.workload, v.batch, v.mps_percent)
                    == (g.index, p.workload, p.batch, p.mps_percent)
                ),
                None,
            )
            if same is not None:
                left.remove(same)
            else:
                share += p.mps_percent
        if share + sum(v.mps_percent for v in left if v.gpu_index == g.index) > 100.0 + 1e-6:
            return False
    return True


def _share_map(items: Iterable[tuple[int, str, float]]) -> dict[tuple[int, str], float]:
    out: dict[tuple[int, str], float] = {}
    for gpu, workload, share in items:
        out[(gpu, workload)] = out.get((gpu, workload), 0.0) + share
    return out


def match_slots(plan: Plan, inp: LayoutInput) -> dict[int, str]:
    """Greedy: pairs (planned instance, existing slot) of the same type, the most GPU share kept in
    place first (summed per GPU and workload: min(planned share, running share)), then the most
    shared placements. Weighing by share keeps a big server where it runs: matching by counts alone
    can swap a big and a small server of one workload between two instances, and then one grows
    while the other shrinks, a move that needlessly drops capacity while it happens."""
    by_type = _candidates(inp)
    scored = []
    for i, inst in enumerate(plan.instances):
        want = Counter((g.index, p.workload) for g in inst.gpus for p in g.placements)
        shares = _share_map((g.index, p.workload, p.mps_percent) for g in inst.gpus for p in g.placements)
        wl = Counter(w for _, w in want.elements())
        for c in by_type.get(inst.key, ()):
            if c.leaving and not _fits_beside(inst, c.leaving):
                continue
            kept = sum(min(v, c.shares.get(k, 0.0)) for k, v in shares.items())
            scored.append(
                (-round(kept, 6), -_shared(want, c.placements), -_shared(wl, c.workloads), c.ordinal, i, c.slot)
            )
    out: dict[int, str] = {}
    used: set[str] = set()
    for *_, i, slot in sorted(scored):
        if i not in out and slot not in used:
            out[i] = slot
            used.add(slot)
    return out


def _shared(a: Mapping[Any, int], b: Mapping[Any, int]) -> int:
    """Size of the multiset intersection, without building the Counter that `a & b` would."""
    small, large = (a, b) if len(a) <= len(b) else (b, a)
    return sum(min(n, large.get(k, 0)) for k, n in small.items())


def _ordinal(slot: str) -> int:
    tail = slot.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else -1


def new_slot(fleet: str, inst: InstanceOut, taken: set[str]) -> str:
    """`<fleet>-<type>-<n>`, or `<fleet>-<type>-spot-<n>` for spot: the name says how it is bought."""
    spot = "spot-" if inst.capacity_type == SPOT else ""
    prefix = f"{fleet}-{inst.instance_type}-{spot}"
    n = 1 + max((_ordinal(s) for s in taken if s.startswith(prefix)), default=-1)
    taken.add(prefix + str(n))
    return prefix + str(n)
