"""Where each workload's rate is cut between its on-demand part and its flexible part. Pure.

planner/offerings.py splits every demand in two: at least its floor on on-demand GPU types, the
rest anywhere. A cut is that on-demand rate. Two ways to choose them, and the planner plans both
and keeps the better plan (placed, then cost, then moves), because neither estimate is right
every time:

- `own_cuts`: each workload alone, by the cost of its two parts' lower bounds (as
  tasks.decompose prices a demand). That prices on-demand share as if it were divisible.
- `fleet_cuts`: every workload together. On-demand GPUs are bought whole, so what the floors cost
  is their pieces packed into whole GPUs (first-fit decreasing of the lower bounds, per type), and
  the room that rounding leaves is already paid for: flexible work there costs nothing more. On
  a fleet of a few GPUs that is often the difference: a small workload whose floor shares an
  on-demand GPU with others may as well put its whole rate there (one server, not two).

Planned fresh on 55 rows of the ServeGen trace at floor 0.3 (`benchmarks/spot.py plans`): own
cuts alone 0.619 x the on-demand-only cost, fleet cuts alone 0.635 (the estimate ignores
interference, and packs too tightly), the better of the two 0.613. Every cut set of those rows
tried exhaustively: 0.608.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from autoscaler.model.perfmodel import PerfModel
from autoscaler.planner.tasks import Option, full_replica, option_on
from autoscaler.planner.types import Demand

EPS = 1e-9
Cuts = dict[str, float]
Priced = tuple[str | None, tuple[float, ...], float]  # on-demand GPU type, its pieces in GPUs, flexible $


def cut_choices(
    demands: Sequence[Demand],
    floors: Mapping[str, float],
    od_gpus: frozenset[str],
    prices: Mapping[str, float],
    models: Mapping[str, PerfModel],
) -> list[Cuts]:
    """The distinct cut sets worth planning: the workloads' own cuts, then the fleet's."""
    cands = {d.workload: candidates(d, floors[d.workload], od_gpus, prices, models) for d in demands}
    own = own_cuts(demands, cands, od_gpus, prices, models)
    fleet = fleet_cuts(demands, cands, own, od_gpus, prices, models)
    return [own] if fleet == own else [own, fleet]


def candidates(
    d: Demand, floor: float, od_gpus: frozenset[str], prices: Mapping[str, float], models: Mapping[str, PerfModel]
) -> list[float]:
    """The on-demand part's candidate rates, all at least floor x rate, the exact floor first.
    The exact floor adds a server the unsplit workload would not have, and a small server costs
    more share per request; so the cut may also fall on whole replicas of the on-demand type
    (k x its carry), on everything but whole replicas of the flexible type (rate - j x its
    carry), or take the whole rate."""
    need, rate = floor * d.rate_rps, d.rate_rps
    if need <= 0 or rate <= 0:
        return [0.0]
    if need >= rate * (1 - 1e-12):
        return [rate]
    cuts = {rate}
    od_carry, flex_carry = _carry(d, od_gpus, prices, models), _carry(d, set(prices), prices, models)
    if od_carry:
        cuts.add(math.ceil(need / od_carry - 1e-9) * od_carry)
    if flex_carry:
        cuts.add(rate - math.floor((rate - need) / flex_carry + 1e-9) * flex_carry)
    return [need, *sorted(c for c in cuts - {need} if need * (1 - 1e-12) <= c <= rate)]


def own_cuts(
    demands: Sequence[Demand],
    cands: Mapping[str, list[float]],
    od_gpus: frozenset[str],
    prices: Mapping[str, float],
    models: Mapping[str, PerfModel],
) -> Cuts:
    """Each workload's cut whose two parts' lower bounds cost least (ties: the smaller cut)."""
    out: Cuts = {}
    for d in demands:
        priced = [
            (cost(d, c, od_gpus, prices, models) + cost(d, d.rate_rps - c, prices, prices, models), c)
            for c in sorted(cands[d.workload])
        ]
        out[d.workload] = min(priced, key=lambda x: x[0])[1]
    return out


def fleet_cuts(
    demands: Sequence[Demand],
    cands: Mapping[str, list[float]],
    start: Cuts,
    od_gpus: frozenset[str],
    prices: Mapping[str, float],
    models: Mapping[str, PerfModel],
) -> Cuts:
    """From `start`, a few rounds of coordinate descent on `fleet_cost`: one workload's cut
    changes at a time, and only where the estimate drops."""
    priced = {d.workload: {c: _priced(d, c, od_gpus, prices, models) for c in cands[d.workload]} for d in demands}
    fills = fill_prices(prices, models)
    pick = dict(start)
    best = fleet_cost([priced[w][c] for w, c in pick.items()], prices, fills)
    for _ in range(3):
        changed = False
        for d in demands:
            for c in cands[d.workload]:
                trial = {**pick, d.workload: c}
                est = fleet_cost([priced[w][x] for w, x in trial.items()], prices, fills)
                if est < best - 1e-9:
                    pick, best, changed = trial, est, True
        if not changed:
            break
    return pick


def fleet_cost(picks: Iterable[Priced], prices: Mapping[str, float], fills: Mapping[str, float]) -> float:
    """What a cut set costs, estimated: the on-demand pieces packed into whole GPUs per type,
    plus the flexible parts' lower bounds less what the room left on those GPUs can take."""
    pieces: dict[str, list[float]] = {}
    flex = 0.0
    for gpu, parts, f in picks:
        flex += f
        if gpu is not None:
            pieces.setdefault(gpu, []).extend(parts)
    whole = {g: packed(x) for g, x in pieces.items()}
    room = sum(max(0.0, whole[g] - sum(x)) * fills[g] for g, x in pieces.items())
    return sum(n * prices[g] for g, n in whole.items()) + max(0.0, flex - room)


