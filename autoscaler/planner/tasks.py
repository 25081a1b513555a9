"""Demands -> tasks: the paper's batch rule and resource lower bound per GPU type, and replicas.

A task is one inference server to place: a whole workload, or one replica of a workload whose
demand exceeds one GPU. Each task carries a `Size` for every GPU type that can serve it alone, so
the placement code never calls the model's solo search again.

The SLO-guard correction c >= 1 is applied here once: a task's latency budget is SLO / 2 / c and
the throughput it must reach is rate * c, i.e. the plan holds even if real latencies are c times
the predicted ones (throughput then shrinks by the same factor).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from itertools import islice
from typing import Any

from autoscaler.model.perfmodel import PerfModel
from autoscaler.planner.types import Demand, Unplaced

MAX_BATCH = 1024  # the fitted t_act is a quadratic in b; beyond this it is extrapolation
BATCH_SEARCH = 5  # batches tried below the paper's rule (its rounding up is what they recover)
SIZES_KEPT = 16384  # size_on answers remembered


@dataclass(frozen=True, slots=True)
class Size:
    """How a task runs on one GPU type: batch, lower bound, budgets and the solver's constants."""

    gpu: str
    model: str
    batch: int
    lower: float  # the resource lower bound (percent, a multiple of the unit)
    budget_ms: float  # predicted latency must stay <= this
    need_rps: float  # predicted throughput must reach this
    memory_mb: float
    work: float  # k1 b^2 + k2 b + k3: t_act = work / (r + k4) + k5
    k4: float
    k5: float
    io_ms: float  # (d_in + d_out) b / B
    out_ms: float  # d_out b / B


@dataclass(slots=True, eq=False)
class Task:
    """One server to place. `rate` is the share of the workload's rate it carries."""

    tid: int
    demand: Demand
    rate: float
    sizes: dict[str, Size]
    pref: str  # the GPU type where its demand is cheapest
    full: bool = False  # a whole-GPU replica at the largest feasible batch
    carries: float | None = None  # the rate its sizes are built for, when above `rate` (N+1 redundancy)

    @property
    def capacity(self) -> float:
        """The rate this server must be able to carry: its share, or with redundancy its share
        while another server of the workload is lost."""
        return self.rate if self.carries is None else self.carries

    @property
    def workload(self) -> str:
        return self.demand.workload

    @property
    def lower(self) -> float:
        """The paper's sort key: the lower bound on the preferred GPU type."""
        return self.sizes[self.pref].lower


def make_size(model: PerfModel, gpu: str, d: Demand, batch: int, lower: float, rate: float) -> Size:
    """Bundle a (batch, lower bound) with the constants the share solver needs. Remembered per
    exact argument and its type (a pure function; Size is frozen): a kept placement (stability.py)
    is sized again on every plan, mostly for the same rate it carried the plan before."""
    return _made(model, gpu, d.model, d.slo_ms, d.correction, batch, lower, rate)


def _make_size(
    model: PerfModel, gpu: str, name: str, slo_ms: float, correction: float, batch: int, lower: float, rate: float
) -> Size:
    c = model.coef[name]
    k1, k2, k3, k4, k5 = c.k
    return Size(
        gpu,
        name,
        batch,
        lower,
        slo_ms / 2.0 / correction,
        rate * correction,
        model.memory(name, batch),
        k1 * batch * batch + k2 * batch + k3,
        k4,
        k5,
        (c.in_ms_per_item + c.out_ms_per_item) * batch,
        c.out_ms_per_item * batch,
    )


_made = lru_cache(maxsize=SIZES_KEPT, typed=True)(_make_size)


def size_on(model: PerfModel, gpu: str, d: Demand, rate: float, search: bool = True) -> Size | None:
    """Batch and lower bound for `rate` of `d` on one GPU type; None if it needs more than one GPU.
    Remembered per exact arguments that it reads (a pure function; Size is frozen): of the demand
    only model, SLO and correction, never its own rate, so a kept placement's size (stability.py,
    at the rate it carried) is found again on the next tick although the workload's rate moved.
    The repair pass and the stability check ask it again for demands already decomposed."""
    return _sized(model, gpu, d.model, d.slo_ms, d.correction, rate, search)


def _size_on(model: PerfModel, gpu: str, d: Demand, rate: float, search: bool = True) -> Size | None:
    return _sized.__wrapped__(model, gpu, d.model, d.slo_ms, d.correction, rate, search)


size_on.__wrapped__ = _size_on  # type: ignore[attr-defined]  # the answer without the cache, as lru_cache's


