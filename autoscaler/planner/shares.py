"""The paper's Algorithm 2: raise co-located MPS shares until every latency budget holds.

Interference in the model is monotone: raising one workload's share raises its throughput, hence
the GPU's power draw (a lower clock for all) and its L2 traffic (a slower cache for the others),
and never helps a neighbour. So the shares that Algorithm 2 reaches by adding one resource unit
at a time to every violating workload are the *least* fixed point above the lower bounds, and any
method that only ever raises a share to at most what it needs reaches the same point. `settle`
jumps instead of stepping: for a violating workload it solves t_act for the latency it must reach,
holding the clock and the neighbours' cache traffic at their current values. That estimate never
overshoots (a higher share only lowers the clock and neighbours only get busier), so the result is
Algorithm 2's, in a few model evaluations instead of dozens.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from autoscaler.model.perfmodel import PerfModel
from autoscaler.planner.tasks import Size, forget_oldest

EPS = 1e-9
HI, LO = 1 + EPS, 1 - EPS  # violated's tolerances (the same floats as computing them each time)
Prediction = tuple[float, float]
Mix = tuple[tuple[str, int], ...]  # (model, batch) of each placement on a GPU
PREDICTIONS_KEPT = 1 << 16  # GPUs' predictions remembered (predict); beyond, the older half is forgotten
_predictions: dict[tuple[PerfModel, Mix, tuple[float, ...]], tuple[Prediction, ...]] = {}


def forget_predictions() -> None:
    """Forget the remembered GPUs' predictions (api.forget_memos)."""
    _predictions.clear()


def violated(size: Size, pred: Prediction) -> bool:
    """Whether a placement misses its latency budget or the throughput its rate share needs."""
    lat, thr = pred
    return lat > size.budget_ms * HI or thr < size.need_rps * LO


def mix_of(sizes: Sequence[Size]) -> Mix:
    """What of each placement the model reads besides its share: model and batch."""
    return tuple([(s.model, s.batch) for s in sizes])


def predict(model: PerfModel, sizes: Sequence[Size], shares: Sequence[float]) -> list[Prediction]:
    """The model's predictions for these placements together on one GPU. Remembered per model
    (by identity: a fitted model never changes) and exact (model, batch, share) list: a plan
    predicts the same few GPU mixes over and over (settling, trying GPUs, the final check), and
    the ServeGen replay's plans asked 24 times per mix they predicted."""
    return list(predicted(model, mix_of(sizes), tuple(shares)))


