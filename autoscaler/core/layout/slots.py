"""Which slot each planned instance becomes: an existing one it can take over, or a new name. Pure.

A plan lists instances in no particular order; the fleet needs identities that survive
re-planning. Each planned instance is matched to the existing slot of the same offering (the
previous layout's, then live slots it lacks) that keeps most of its GPU share in place, so a
small plan change moves few servers; the rest get `<fleet>-<type>-<n>` names no slot has had. A
slot still booting is up before any launch, so while a workload is short it may trade its match
for a launch, or a slot up later, that carries more of the shortfall (`match_slots`). Used by
core/layout/layout.py.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from autoscaler.config.offerings import SPOT
from autoscaler.core.layout.layout_types import LayoutInput, PlannedServer, is_stand_in
from autoscaler.planner.types import InstanceOut, Plan

DIGITS = "0123456789"


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
    while the other shrinks, a move that needlessly drops capacity while it happens.

    A booting slot (`inp.booting`) runs nothing yet, and comes up before any launch this plan
    makes. So where a workload is short now (`inp.short`), each booting slot, the soonest ready
    first, may trade the instance it was matched to for one that would otherwise be launched, or
    that a slot up later was matched to, and that carries more of the shortfall (`_retarget`): a
    workload whose rate jumped gets the instance that is up first, not the one launched last (as
    Karpenter binds a pending pod to the in-flight node that is ready first). The trade never takes
    an instance from a slot that runs servers, so it never turns a fresh instance's plan into a
    re-cut in place."""
    by_type = _candidates(inp)
    wanted = [_Wanted.of(inst) for inst in plan.instances]
    out: dict[int, str] = {}
    used: set[str] = set()
    for *_, i, slot in sorted(_alike_pairs(plan, wanted, by_type)):
        if i not in out and slot not in used:
            out[i] = slot
            used.add(slot)
    _match_rest(plan, by_type, out, used)
    if inp.short and inp.booting:
        _retarget(plan, wanted, by_type, inp, out)
    return out


def _alike_pairs(
    plan: Plan, wanted: Sequence[_Wanted], by_type: Mapping[str, list[_Candidate]]
) -> list[tuple[float, int, int, int, int, str]]:
    """The scored pairs (`_likeness`, ordinal, instance, slot) whose likeness is not nil: those
    that share a workload, found through an index by workload instead of scoring every pair of
    the offering (a pair that shares no workload keeps no share and shares no placement)."""
    by_workload: dict[tuple[str, str], list[_Candidate]] = {}
    for key, cands in by_type.items():
        for c in cands:
            for name in c.workloads:
                by_workload.setdefault((key, name), []).append(c)
    out = []
    for i, (inst, w) in enumerate(zip(plan.instances, wanted, strict=True)):
        seen: set[str] = set()
        for name in w.workloads:
            for c in by_workload.get((inst.key, name), ()):
                if c.slot not in seen and not (c.leaving and not _fits_beside(inst, c.leaving)):
                    seen.add(c.slot)
                    out.append((*_likeness(w, c), c.ordinal, i, c.slot))
    return out


def _match_rest(plan: Plan, by_type: Mapping[str, list[_Candidate]], out: dict[int, str], used: set[str]) -> None:
    """The pairs of nil likeness, in the order a sort of every pair gives them after the alike
    ones (slot ordinal, instance, slot): per ordinal, each instance left takes the first slot
    left of its offering that it fits beside. Indexed by offering, and an instance or slot taken
    is dropped, so this is near-linear where every pair would be quadratic."""
    left: dict[str, list[int]] = {}
    for i, inst in enumerate(plan.instances):
        if i not in out:
            left.setdefault(inst.key, []).append(i)
    groups: dict[int, list[tuple[str, _Candidate]]] = {}
    for key, cands in by_type.items():
        for c in cands:
            if c.slot not in used and key in left:
                groups.setdefault(c.ordinal, []).append((key, c))
    for ordinal in sorted(groups):
        _match_group(plan, sorted(groups[ordinal], key=lambda kc: kc[1].slot), left, out, used)


