"""Issue 35's warm pool (`simulate_quality.py --only warm_pool`): on every trace in traces/
(benchmarks/_targets.py's cases: each example policy's workloads and instance types, every other
setting its default), the defaults with `scaling.warm_pool: {size: auto}` against the defaults
alone, side by side in one run, scored on each half of the trace as in _targets.py. Nothing was
tuned for the pool: `auto`'s rule and warm_boot_s (45 s) are the documented defaults. On the
10-minute rows both runs are replayed again with headroom auto's feedback off
(`headroom_feedback_s: 0`): what the pool does there without the feedback spending its gain
(docs/simulate.md, "The warm pool").

Writes benchmarks/results/warm_pool.json after each trace (a run stopped early keeps the traces
it finished; a run of one trace, `--case`, writes nothing): the table docs/simulate.md embeds
(`tables.warm_pool`), its figures one by one (`figures.<trace>_<run>_<part>_short`, `_cost_usd`,
`_attainment`; `<trace>_<run>_time_attainment`, `_warm_starts`, `_returns`, `_pool_cost_usd`,
`_launches`) and the same per trace under `traces`, with the machine and the commit. Takes about
as long as two `--only attainment` replays of each trace, four of the 10-minute rows.
"""

from __future__ import annotations

import time
from typing import Any

from _results import Results
from _targets import Case, cases, half, score, slug

from autoscaler.config.policy import Policy
from autoscaler.config.scaling import WarmPoolConfig
from autoscaler.sim.engine import SimResult, simulate

PARTS = ("first_half", "second_half", "whole")
# Rows coarser than a boot: the pool's run is also replayed with headroom auto's feedback off
# (headroom_feedback_s 0), the plain one too, to show what the feedback does with the pool's gain.
COARSE = "10-minute"


def with_pool(policy: Policy) -> Policy:
    sc = policy.scaling.model_copy(update={"warm_pool": WarmPoolConfig(size="auto")})
    return policy.model_copy(update={"scaling": sc})


def no_feedback(policy: Policy) -> Policy:
    return policy.model_copy(update={"scaling": policy.scaling.model_copy(update={"headroom_feedback_s": 0.0})})


def runs_of(case: Case) -> list[tuple[str, str, Policy]]:
    """(label, figure key, policy) of each replay of `case`."""
    out = [("warm_pool auto", "pool", with_pool(case.policy)), ("defaults", "defaults", case.policy)]
    if COARSE in case.name:
        out += [
            ("warm_pool auto, feedback off", "pool_no_feedback", no_feedback(with_pool(case.policy))),
            ("defaults, feedback off", "defaults_no_feedback", no_feedback(case.policy)),
        ]
    return out


def parts(r: SimResult, case: Case) -> dict[str, Any]:
    n, mid, boot = len(case.trace.times), half(case.trace), case.policy.scaling.boot_s
    out: dict[str, Any] = {}
    for part, lo, hi in zip(PARTS, (0, mid, 0), (mid, n, n), strict=True):
        s = score(r, lo, hi, boot)
        out[part] = {"attainment": round(s.attainment, 6), "short_rows": s.short, "cost_usd": round(s.cost, 2)}
    out["time_attainment"] = round(r.attainment_time(), 6)  # of the time, the fleet sampled after each tick
    out["warm_starts"] = r.warm_starts
    out["warm_pool_cost_usd"] = round(r.warm_pool_cost_usd, 2)
    out["warm_pool_returns"] = r.warm_pool_returns
    out["launches"] = r.launches
    return out


def report_case(case: Case, results: Results) -> dict[str, Any]:
    t0 = time.process_time()
    runs = runs_of(case)
    out: dict[str, Any] = {label: parts(simulate(policy, case.trace), case) for label, _, policy in runs}
    out["rows"] = len(case.trace.times)
    out["cpu_s"] = round(time.process_time() - t0, 1)
    print(f"\n== {case.name}: {out['rows']} rows ({out['cpu_s']:.0f} s CPU)")
    for label, key, _ in runs:
        o = out[label]
        for part in PARTS:
            p = o[part]
            print(
                f"    {part:<12} {label:<15} attain {p['attainment']:.5f}  {p['short_rows']:>4} short  "
                f"cost ${p['cost_usd']:,.2f}"
            )
        print(
            f"    {label}: of the time {o['time_attainment']:.5f}, warm starts {o['warm_starts']}, "
            f"returns {o['warm_pool_returns']}, pool cost ${o['warm_pool_cost_usd']:,.2f}"
        )
        keep(results, f"{slug(case.name)}_{key}", o)
        results.line("warm_pool", row(case.name, label, o))
    return out


def keep(results: Results, prefix: str, o: dict[str, Any]) -> None:
    """One run's figures, each under its own key (the docs mark them one by one)."""
    for part in PARTS:
        results.figure(f"{prefix}_{part}_short", o[part]["short_rows"])
        results.figure(f"{prefix}_{part}_cost_usd", o[part]["cost_usd"])
        results.figure(f"{prefix}_{part}_attainment", o[part]["attainment"])
    results.figure(f"{prefix}_time_attainment", o["time_attainment"])
    results.figure(f"{prefix}_warm_starts", o["warm_starts"])
    results.figure(f"{prefix}_returns", o["warm_pool_returns"])
    results.figure(f"{prefix}_pool_cost_usd", o["warm_pool_cost_usd"])
    results.figure(f"{prefix}_launches", o["launches"])


def row(trace: str, label: str, o: dict[str, Any]) -> str:
    first, second, whole = (o[p] for p in PARTS)
    return (
        f"| {trace} | {label} | {first['short_rows']}, ${first['cost_usd']:,.2f} "
        f"| {second['short_rows']}, ${second['cost_usd']:,.2f} "
        f"| {whole['short_rows']}, {whole['attainment']:.6f}, ${whole['cost_usd']:,.2f} "
        f"| {o['warm_starts']}, {o['warm_pool_returns']}, ${o['warm_pool_cost_usd']:,.2f} |"
    )


def ticks(case: Case) -> float:
    """About how many ticks a replay runs (what its time goes on)."""
    return case.trace.duration_s / case.policy.scaling.interval_s


def main(only: str | None = None) -> None:
    """Every trace (`only`: those whose name contains it, printed, not written)."""
    print("\n== issue 35: the defaults with warm_pool {size: auto} vs the defaults alone")
    results = Results("warm_pool", "python benchmarks/simulate_quality.py --only warm_pool")
    results.doc["traces"] = {}
    results.line(
        "warm_pool",
        "| trace | run | first half: short, cost | second half: short, cost "
        "| whole: short, attainment, cost | warm starts, returns, pool $ |",
    )
    results.line("warm_pool", "| --- | --- | --- | --- | --- | --- |")
    for case in sorted(cases(), key=ticks):  # the cheap replays first
        if only is None or only in case.name:
            results.doc["traces"][case.name] = report_case(case, results)
            if only is None:
                results.write()
