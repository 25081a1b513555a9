"""Where issue 35's short rows come from: each run of short rows of one workload (an *episode*)
split into its first row and the rows after it.

An episode's first row is a row whose rate the fleet at its start did not carry while the row
before was carried: only capacity planned before the rise (headroom) can cover it. The rows after
it are the reaction: the capacity a tick asked for is still booting, and only stand-ins in free
share (`scaling.burst`) or a shorter boot can cover them. The bursts target is at most half of
before's short rows at no more cost (benchmarks/_bursts.py), so the split says which lever could
reach it.

Episodes are split by rise too. A *burst* episode's first row carries more than BURST_RISE times
the rate of RISE_ROWS rows (ten minutes) before it: the issue's bursts (3 to 5 x within a minute or
two), here a ServeGen 10-minute step that the 1-minute trace spreads over ten rows; every other
episode is a *ramp*. The factor is the issue's, not fitted to the trace.

ServeGen's 1-minute rows (the case of `simulate_quality.py --only bursts` that misses), in the
default row view, replayed as:
- `before` and `defaults`: the before and after of the bursts table (the policy defaults);
- `before, feedback off` and `defaults, feedback off`: both with `headroom: auto`'s feedback off
  (`headroom_feedback_s: 0`), which otherwise lowers the headroom while the measured coverage is
  above `target_attainment`;
- `defaults, forecast holt`: Holt's linear trend instead of `seasonal`, which extrapolates a ramp.

Nothing is tuned here. Writes benchmarks/results/burst_episodes.json. About 25 minutes of CPU.

    python benchmarks/burst_episodes.py
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from _bursts import as_before
from _results import Results
from _targets import Case, cases, half, score
from _warm_pool import no_feedback

from autoscaler.sim.engine import SimOptions, SimResult, simulate

CASE = "ServeGen, 1-minute rows"
TABLE = "servegen_1_minute_rows"
BURST_RISE = 3.0  # a burst: more than 3 x the rate of RISE_ROWS rows earlier (the 3 to 5 x)
RISE_ROWS = 10  # ten 1-minute rows: one row of the 10-minute trace the 1-minute rows interpolate


@dataclass(frozen=True)
class Episodes:
    firsts: tuple[int, int]  # episodes that begin in the first half, in the second
    later_rows: int  # short rows after an episode's first
    median_gap_pct: float  # how far the rate is above capacity at an episode's first row
    bursts: int  # episodes whose first row rose more than BURST_RISE x within RISE_ROWS rows
    burst_rows: int  # their short rows, first rows included


def episodes(r: SimResult, mid: int) -> Episodes:
    """Every workload's runs of short rows: their first rows (by half), the rows after them, and
    the bursts among them."""
    tr = r.trace
    firsts, later, gaps, bursts, burst_rows = [0, 0], 0, [], 0, 0
    for w in tr.names:
        rate = tr.rates[w]
        short = r.capacity[w] < rate - 1e-9
        burst = False
        for k in np.flatnonzero(short):
            if k and short[k - 1]:
                later += 1
                burst_rows += burst
                continue
            firsts[int(k >= mid)] += 1
            gaps.append(100.0 * (rate[k] / max(r.capacity[w][k], 1e-9) - 1.0))
            burst = bool(rate[k] > BURST_RISE * rate[max(k - RISE_ROWS, 0)])
            bursts += burst
            burst_rows += burst
    return Episodes((firsts[0], firsts[1]), later, statistics.median(gaps) if gaps else 0.0, bursts, burst_rows)


def runs(case: Case) -> dict[str, tuple[str, Callable[[], SimResult]]]:
    p, tr = case.policy, case.trace
    return {
        "before": ("before", lambda: as_before(p, tr)),
        "defaults": ("defaults", lambda: simulate(p, tr)),
        "before_no_feedback": ("before, feedback off", lambda: as_before(no_feedback(p), tr)),
        "defaults_no_feedback": ("defaults, feedback off", lambda: simulate(no_feedback(p), tr)),
        "holt": ("defaults, forecast holt", lambda: simulate(p, tr, SimOptions(forecast="holt"))),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", choices=["before", "defaults", "before_no_feedback", "defaults_no_feedback", "holt"])
    args = ap.parse_args()
    out = Results(
        "burst_episodes", "python benchmarks/burst_episodes.py" + (f" --only {args.only}" if args.only else "")
    )
    case = next(c for c in cases() if c.name == CASE)
    n, mid, boot = len(case.trace.times), half(case.trace), case.policy.scaling.boot_s
    print(f"{CASE}: {n} rows, 60 s ticks, boot {boot:g} s; the default row view")
    out.line(
        TABLE,
        "| run | short rows: first half, second, whole | episodes: first half, second | rows after an episode's first | median rise above capacity at a first row | bursts: episodes, short rows | cost |",
    )
    out.line(TABLE, "| --- | --- | --- | --- | --- | --- | --- |")
    for key, (label, run) in runs(case).items():
        if args.only and key != args.only:
            continue
        t0 = time.process_time()
        r = run()
        parts = [score(r, lo, hi, boot) for lo, hi in ((0, mid), (mid, n), (0, n))]
        ep = episodes(r, mid)
        for part, s in zip(("first_half", "second_half", "whole"), parts, strict=True):
            out.figure(f"{key}_{part}_short", s.short)
        out.figure(f"{key}_cost_usd", parts[2].cost)
        out.figure(f"{key}_episodes", sum(ep.firsts))
        out.figure(f"{key}_later_rows", ep.later_rows)
        out.figure(f"{key}_median_gap_pct", ep.median_gap_pct)
        out.figure(f"{key}_burst_episodes", ep.bursts)
        out.figure(f"{key}_burst_rows", ep.burst_rows)
        out.line(
            TABLE,
            f"| {label} | {parts[0].short}, {parts[1].short}, {parts[2].short} | {ep.firsts[0]}, {ep.firsts[1]} | "
            f"{ep.later_rows} | {ep.median_gap_pct:.1f} % | {ep.bursts}, {ep.burst_rows} | ${parts[2].cost:,.2f} |",
        )
        print(f"    ({time.process_time() - t0:.0f} s CPU)", flush=True)
    out.write()


if __name__ == "__main__":
    main()
