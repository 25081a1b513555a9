"""Refusals without a judgement (colocation.ModelJudge, rollout_types.Refusals). Pure.

A burst or a stand-in tries every GPU with room (borrowing.py, bursting.py), and most refuse it: at 1,000
instances some 130,000 judgements in a re-plan tick. Most of those candidates miss their budget
even alone on the GPU, and the model can say when neighbours can only slow a server down; then a
miss alone is a miss beside them, and no judgement is needed.

On MPS (the fitted model, model/perfmodel.py) a server s beside neighbours N, with nothing
over-subscribed (the shares sum to 100 % at most, so each keeps its own: colocation.split), has

    t_gpu = (n_k delta(|S|) + t_idle + t_act (1 + alpha sum(L2 of N))) / (f(P_idle + P_s + sum(P of N)) / F)

against (n_k delta(1) + t_idle + t_act) / (f(P_idle + P_s) / F) alone. Every term grows or stays
when delta(|S|) >= delta(1) (perfmodel.delta takes the larger), n_k, t_idle, alpha and t_act are
not negative, each neighbour's power and L2 lines are not negative at the throughput it has, and
the clock never rises with power (a clock slope <= 0). Float rounding keeps the order: each
operation is monotone in its operands. So latency beside N >= latency alone, and the verdict's
`latency <= budget` fails beside N wherever it failed alone.

Over-subscribed (the shares sum past 100 %), MPS gives each server its share scaled by 100 / sum
(colocation.split), and the same terms hold at those shares: a server judged beside the others at
its split share is never faster than alone at that share, and carries no more (its throughput,
1000 b / (t_gpu + d_out b), falls as t_gpu grows). So each server alone at its split share
(`at_best`) bounds the verdict: where that misses the budget, or carries less than a stand-in must
(borrowing.py), the judgement would refuse the trial too. Where a GPU is full, nearly every
stand-in's trial fails so: the newcomer takes share from each server there.

On MIG a slice's neighbours never slow it (its measured row is its verdict); they only make the
cut invalid where they share one of its memory units.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from autoscaler.config.mig import Slot
from autoscaler.model.perfmodel import ModelCoefficients, PerfModel

REL = 1e-6  # colocation.REL: the verdict's tolerance on a share sum
Running = tuple[str, int, float]  # what the MPS model reads of a server: model, batch, share (rounded as judged)


def misses_alone(perf: PerfModel, mine: Running, budget: float) -> bool:
    """`mine` is over `budget` alone, and its own terms can only grow beside others (its active
    time positive; n_k, t_idle, alpha and delta(1) not negative)."""
    model, batch, share = mine
    c = perf.coef.get(model)
    if c is None or c.alpha_cache < 0 or c.kernels < 0 or c.idle_ms < 0 or perf.delta1 < 0:
        return False
    if not c.active_ms(batch, share) > 0:
        return False
    return perf.solo(model, batch, share)[0] > budget


def only_slow(perf: PerfModel, beside: Sequence[Running], room: float) -> bool:
    """Each server of `beside` can only slow down a newcomer of at most `room` share: all fit
    within 100 % with it, the clock never rises with power, and each one's power and L2 lines are
    not negative at its throughput."""
    if sum(b[2] for b in beside) + round(room, 6) > 100.0 + REL or perf.clock_slope > 0:
        return False
    for model, batch, share in beside:
        c = perf.coef.get(model)
        if c is None:
            return False
        if not _lines_hold(c, batch, share):
            return False
    return True


def _lines_hold(c: ModelCoefficients, batch: int, share: float) -> bool:
    """A server runs (a positive active time) and its power and L2 lines at that throughput are
    not negative: then it can only add to its neighbours' power and cache pressure."""
    t = c.active_ms(batch, share)
    if not t > 0:
        return False
    h = 1000.0 * batch / t
    return not (c.power[0] + c.power[1] * h < 0 or c.l2[0] + c.l2[1] * h < 0)