def predicted(model: PerfModel, mix: Mix, shares: tuple[float, ...]) -> tuple[Prediction, ...]:
    """`predict` on a mix already built: the remembered tuple itself (immutable, so a caller may
    keep it). The key holds every item predict_raw reads (model, batch, share) as the
    (model, batch, share) tuples did, split in two so that settle builds the mix once."""
    key = (model, mix, shares)
    out = _predictions.get(key)
    if out is None:
        if len(_predictions) >= PREDICTIONS_KEPT:
            forget_oldest(_predictions, PREDICTIONS_KEPT // 2)
        out = _predictions[key] = tuple(model.predict_raw([(m, b, r) for (m, b), r in zip(mix, shares)]))
    return out


def settle(
    model: PerfModel,
    sizes: Sequence[Size],
    shares: Sequence[float],
    step: float | None = None,
    pinned: Sequence[bool] | None = None,
    mix: Mix | None = None,
) -> tuple[list[float], list[Prediction]] | None:
    """Raise shares from `shares` until every placement is feasible; None if that needs > 100 %.

    `step` = None jumps to the estimated need (same result as Algorithm 2, faster); a number
    raises each violating placement by exactly that much per round, as the prototype does.
    A `pinned` placement (kept from the current plan) may not change: its violation is a failure.
    `mix`: mix_of(sizes) where the caller has it. The planner's innermost loop (~13,000 calls a
    tick at 1,000 workloads), so violated, the remembered predictions' lookup and `jump` are
    inlined here (tests/planner/test_settle_exact.py holds it to the plain loop that calls them).
    """
    out = list(shares)
    if mix is None:
        mix = mix_of(sizes)
    unit = model.unit
    kept = _predictions
    while True:
        key = (model, mix, tuple(out))
        preds = kept.get(key)
        if preds is None:
            preds = predicted(model, mix, key[2])
        raised = False
        for i, (size, (lat, thr)) in enumerate(zip(sizes, preds)):
            if lat > size.budget_ms * HI or thr < size.need_rps * LO:
                if pinned is not None and pinned[i]:
                    return None
                share = out[i]
                if step is not None:
                    nxt = share + step
                else:  # jump(size, share, (lat, thr), unit), written out: the same floats
                    io = size.io_ms
                    t_gpu = lat - io
                    target = size.budget_ms - io
                    if size.need_rps > 0:
                        alt = 1000.0 * size.batch / size.need_rps - size.out_ms
                        if alt < target:  # min(target, alt): the first on a tie
                            target = alt
                    if target <= 0 or t_gpu <= 0:
                        return None
                    k5 = size.k5
                    t_act = size.work / (share + size.k4) + k5
                    ratio = target / t_gpu
                    allowed = t_act * ratio if ratio < 1.0 else t_act  # t_act * min(1.0, ratio)
                    if allowed <= k5:
                        return None
                    nxt = math.ceil((size.work / (allowed - k5) - size.k4) / unit - 1e-9) * unit
                    if not nxt > share + unit:  # max(share + unit, nxt): the first on a tie
                        nxt = share + unit
                if nxt > 100.0 + EPS:
                    return None
                out[i], raised = nxt, True
        if not raised:
            return out, list(preds)
        if sum(out) > 100.0 + EPS:
            return None


def jump(size: Size, share: float, pred: Prediction, unit: float) -> float | None:
    """The next share for a violating placement: at least one unit more, at most what it needs.

    With the clock and the neighbours fixed, t_gpu = (overhead + t_act * m) / clock; asking t_gpu
    to shrink by the factor s and scaling t_act alone by s over-estimates the allowed t_act, which
    under-estimates the share: safe for a least fixed point. None: no share can be enough.
    """
    lat = pred[0]
    t_gpu = lat - size.io_ms
    target = size.budget_ms - size.io_ms
    if size.need_rps > 0:
        target = min(target, 1000.0 * size.batch / size.need_rps - size.out_ms)
    if target <= 0 or t_gpu <= 0:
        return None
    t_act = size.work / (share + size.k4) + size.k5
    allowed = t_act * min(1.0, target / t_gpu)
    if allowed <= size.k5:
        return None
    need = size.work / (allowed - size.k5) - size.k4
    return max(share + unit, math.ceil(need / unit - 1e-9) * unit)


def solo_shares(sizes: Sequence[Size]) -> list[float]:
    """Every placement at its own lower bound: where Algorithm 2 starts."""
    return [s.lower for s in sizes]


SPEND_FRACTIONS = (0.5, 0.25)  # of the idle share; the rest stays free (see spend_idle)


def spend_idle(
    model: PerfModel, sizes: Sequence[Size], shares: Sequence[float], grow: Sequence[bool]
) -> tuple[list[float], list[Prediction]] | None:
    """Hand half the GPU's unassigned share to the placements in `grow`, in proportion to their
    shares and in whole units (a quarter if half breaks a budget); None when neither fits.

    Algorithm 2 stops at the least shares that meet every budget, so a GPU the plan pays for keeps
    whatever share no placement needed. Spent on its placements, it costs nothing and buys
    throughput above the planned rate: capacity for a rate that rises before the next plan, and
    slack that lets a kept placement carry a higher rate without a restart. Only half: a kept
    placement's share is fixed, so share it took would be share a neighbour whose rate rises, or a
    new task, could not grow into without moving something (spending all of it cut restarts in the
    ServeGen replay by a quarter but raised moves by a quarter in plan_quality's drift test; half
    keeps most of the first and little of the second). A larger share slows the neighbours (clock,
    cache), so the whole GPU is re-predicted.
    """
    free = 100.0 - sum(shares)
    base = sum(s for s, g in zip(shares, grow) if g)
    if free < model.unit - EPS or base <= 0:
        return None
    for frac in SPEND_FRACTIONS:
        new = [
            max(s, math.floor((s + free * frac * s / base) / model.unit + EPS) * model.unit) if g else s
            for s, g in zip(shares, grow)
        ]
        if new == list(shares) or sum(new) > 100.0 + EPS:
            continue
        preds = predict(model, sizes, new)
        if not any(violated(s, p) for s, p in zip(sizes, preds)):
            return new, preds
    return None
