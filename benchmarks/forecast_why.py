"""Why `forecast: auto` costs more than the defaults on ServeGen's 10-minute rows, first half
(issue 52; forecast_auto.py --replay: the defaults and `auto` on each shipped case).

ServeGen has no period under a day (`igniter forecast` on the whole trace finds only m-small's
daily one, which a day of history cannot hold), so every period `auto` plans with there is a false
one, and with none `auto` plans exactly as the default `seasonal`. This replays the first half
(the rows [0, 168 h): the replay is causal, so they score as in the whole trace's replay) with
`auto` and:

- `hourly refits`: refit_min_s = refit_s (an hour): refits at the start and every hour from it,
  the schedule before the young history's (eec7e24), the period search unchanged: the same
  traffic, refits at other times;
- `no fits 44-70 h`: the periods of the refits made in [44 h, 70 h) dropped (those fits plan as
  `seasonal`): m-mid's 6.3-hour and 70-minute ones;
- `min_strength 0.1`: a period must carry 10 % of the detrended variance (the default 2 %).

and lists the refits that found a period (time, workload, minutes). Only this first half was
looked at; nothing here changes a default (a change would be chosen on the generator's tune seeds
and this half, then reported on the held-out seeds and the second halves).

    python benchmarks/forecast_why.py      # about 5 minutes CPU

The runs were chosen at 081bb6c, when `auto`'s refits planned with 41 periods in this half; since
the out-of-sample test and d3900e6's full profile for periods over 4 h none keeps one there, and
every run plans as the defaults (docs/simulate.md keeps the earlier findings in words).

Writes benchmarks/results/forecast_why.json.

`--second` (results: forecast_why_second.json): the two cells where `auto` was still worse than
the defaults after the out-of-sample test (ServeGen's 1-minute rows, second half; its 10-minute
rows with `warm_pool: {size: auto}`, second half), each whole trace replayed as forecast_auto.py
--replay / --warm replay it and scored on the second half, with `auto` as it was before a long
period needed `occurrences` full cycles before its held-out stretch (period_skill.
trains_full_profile patched to pass every period) but m-large's refits in [180 h, 187 h) planning
with no period: the only refits of those second halves that kept a period over four hours (4.6 to
5 h, 3.9 cycles before the held-out quarter; igniter forecast's replay lists them). `auto` before
d3900e6 unchanged is forecast_auto.json at b549c42 and forecast_auto_warm.json at 0677621.

    python benchmarks/forecast_why.py --second   # about 4 minutes CPU
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from typing import Any

from _results import Results
from _targets import cases, half, score

import autoscaler.core.capacity.periods as periods
import autoscaler.loop.tick.tuning as tuning
from autoscaler.core.capacity.periods import Fit
from autoscaler.sim import traces
from autoscaler.sim.engine import simulate

HALF_H = 168.0
RUNS: dict[str, dict[str, Any]] = {
    "auto": {},
    "hourly refits": {"cfg": {"refit_min_s": 3600.0}},
    "no fits 44-70 h": {"drop": (44.0, 70.0)},
    "min_strength 0.1": {"cfg": {"min_strength": 0.1}},
}


def patched(
    cfg: dict[str, float], drop: tuple[float, float] | None, t0: float, seen: list[str], only: str | None = None
) -> Callable[[], None]:
    """Set the controller's period config and refits as a run says (each refit with a period noted
    as a table row in `seen`; `drop`: the refits in that window, of workload `only` if named, plan
    with no period); returns the undo."""
    plain_cfg, plain_refits = tuning.period_config, tuning.refits

    def refits(store: Any, now: float, due: Any, held: Any, policy: Any, c: Any) -> dict[str, Any]:
        out = plain_refits(store, now, due, held, policy, c)
        h = (now - t0) / 3600.0
        if drop is not None and drop[0] <= h < drop[1]:
            out = {
                w: dataclasses.replace(v, fit=Fit(now, c.step_s, ())) if only in (None, w) else v
                for w, v in out.items()
            }
        for w, v in out.items():
            for p in v.fit.periods:
                seen.append(f"| {h:.2f} | {w} | {p.period_s / 60:.0f} | {p.strength:.3f} |")
        return out

    tuning.period_config = lambda p: dataclasses.replace(plain_cfg(p), **cfg)
    tuning.refits = refits

    def undo() -> None:
        tuning.period_config, tuning.refits = plain_cfg, plain_refits

    return undo


SECOND = {  # forecast_auto.py's case index and warm pool, per cell
    "ServeGen, 1-minute rows": (1, False),
    "ServeGen, 10-minute rows, warm pool": (0, True),
}


def second() -> None:
    """The second halves' cells (see the module doc): `auto` before d3900e6 without m-large's
    refits at 180-187 h (`auto` before d3900e6 itself: forecast_auto.json at b549c42 and
    forecast_auto_warm.json at 0677621, in git's history)."""
    res = Results("forecast_why_second", "python benchmarks/forecast_why.py --second")
    res.line("runs", "| cell | run | short rows | cost |")
    res.line("runs", "| --- | --- | --- | --- |")
    plain = periods.trains_full_profile
    periods.trains_full_profile = lambda *a: True  # the rule before d3900e6
    try:
        for cell, (index, warm) in SECOND.items():
            case = cases()[index]
            sc = case.policy.scaling.model_copy(update={"forecast": "auto"})
            if warm:
                sc = sc.model_copy(update={"warm_pool": sc.warm_pool.model_copy(update={"size": "auto"})})
            undo = patched({}, (180.0, 187.0), float(case.trace.times[0]), [], "m-large")
            try:
                r = simulate(case.policy.model_copy(update={"scaling": sc}), case.trace)
            finally:
                undo()
            s = score(r, half(case.trace), len(case.trace.times), sc.boot_s)
            key = "_".join("".join(c if c.isalnum() else " " for c in cell.lower()).split())
            res.figure(f"{key}/short", s.short)
            res.figure(f"{key}/cost", s.cost)
            res.line(
                "runs", f"| {cell} | auto before d3900e6, m-large 180-187 h dropped | {s.short} | ${s.cost:,.2f} |"
            )
    finally:
        periods.trains_full_profile = plain
    res.write()


def main() -> None:
    if "--second" in sys.argv[1:]:
        second()
        return
    res = Results("forecast_why", "python benchmarks/forecast_why.py")
    case = cases()[0]
    trace = traces.window(case.trace, 0, HALF_H * 3600.0)
    sc = case.policy.scaling
    auto = case.policy.model_copy(update={"scaling": sc.model_copy(update={"forecast": "auto"})})
    t0 = float(trace.times[0])
    res.line("runs", "| run | short rows | cost |")
    res.line("runs", "| --- | --- | --- |")
    r = simulate(case.policy, trace)
    s = score(r, 0, len(trace.times), sc.boot_s)
    res.figure("defaults/short", s.short)
    res.figure("defaults/cost", s.cost)
    res.line("runs", f"| defaults | {s.short} | ${s.cost:,.2f} |")
    for name, run in RUNS.items():
        seen: list[str] = []
        undo = patched(run.get("cfg", {}), run.get("drop"), t0, seen)
        try:
            r = simulate(auto, trace)
        finally:
            undo()
        s = score(r, 0, len(trace.times), sc.boot_s)
        key = "_".join("".join(c if c.isalnum() else " " for c in name.lower()).split())
        res.figure(f"{key}/short", s.short)
        res.figure(f"{key}/cost", s.cost)
        res.figure(f"{key}/periods_found", len(seen))
        res.line("runs", f"| {name} | {s.short} | ${s.cost:,.2f} |")
        res.line(f"refits_{key}", "| hour | workload | period (min) | strength |")
        res.line(f"refits_{key}", "| --- | --- | --- | --- |")
        for line in seen:
            res.line(f"refits_{key}", line)
    res.write()


if __name__ == "__main__":
    main()