def at_best(perf: PerfModel, running: Sequence[Running], budgets: Sequence[float]) -> list[tuple[bool, float]] | None:
    """Per server of `running`, each at the share the split leaves it, whether it may meet its
    budget and the most it may carry beside all the others: alone at that share (module
    docstring); None where a term could shrink beside others (a negative coefficient, power or
    L2 line, a clock that rises with power)."""
    if perf.clock_slope > 0 or perf.delta1 < 0:
        return None
    for model, batch, share in running:
        c = perf.coef.get(model)
        if c is None or c.alpha_cache < 0 or c.kernels < 0 or c.idle_ms < 0 or c.out_ms_per_item < 0:
            return None
        if not _lines_hold(c, batch, share):
            return None
    out = []
    for (model, batch, share), budget in zip(running, budgets, strict=True):
        lat, thr = perf.solo(model, batch, share)
        out.append((lat <= budget, thr))
    return out


def units_taken(units: Mapping[str, int], mine: Slot, beside: Sequence[Slot]) -> bool:
    """A slice of `beside` shares a memory unit with `mine`; `units`: each slice profile's memory
    units on the GPU (profiles it does not know are left to the judgement)."""
    size = units.get(mine[0])
    if size is None:
        return False
    lo, hi = mine[1], mine[1] + size
    return any(p in units and start < hi and lo < start + units[p] for p, start in beside)


def pressure(perf: PerfModel, newcomer: Running) -> tuple[float, float] | None:
    """What a newcomer adds to each neighbour's terms in PerfModel.predict_raw, the same floats:
    its L2 line and its power at its solo throughput (which reads no neighbour). None where its
    active time is not positive or its L2 line is negative (`presses_on`)."""
    model, batch, share = newcomer
    c = perf.coef.get(model)
    if c is None:
        return None
    t = c.active_ms(batch, share)
    if not t > 0:
        return None
    h = 1000.0 * batch / t
    l2 = c.l2[0] + c.l2[1] * h
    return (l2, c.power[0] + c.power[1] * h) if l2 >= 0 else None


def presses_on(perf: PerfModel, running: Sequence[Running]) -> bool:
    """Whether each of `running`, judged with one newcomer more (its share in its own, nothing
    over-subscribed), has a latency that never falls as the newcomer's `pressure` grows: a newcomer
    with no less L2 and no less power than one under which a server missed its budget makes it
    miss too (burst_memo.py prunes such trials).

    With shares summing to 100 % at most, each server keeps its share and active time t; the
    newcomer's count is the same for every newcomer, so delta(|S|) is too; the newcomer, judged
    last, adds its L2 line c last to the sum each neighbour reads (sum(L2) - own) and its power p
    last to the GPU's power. Then a neighbour's

        t_gpu = (n_k delta + t_idle + t (1 + alpha (sum(L2) - own))) / ratio(P)

    has a numerator that grows with c (alpha >= 0, t > 0: each float operation is monotone in its
    operands) and is not negative (n_k, delta, t_idle >= 0, every L2 line >= 0 so the sum less its
    own part is too, `pressure` returns none below 0), and a ratio that falls as p grows (a clock
    slope <= 0; 1.0 up to the cap, at most 1.0 above it); so t_gpu, and the latency t_gpu plus its
    transfer time, grow with (c, p) in both. The verdict compares that latency with a budget that
    reads no newcomer. None of this holds off these conditions: then False."""
    if perf.clock_slope > 0 or perf.delta(len(running) + 1) < 0:
        return False
    for model, batch, share in running:
        c = perf.coef.get(model)
        if c is None or c.alpha_cache < 0 or c.kernels < 0 or c.idle_ms < 0:
            return False
        t = c.active_ms(batch, share)
        if not t > 0 or c.l2[0] + c.l2[1] * (1000.0 * batch / t) < 0:
            return False
    return True


def carries_less(perf: PerfModel, running: Sequence[Running]) -> bool:
    """Where `presses_on` holds, whether each of `running` also carries no more as the newcomer's
    pressure grows: its throughput 1000 b / (t_gpu + d_out b) falls as t_gpu grows, t_gpu being
    positive (its active time is) and d_out not negative, so the denominator positive."""
    return all((c := perf.coef.get(model)) is not None and c.out_ms_per_item >= 0 for model, _, _ in running)
