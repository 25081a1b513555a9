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
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

from autoscaler.core.layout.layout_types import PlannedServer
from autoscaler.core.rollout.rollout import GpuKey, Judge, Tick
from autoscaler.core.rollout.rollout_types import shape_of

MAX_ENTRIES = 1 << 15  # then all forgotten at once: some 7 ticks of 1,000 workloads, tens of MB


@dataclass
class _Memo:
    ids: dict[tuple[object, ...], int] = field(default_factory=dict)  # GPU content -> its id
    batches: dict[tuple[int, GpuKey, Hashable, int], tuple[int, ...]] = field(default_factory=dict)


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
) -> tuple[int, ...]:
    """The batches from `top` down to 1 at which the judge accepts `cand(batch)` on `key` beside
    what it runs (`Tick.judged_ok`), remembered by the GPU's content and either the shape of
    `cand(top)` (`_shape`) or `sig`, which must hold all that cand's servers are made of
    (bursting.py: the late server, the stand-in's name, port index and share, and what it is
    credited); `family` holds all of that but the name, GPU index and port index (which no
    shape reads), `name` is the candidate's. `cand(b)` differs from `cand(top)` in its batch alone.
    `refused`: batches the judge is known to refuse on `key` (bursting.py: they miss alone, and the
    GPU can only slow them down), not asked again."""
    memo = _memo(tick.inp.judge)
    if memo is None:
        return tuple(b for b in range(top, 0, -1) if b not in refused and tick.judged_ok(key, cand(b)))
    k = (_content_id(memo, tick, key), key, _shape(tick, key, cand, top, family, name) or ("sig", sig), top)
    hit = memo.batches.get(k)
    if hit is None:
        if len(memo.batches) >= MAX_ENTRIES:
            memo.batches.clear()
            memo.ids.clear()
        hit = memo.batches[k] = tuple(b for b in range(top, 0, -1) if b not in refused and tick.judged_ok(key, cand(b)))
    return hit


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