def _match_group(
    plan: Plan,
    group: Sequence[tuple[str, _Candidate]],
    left: dict[str, list[int]],
    out: dict[int, str],
    used: set[str],
) -> None:
    """One ordinal's slots (sorted by name): instances left, lowest first, each take the first
    slot of their offering they may take (`_fits_beside` for a slot still running servers)."""
    by_key: dict[str, list[_Candidate]] = {}
    for key, c in group:
        by_key.setdefault(key, []).append(c)
    for key, cands in by_key.items():
        free = [c for c in cands if c.slot not in used]
        todo, j = left.get(key, []), 0
        while free and j < len(todo):
            i = todo[j]
            take = next((c for c in free if not (c.leaving and not _fits_beside(plan.instances[i], c.leaving))), None)
            if take is None:
                j += 1
                continue
            out[i] = take.slot
            used.add(take.slot)
            free.remove(take)
            del todo[j]


@dataclass(frozen=True, slots=True)
class _Wanted:
    """A planned instance's counts, computed once per plan (as _Candidate's)."""

    placements: Counter[tuple[int, str]]  # (GPU index, workload) -> placements
    shares: dict[tuple[int, str], float]  # (GPU index, workload) -> MPS % planned
    workloads: Counter[str]
    throughput: dict[str, float]  # workload -> predicted req/s of its placements

    @staticmethod
    def of(inst: InstanceOut) -> _Wanted:
        items = [(g.index, p) for g in inst.gpus for p in g.placements]
        want = Counter((gi, p.workload) for gi, p in items)
        rps: dict[str, float] = {}
        for _, p in items:
            rps[p.workload] = rps.get(p.workload, 0.0) + p.predicted_throughput_rps
        return _Wanted(
            want,
            _share_map((gi, p.workload, p.mps_percent) for gi, p in items),
            Counter(w for _, w in want.elements()),
            rps,
        )


def _likeness(w: _Wanted, c: _Candidate) -> tuple[float, int, int]:
    """How much of a planned instance the candidate holds already, negated to sort best first:
    share kept in place, shared placements, shared workloads."""
    kept = sum(min(v, c.shares.get(k, 0.0)) for k, v in w.shares.items())
    return (-round(kept, 6), -_shared(w.placements, c.placements), -_shared(w.workloads, c.workloads))


def _retarget(
    plan: Plan,
    wanted: Sequence[_Wanted],
    by_type: Mapping[str, list[_Candidate]],
    inp: LayoutInput,
    out: dict[int, str],
) -> None:
    """Each booting slot, the soonest ready first, takes, of the instance it was matched to, those
    of its offering no slot took (launches) and those matched to slots up later, the one that
    carries most of the shortfall still uncovered (`inp.short`, less what the slots before it
    carry), keeping its own on a tie; the one it gives up is launched instead, or goes to the later
    slot it took from (a fast tick may have launched for a jump while an instance launched for
    another workload's forecast still boots: the one up first serves the jump). One planned for a
    move's destination (`_moving`) keeps its match: moving it to a later launch would hold the
    move."""
    cands = {c.slot: c for cs in by_type.values() for c in cs}
    left = dict(inp.short)
    moving = _moving(inp)
    for n, slot in enumerate(inp.booting):
        slot_of = {s: i for i, s in out.items()}
        i = slot_of.get(slot)
        if i is None:  # not matched: nothing of its offering was planned
            continue
        if moving.isdisjoint(cands[slot].workloads):
            key = plan.instances[i].key
            later = {slot_of[s]: s for s in inp.booting[n + 1 :] if s in slot_of}
            pool = [
                i,
                *(
                    j
                    for j in range(len(plan.instances))
                    if (j not in out or j in later) and plan.instances[j].key == key
                ),
            ]
            best = min(pool, key=lambda j: (-_relief(wanted[j], left), j != i, *_likeness(wanted[j], cands[slot]), j))
            if best != i:
                del out[i]
                if best in later:  # a slot up later takes what this one gives up
                    out[i] = later[best]
                out[best] = slot
                i = best
        for w, rps in wanted[i].throughput.items():
            if w in left:
                left[w] = max(0.0, left[w] - rps)


