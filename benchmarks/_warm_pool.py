"""Issue 35's warm pool (`simulate_quality.py --only warm_pool`): on every trace in traces/
(benchmarks/_targets.py's cases: each example policy's workloads and instance types, every other
setting its default), the defaults with `scaling.warm_pool: {size: auto}` against the defaults
alone, side by side in one run, scored on each half of the trace as in _targets.py. Nothing was
tuned for the pool: `auto`'s rule and warm_boot_s (45 s) are the documented defaults.

Writes benchmarks/results/warm_pool.json after each trace (a run stopped early keeps the traces
it finished): per trace and run, attainment, short rows and cost per half and over the whole
trace, with warm_starts, warm_pool_returns (reuse on scale-in) and warm_pool_cost_usd, and the
machine. Takes about as long as two
`--only attainment` replays of each trace (ServeGen's 1-minute rows dominate).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from _machine import describe
from _targets import Case, cases, half, score

from autoscaler.config.policy import Policy
from autoscaler.config.scaling import WarmPoolConfig
from autoscaler.sim.engine import SimResult, simulate

OUT = Path(__file__).resolve().parent / "results" / "warm_pool.json"


def with_pool(policy: Policy) -> Policy:
    sc = policy.scaling.model_copy(update={"warm_pool": WarmPoolConfig(size="auto")})
    return policy.model_copy(update={"scaling": sc})


def parts(r: SimResult, case: Case) -> dict[str, Any]:
    n, mid, boot = len(case.trace.times), half(case.trace), case.policy.scaling.boot_s
    out: dict[str, Any] = {}
    for part, lo, hi in (("first_half", 0, mid), ("second_half", mid, n), ("whole", 0, n)):
        s = score(r, lo, hi, boot)
        out[part] = {"attainment": round(s.attainment, 6), "short_rows": s.short, "cost_usd": round(s.cost, 2)}
    out["warm_starts"] = r.warm_starts
    out["warm_pool_cost_usd"] = round(r.warm_pool_cost_usd, 2)
    out["warm_pool_returns"] = r.warm_pool_returns
    out["launches"] = r.launches
    return out


def report_case(case: Case) -> dict[str, Any]:
    t0 = time.process_time()
    runs = {
        "warm_pool auto": simulate(with_pool(case.policy), case.trace),
        "defaults": simulate(case.policy, case.trace),
    }
    out = {label: parts(r, case) for label, r in runs.items()}
    out["rows"] = len(case.trace.times)
    out["cpu_s"] = round(time.process_time() - t0, 1)
    print(f"\n== {case.name}: {out['rows']} rows ({out['cpu_s']:.0f} s CPU)")
    for label in runs:
        o = out[label]
        for part in ("first_half", "second_half", "whole"):
            p = o[part]
            print(
                f"    {part:<12} {label:<15} attain {p['attainment']:.5f}  {p['short_rows']:>4} short  "
                f"cost ${p['cost_usd']:,.2f}"
            )
        print(
            f"    {label}: warm starts {o['warm_starts']}, returns {o['warm_pool_returns']}, "
            f"pool cost ${o['warm_pool_cost_usd']:,.2f}"
        )
    return out


def ticks(case: Case) -> float:
    """About how many ticks a replay runs (what its time goes on)."""
    return case.trace.duration_s / case.policy.scaling.interval_s


def main(only: str | None = None) -> None:
    print("\n== issue 35: the defaults with warm_pool {size: auto} vs the defaults alone")
    result: dict[str, Any] = {"machine": describe(), "traces": {}}
    for case in sorted(cases(), key=ticks):  # the cheap replays first
        if only is None or only in case.name:
            result["traces"][case.name] = report_case(case)
            OUT.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n", encoding="utf-8")
