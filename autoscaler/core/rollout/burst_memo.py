"""Burst trials remembered from tick to tick (bursting.py). Pure: a cache of answers of
pure functions.

A short workload's late server tries every ready GPU at rest with free share, at each batch from
its own down to 1 (bursting.py `_burst_fit`): at 1,000 workloads some 30,000 judgements a tick,
nearly all of them refusals, and the same ones again at the next tick while the instances boot.
Which batches the judge refuses depends only on the GPU's content (`Tick.content`) and the
candidate, so they are remembered by those, per judge, and only the batches the judge accepts
are tried in full (floors and planned rates, which move with the rates, are checked each time).
Where the judge says what it reads of a server (rollout_types.shape_of: the model reads a
workload's SLO, model, batch and share, not its name), a candidate is remembered by that shape:
the late servers of equal-shaped workloads share one trial per GPU content, tick after tick,
as long as the candidate's name is new on the GPU (no server there has it or replaces it).

Most of what is still judged fails because a neighbour misses its budget beside the newcomer (at
2,000 instances, three in four of a re-plan tick's 56,000 judgements). On the MPS model a
neighbour's latency never falls as the newcomer's L2 line and power grow (crowding.presses_on), so
each GPU content remembers the (L2, power) of the newcomers under which a server within budget
missed it, and a later candidate pressing no less in both is refused without a judgement
(`_Press`).
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

from autoscaler.core.layout.layout_types import PlannedServer
from autoscaler.core.rollout import crowding
from autoscaler.core.rollout.judged import loading
from autoscaler.core.rollout.rollout import GpuKey, Judge, Tick
from autoscaler.core.rollout.rollout_types import modelled_of, shape_of
from autoscaler.model.perfmodel import PerfModel

MAX_ENTRIES = 1 << 15  # then all forgotten at once: some 7 ticks of 1,000 workloads, tens of MB
REL = crowding.REL  # colocation.REL: a share sum within 100 % + REL is not split


@dataclass
class _Press:
    """One GPU content as a burst newcomer's neighbours (module docstring): the servers that load
    it beside any newcomer (`loading`, every server there judged as serving), their shares as the
    judge rounds them, the servers within budget now, and the
    (L2, power) of each newcomer under which one of those missed its budget (none dominating
    another)."""

    perf: PerfModel
    loaded: list[PlannedServer]
    shares: list[float]
    before: frozenset[str]
    thr_falls: bool  # crowding.carries_less: each one's throughput never rises with the pressure
    missed: list[tuple[float, float]] = field(default_factory=list)

    def refuses(self, push: tuple[float, float]) -> bool:
        """A server within budget misses it under a newcomer pressing no less than one before."""
        return any(push[0] >= c and push[1] >= p for c, p in self.missed)

    def remember(self, push: tuple[float, float]) -> None:
        self.missed = [(c, p) for c, p in self.missed if not (c >= push[0] and p >= push[1])]
        self.missed.append(push)


@dataclass
class _Memo:
    ids: dict[tuple[object, ...], int] = field(default_factory=dict)  # GPU content -> its id
    batches: dict[tuple[int, GpuKey, Hashable, int], tuple[int, ...]] = field(default_factory=dict)
    press: dict[int, _Press | None] = field(default_factory=dict)  # GPU content id -> `_Press`


_MEMOS: weakref.WeakKeyDictionary[Judge, _Memo] = weakref.WeakKeyDictionary()
_IDS = itertools.count()  # content ids are never reused, so one remembered by a Tick stays true


def _memo(judge: Judge) -> _Memo | None:
    try:
        return _MEMOS.setdefault(judge, _Memo())
    except TypeError:  # a judge that cannot be referred to weakly: nothing is remembered
        return None


def passing_batches(
    tick: Tick,
    key: GpuKey,
    cand: Callable[[int], PlannedServer],
    top: int,
    *,
    sig: Hashable,
    family: Hashable,
    name: str,
    refused: frozenset[int] = frozenset(),
    pressing: tuple[str, float] | None = None,
) -> tuple[int, ...]:
    """The batches from `top` down to 1 at which the judge accepts `cand(batch)` on `key` beside
    what it runs (`Tick.judged_ok`), remembered by the GPU's content and either the shape of
    `cand(top)` (`_shape`) or `sig`, which must hold all that cand's servers are made of
    (bursting.py: the late server, the stand-in's name, port index and share, and what it is
    credited); `family` holds all of that but the name, GPU index and port index (which no
    shape reads), `name` is the candidate's. `cand(b)` differs from `cand(top)` in its batch alone.
    `refused`: batches the judge is known to refuse on `key` (bursting.py: they miss alone, and the
    GPU can only slow them down), not asked again. `pressing`: the model and MPS share of every
    `cand(b)`, each an MPS server that replaces nothing, where the pressure bound may refuse
    batches before their candidate is made (`_Press`); None: every batch is judged."""
    memo = _memo(tick.inp.judge)
    if memo is None:
        return tuple(b for b in range(top, 0, -1) if b not in refused and tick.judged_ok(key, cand(b)))
    k = (_content_id(memo, tick, key), key, _shape(tick, key, cand, top, family, name) or ("sig", sig), top)
    hit = memo.batches.get(k)
    if hit is None:
        if len(memo.batches) >= MAX_ENTRIES:
            memo.batches.clear()
            memo.ids.clear()
            memo.press.clear()
        fresh = not any(name in (s.name, s.replaces) for s in tick.on[key])
        press = _press(memo, tick, key, k[0]) if pressing is not None and fresh else None
        if press is None or pressing is None:
            hit = tuple(b for b in range(top, 0, -1) if b not in refused and tick.judged_ok(key, cand(b)))
        else:
            model, share = pressing[0], round(pressing[1], 6)
            free = sum([*press.shares, share]) <= 100.0 + REL  # as colocation.split sums: no split
            hit = tuple(
                b
                for b in range(top, 0, -1)
                if b not in refused
                and _ok(tick, key, cand, b, press, crowding.pressure(press.perf, (model, b, share)) if free else None)
            )
        memo.batches[k] = hit
    return hit


def pushes(tick: Tick, key: GpuKey, name: str, pressing: tuple[str, float], top: int) -> dict[int, tuple[float, float]]:
    """Per batch from `top` down to 1, the pressure (crowding.pressure) of a candidate named `name`
    of `pressing`'s model and MPS share, an MPS server that replaces nothing, on what `key` runs,
    where every server there is judged as in `_Press` and carries no more the harder it is
    pressed (crowding.carries_less); {} where that does not hold (bursting.py's floors bound)."""
    memo = _memo(tick.inp.judge)
    if memo is None or any(name in (s.name, s.replaces) for s in tick.on[key]):
        return {}
    press = _press(memo, tick, key, _content_id(memo, tick, key))
    share = round(pressing[1], 6)
    if press is None or not press.thr_falls or sum([*press.shares, share]) > 100.0 + REL:
        return {}
    out = {b: crowding.pressure(press.perf, (pressing[0], b, share)) for b in range(top, 0, -1)}
    return {b: p for b, p in out.items() if p is not None}


def _ok(
    tick: Tick,
    key: GpuKey,
    cand: Callable[[int], PlannedServer],
    batch: int,
    press: _Press,
    push: tuple[float, float] | None,
) -> bool:
    """`tick.judged_ok` of `cand(batch)`, said without a judgement where a server within budget
    surely misses it beside a candidate pressing `push` (`_Press`); a miss the judgement finds is
    remembered. The candidate, named apart from every server on the GPU and replacing nothing, is
    judged last after `press.loaded` (Tick._verdict: `loading` reads its name nowhere else)."""
    if push is None:
        return tick.judged_ok(key, cand(batch))
    if press.refuses(push):
        return False
    c = cand(batch)
    if tick.judged_ok(key, c):
        return True
    verdict = tick.inp.judge(tick.gpus[key].instance_type, [*press.loaded, c])
    if any(s.name in press.before and not ok for s, (ok, _) in zip(press.loaded, verdict)):
        press.remember(push)
    return False


def _press(memo: _Memo, tick: Tick, key: GpuKey, content: int) -> _Press | None:
    """The GPU content `content` as neighbours (`_Press`), made once per content; None where the
    judge is not the MPS model (colocation.ModelJudge's verdict) or the bound may not hold
    (crowding.presses_on: a MIG slice or a held slice there, a term that could shrink)."""
    if content in memo.press:
        return memo.press[content]
    perf = _perf(tick.inp.judge, tick.gpus[key].instance_type)
    on = tick.on[key]
    out = None
    if perf is not None and not tick.held_slices(key) and all(s.mig_profile is None for s in on):
        loaded = loading(on, {s.name for s in on}, frozenset(v.agent_key() for v in tick.gpus[key].wanted))
        running = [(s.model, s.batch, round(s.mps_percent, 6)) for s in loaded]
        if crowding.presses_on(perf, running):
            before = tick.content(key)[-1]
            assert isinstance(before, frozenset)
            out = _Press(perf, loaded, [r for _, _, r in running], before, crowding.carries_less(perf, running))
    memo.press[content] = out
    return out


def _perf(judge: Judge, instance_type: str) -> PerfModel | None:
    """The MPS model whose verdict `judge` gives on `instance_type` (rollout_types.Modelled)."""
    modelled = modelled_of(judge)
    return modelled.mps_model(instance_type) if modelled is not None else None


def _shape(
    tick: Tick, key: GpuKey, cand: Callable[[int], PlannedServer], top: int, family: Hashable, name: str
) -> tuple[str, Hashable] | None:
    """The candidate's shape on `key` (module docstring), or None where the judge has none, or
    where its name or `replaces` could tie it to a server on the GPU (then `judged_ok` reads it).
    Found once a tick per family and instance type: the GPUs a late server tries share it."""
    shape = shape_of(tick.inp.judge)
    if shape is None or any(name in (s.name, s.replaces) for s in tick.on[key]):
        return None
    itype = tick.gpus[key].instance_type
    at = (family, itype, top)
    if at not in tick.shapes:
        probe = cand(top)
        seen = None if probe.replaces else shape(itype, probe)
        tick.shapes[at] = None if seen is None else ("shape", seen)
    return tick.shapes[at]


def _content_id(memo: _Memo, tick: Tick, key: GpuKey) -> int:
    """A number for the GPU's content, found again only once it changed (`Tick.version`)."""
    seen = tick.content_ids.get(key)
    if seen is not None and seen[0] == tick.version[key]:
        return seen[1]
    content = tick.content(key)
    n = memo.ids.get(content)
    if n is None:
        n = memo.ids[content] = next(_IDS)
    tick.content_ids[key] = (tick.version[key], n)
    return n