def _moving(inp: LayoutInput) -> frozenset[str]:
    """Workloads with a server leaving a running slot (a move under way: it leaves once its
    workload's capacity planned elsewhere serves): running servers the previous layout neither
    keeps nor hands over in place. A booting slot planned for one of them keeps its plan, since
    moving it to a later launch would hold the move and whatever waits for the room it frees."""
    if inp.previous is None:
        return frozenset()
    planned = {v.name for _, v in inp.previous.servers()} | {v.replaces for _, v in inp.previous.servers()}
    return frozenset(
        v.workload
        for servers in inp.running.values()
        for v in servers
        if v.name not in planned and not is_stand_in(v.name)
    )


def _relief(w: _Wanted, left: Mapping[str, float]) -> float:
    """The part of the uncovered shortfall a planned instance would carry."""
    return sum(min(left[k], rps) for k, rps in w.throughput.items() if k in left)


def _shared(a: Mapping[Any, int], b: Mapping[Any, int]) -> int:
    """Size of the multiset intersection, without building the Counter that `a & b` would."""
    small, large = (a, b) if len(a) <= len(b) else (b, a)
    return sum(min(n, large.get(k, 0)) for k, n in small.items())


def _ordinal(slot: str) -> int:
    tail = slot.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else -1


def numbered(name: str) -> tuple[str, int] | None:
    """A slot name's stem and number: the name up to its trailing digits, and those digits (None
    without any). `f-p3-spot-7` is (`f-p3-spot-`, 7), `f-p3-surge2` (`f-p3-surge`, 2)."""
    stem = name.rstrip(DIGITS)
    return None if len(stem) == len(name) else (stem, int(name[len(stem) :]))


def top_numbers(names: Iterable[str], into: Mapping[str, int] | None = None) -> dict[str, int]:
    """The highest number per stem among `names` (`numbered`), merged into `into`'s: all that
    SlotNames needs of the names ever taken, a few stems a fleet, however long its history."""
    tops = dict(into or {})
    for name in names:
        if (got := numbered(name)) is not None and got[1] > tops.get(got[0], -1):
            tops[got[0]] = got[1]
    return tops


def ordinal_stem(stem: str) -> bool:
    """A stem whose number `_ordinal` reads (`<...>-<n>`, or a bare number): a layout slot's."""
    return not stem or stem.endswith("-")


def surge_stem(stem: str) -> bool:
    """A stem whose number is a surge slot's (`<fleet>-<type>-surge<n>`, surge_types.SURGE_SLOT)."""
    return stem.endswith("-surge")


class SlotNames:
    """The slot names taken (every name a slot ever had: none is used again, a launch token is
    derived from it) and the next number per prefix, known from the highest number per stem
    (`top_numbers`: the store keeps them, so a tick never reads the names of a long history; a
    fleet has a few stems). A prefix's highest number is the highest of the stems that start
    with it and whose numbers `counts` reads (the layout's `<n>` or the surge slots' `surge<n>`):
    what a pass over every name gave, as tests/core/test_slot_names.py checks."""

    def __init__(
        self,
        names: Iterable[str] = (),
        counts: Callable[[str], bool] = ordinal_stem,
        tops: Mapping[str, int] | None = None,
    ) -> None:
        self._tops = top_numbers(names, tops)  # stem -> highest number
        self._counts = counts

    def take(self, prefix: str) -> str:
        """`prefix` and one above the highest number of the names that start with it (0 if
        none), now taken. A prefix ends in a non-digit (`<fleet>-<type>-`, `...-surge`): a name
        starts with it exactly when its stem does, and the new name's stem is the prefix."""
        top = max((n for s, n in self._tops.items() if s.startswith(prefix) and self._counts(s)), default=-1)
        self._tops[prefix] = top + 1
        return prefix + str(top + 1)


def new_slot(fleet: str, inst: InstanceOut, taken: SlotNames) -> str:
    """`<fleet>-<type>-<n>`, or `<fleet>-<type>-spot-<n>` for spot: the name says how it is bought."""
    spot = "spot-" if inst.capacity_type == SPOT else ""
    return taken.take(f"{fleet}-{inst.instance_type}-{spot}")