@lru_cache(maxsize=SIZES_KEPT)
def _sized(
    model: PerfModel, gpu: str, name: str, slo_ms: float, correction: float, rate: float, search: bool
) -> Size | None:
    """size_on on what it reads of the demand.

    The paper's rule takes the smallest batch that fills within half the SLO. It rounds up, and
    the rounding can cost a lot: one request more per batch must finish in the same half-SLO.
    With `search`, the planner also tries a few smaller batches (which fill sooner, so the SLO's
    batching half still holds) and keeps the one with the smallest lower bound.
    """
    slo_eff, need = slo_ms / 2.0 / correction, rate * correction
    rule = model.batch_size(name, slo_ms, rate)
    top = max_batch(model, name, slo_eff)
    first = min(rule, top) if top else rule
    best: tuple[float, int] | None = None
    for batch in range(first, max(0, first - (BATCH_SEARCH if search else 1)), -1):
        share = min_share(model, name, batch, slo_eff, need) if _fits_memory(model, name, batch) else None
        if share is not None and (best is None or share < best[0]):
            best = (share, batch)
    if best is None:
        return None
    return _make_size(model, gpu, name, slo_ms, correction, best[1], best[0], rate)


def min_share(model: PerfModel, name: str, batch: int, budget_ms: float, need_rps: float) -> float | None:
    """The smallest share at which `batch` meets the budget and the throughput need alone."""
    return model.min_share(name, batch, budget_ms, need_rps)


def _fits_memory(model: PerfModel, name: str, batch: int) -> bool:
    return model.memory_mb is None or model.memory(name, batch) <= model.memory_mb


@lru_cache(maxsize=4096)
def max_batch(model: PerfModel, name: str, budget_ms: float) -> int:
    """The largest batch whose solo latency on a whole GPU fits the budget (0: none does)."""
    lo, hi = 0, MAX_BATCH
    while lo < hi:
        mid = (lo + hi + 1) // 2
        ok = model.solo(name, mid, 100.0)[0] <= budget_ms and _fits_memory(model, name, mid)
        lo, hi = (mid, hi) if ok else (lo, mid - 1)
    return lo


@dataclass(frozen=True, slots=True)
class Option:
    """One way to serve a whole workload on one GPU type: its pieces and what they cost."""

    gpu: str
    pieces: tuple[tuple[Size, float, bool], ...]  # (size, rate share, full replica)
    cost: float  # GPUs' worth of lower bounds times the price per GPU


def option_on(model: PerfModel, gpu: str, d: Demand, price: float, search: bool = True) -> Option | None:
    """A single server if the demand fits one GPU, else full-GPU replicas plus a remainder."""
    if d.model not in model.coef:
        return None
    one = size_on(model, gpu, d, d.rate_rps, search)
    if one is not None:
        return Option(gpu, ((one, d.rate_rps, False),), one.lower / 100.0 * price)
    replica = full_replica(model, d)
    if replica is None:
        return None
    return _replicas(model, gpu, d, *replica, price, search)


def full_replica(model: PerfModel, d: Demand) -> tuple[int, float] | None:
    """A whole-GPU replica of `d`: its largest batch within half the SLO and what it carries (None:
    no batch meets it). A demand too big for one server is cut into these."""
    top = max_batch(model, d.model, d.slo_ms / 2.0 / d.correction)
    if top == 0:
        return None
    return top, model.solo(d.model, top, 100.0)[1] / d.correction


def _replicas(
    model: PerfModel, gpu: str, d: Demand, top: int, carry: float, price: float, search: bool
) -> Option | None:
    """floor(rate / carry) full replicas at the largest batch; the rest as one normal piece."""
    n = math.floor(d.rate_rps / carry * (1 + 1e-12))
    full = make_size(model, gpu, d, top, 100.0, carry)
    pieces = [(full, carry, True)] * n
    rest = d.rate_rps - n * carry
    if rest > 1e-9 * d.rate_rps:
        size = size_on(model, gpu, d, rest, search)
        if size is None:
            return None
        pieces.append((size, rest, False))
    return Option(gpu, tuple(pieces), sum(s.lower for s, _, _ in pieces) / 100.0 * price)


def fastest(models: Mapping[str, PerfModel], d: Demand) -> float | None:
    """The lowest end-to-end SLO any GPU type could meet for this model (2x the batch-1 latency)."""
    lats = [m.min_latency(d.model) * d.correction for m in models.values() if d.model in m.coef]
    return 2.0 * min(lats) if lats else None


def unplaced_reason(models: Mapping[str, PerfModel], d: Demand) -> str:
    """Why no GPU type can serve a demand, in the words an operator needs."""
    best = fastest(models, d)
    if best is None:
        return f"model {d.model!r} is in no profile of the available instance types"
    if d.slo_ms < best:
        return f"SLO {d.slo_ms:g} ms is below the fastest possible latency {best:.2f} ms on any GPU type" + (
            f" (with the SLO-guard factor {d.correction:g})" if d.correction > 1 else ""
        )
    return "does not fit in GPU memory at any batch size that meets its SLO and rate"