def packed(sizes: list[float]) -> int:
    """GPUs that first-fit decreasing needs for these lower bounds (in GPUs, each at most 1)."""
    bins: list[float] = []
    for x in sorted(sizes, reverse=True):
        i = next((i for i, used in enumerate(bins) if used + x <= 1.0 + 1e-9), None)
        if i is None:
            bins.append(x)
        else:
            bins[i] += x
    return len(bins)


def fill_prices(prices: Mapping[str, float], models: Mapping[str, PerfModel]) -> dict[str, float]:
    """Per GPU type, what a GPU's worth of work costs on the cheapest type with its performance
    model (its spot twin): what a unit of room left on it saves."""
    return {g: min(q for h, q in prices.items() if models[h] is models[g]) for g in prices}


def _priced(
    d: Demand, cut: float, od_gpus: frozenset[str], prices: Mapping[str, float], models: Mapping[str, PerfModel]
) -> Priced:
    """The on-demand part's pieces on its cheapest on-demand type, and the flexible part's $."""
    flex = cost(d, d.rate_rps - cut, prices, prices, models)
    if cut <= EPS * max(d.rate_rps, 1.0):
        return (None, (), flex)
    best = _cheapest(d, cut, od_gpus, prices, models)
    if best is None:
        return (None, (), math.inf)
    return (best.gpu, tuple(s.lower / 100.0 for s, _, _ in best.pieces), flex)


def cost(
    d: Demand, rate: float, gpus: Iterable[str], prices: Mapping[str, float], models: Mapping[str, PerfModel]
) -> float:
    """The cheapest lower-bound cost of serving `rate` of `d` on one of `gpus` (inf: none can)."""
    if rate <= EPS * max(d.rate_rps, 1.0):
        return 0.0
    best = _cheapest(d, rate, gpus, prices, models)
    return math.inf if best is None else best.cost


def _cheapest(
    d: Demand, rate: float, gpus: Iterable[str], prices: Mapping[str, float], models: Mapping[str, PerfModel]
) -> Option | None:
    """tasks.option_on for `rate` of `d` on each of `gpus`: the one whose lower bound costs least."""
    part = replace(d, rate_rps=rate)
    opts = [o for g in gpus if (o := option_on(models[g], g, part, prices[g])) is not None]
    return min(opts, key=lambda o: o.cost, default=None)


def _carry(
    d: Demand, gpus: Iterable[str], prices: Mapping[str, float], models: Mapping[str, PerfModel]
) -> float | None:
    """What one whole-GPU replica of `d` carries on the cheapest (per request) of `gpus`."""
    best: tuple[float, float] | None = None
    for g in gpus:
        replica = full_replica(models[g], d) if d.model in models[g].coef else None
        carry = replica[1] if replica is not None else 0.0
        if carry > 0 and (best is None or prices[g] / carry < best[0]):
            best = (prices[g] / carry, carry)
    return None if best is None else best[1]