def decompose(
    demands: Sequence[Demand],
    models: Mapping[str, PerfModel],
    prices: Mapping[str, float],
    gpus: Sequence[str] | None = None,
    search: bool = True,
) -> tuple[list[Task], list[Unplaced]]:
    """Tasks for every positive-rate demand (replicas where needed), and the demands no type serves.

    `prices` is the price per GPU of each type; `gpus` limits the types considered (the plain
    algorithm uses a single type), and so does each demand's own `gpus`. A demand is split on the type where its split is cheapest.
    `search`: try batches below the paper's rule (see `size_on`).
    """
    tasks: list[Task] = []
    unplaced: list[Unplaced] = []
    allowed = list(gpus if gpus is not None else prices)
    ctx = (tuple(models.items()), tuple(prices.items()), tuple(allowed), search)
    for d in demands:
        if d.rate_rps <= 0:
            continue
        key = (d, type(d.rate_rps), type(d.slo_ms), type(d.correction), ctx)
        got = _decomposed.get(key)
        if got is None:
            got = _decomposed[key] = _decompose_one(d, models, prices, allowed, search)
            if len(_decomposed) > DECOMPOSED_KEPT:
                forget_oldest(_decomposed, DECOMPOSED_KEPT // 2)
        if isinstance(got, str):
            unplaced.append(Unplaced(d.workload, got))
            continue
        start = len(tasks)
        tasks.extend(
            Task(start + i, d, rate, dict(sizes), pref, full, carries)
            for i, (rate, sizes, pref, full, carries) in enumerate(got)
        )
    return tasks, unplaced


DECOMPOSED_KEPT = 8192  # demands' decompositions remembered (decompose); beyond, the older half is forgotten
Pieces = tuple[tuple[float, dict[str, Size], str, bool, float | None], ...]
_decomposed: dict[tuple[object, ...], Pieces | str] = {}


def _decompose_one(
    d: Demand, models: Mapping[str, PerfModel], prices: Mapping[str, float], allowed: Sequence[str], search: bool
) -> Pieces | str:
    """One demand's tasks, as (rate, sizes, pref, full, carries) without their ids, or why no type
    serves it. decompose remembers it per demand (every field, and the type of each number, so an
    int rate never hands back a float's), models (by identity), prices, allowed types and `search`:
    a pure function of those. A plan at 1,000 workloads decomposes every demand each tick, and
    about half of a tick's demands are those of the tick before (a forecast that held)."""
    mine = [g for g in allowed if d.gpus is None or g in d.gpus]
    opts = [o for g in mine if (o := option_on(models[g], g, d, prices[g], search)) is not None]
    if not opts:
        return unplaced_reason({g: models[g] for g in mine}, d)
    return tuple((t.rate, t.sizes, t.pref, t.full, t.carries) for t in _tasks_for(d, opts, models, prices, 0, search))


def forget_sizes() -> None:
    """Forget the remembered decompositions, sizes and batch limits (api.forget_memos)."""
    _decomposed.clear()
    _sized.cache_clear()
    _made.cache_clear()
    max_batch.cache_clear()


def forget_oldest(kept: dict[Any, Any], count: int) -> None:
    """Drop the `count` entries put in first (a dict keeps its order of insertion), so the newest
    stay: the next plans ask mostly what the last ones asked (a fleet changes a little a tick)."""
    for key in list(islice(kept, count)):
        kept.pop(key, None)  # pop: another thread may have dropped it already


def _tasks_for(
    d: Demand,
    opts: list[Option],
    models: Mapping[str, PerfModel],
    prices: Mapping[str, float],
    start: int,
    search: bool,
) -> list[Task]:
    """The cheapest option's pieces; a partial piece also gets sizes on every other type it fits,
    a whole-GPU replica on every other type with the same performance model (a spot offering's GPU
    type and its on-demand twin, planner/offerings.py), where it is the same server."""
    best = min(opts, key=lambda o: (o.cost, len(o.pieces)))
    others = [o.gpu for o in opts if o.gpu != best.gpu]
    twins = [g for g in others if models[g] is models[best.gpu]]
    pieces = redundant_pieces(best.pieces) if d.redundant else best.pieces
    total = sum(rate for _, rate, _ in pieces)
    out = []
    for i, (size, rate, full) in enumerate(pieces):
        sizes = {best.gpu: size} | {g: replace(size, gpu=g) for g in twins}
        if not full:
            sizes |= {g: s for g in others if (s := size_on(models[g], g, d, rate, search)) is not None}
        pref = min(sizes, key=lambda g: sizes[g].lower * prices[g])
        share = rate * d.rate_rps / total if d.redundant else rate
        out.append(Task(start + i, d, share, sizes, pref, full, rate if share < rate else None))
    return out


def redundant_pieces(pieces: tuple[tuple[Size, float, bool], ...]) -> tuple[tuple[Size, float, bool], ...]:
    """N+1: one server more than the rate needs, as large as the largest, so that the others
    carry the whole rate when any one is lost. A workload that fits one server gets two, each
    sized for the whole rate; one split into whole-GPU replicas gets one replica more. The routed
    shares are scaled down (by the caller) so they still add up to the rate."""
    largest = max(pieces, key=lambda p: p[1])
    return (*pieces, largest)
