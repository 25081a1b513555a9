"""Issue 35's targets (`simulate_quality.py --only bursts`): the defaults before and after the fast
path and bursting into free share, side by side in one run, on every trace in traces/ at 1-minute
rows (benchmarks/_targets.py's cases: each example policy's workloads and instance types, every
other setting its default, 60 s ticks).

"before" is the same code with `scaling.burst: false` and `scaling.fast_path.enabled: false`: what
main did before issue 35 (checked against main at 9575bc5, whose run gave the same short rows and
cost to the cent: /work/reports/w35-baseline-main-9575bc5.txt). The target: with the defaults, at
most half of before's short rows on every trace, at no more than before's cost. Each trace is
scored on its two halves as in _targets.py; the bursting rules were adjusted looking at
ServeGen's first half only (see docs/simulate.md), so its second half and Azure are reported.
The oracle (a perfect forecast of interval + boot) is the floor for comparison.
"""

from __future__ import annotations

import time

from _targets import Case, cases, half, score

from autoscaler.config.policy import Policy
from autoscaler.sim.engine import SimOptions, SimResult, simulate


def before(policy: Policy) -> Policy:
    """The policy with issue 35's fast paths switched off."""
    sc = policy.scaling
    fast = sc.fast_path.model_copy(update={"enabled": False})
    return policy.model_copy(update={"scaling": sc.model_copy(update={"burst": False, "fast_path": fast})})


def report_case(case: Case) -> bool:
    t0 = time.process_time()
    runs: dict[str, SimResult] = {
        "before": simulate(before(case.policy), case.trace),
        "after (defaults)": simulate(case.policy, case.trace),
        "oracle": simulate(case.policy, case.trace, SimOptions(strategy="oracle")),
    }
    n, mid, boot = len(case.trace.times), half(case.trace), case.policy.scaling.boot_s
    print(f"\n== {case.name}: {n} rows ({time.process_time() - t0:.0f} s CPU)")
    met = True
    for part, lo, hi in (("first half", 0, mid), ("second half", mid, n), ("whole trace", 0, n)):
        ref = score(runs["before"], lo, hi, boot)
        for label, r in runs.items():
            s = score(r, lo, hi, boot)
            print(
                f"    {part:<12} {label:<17} attain {s.attainment:.5f}  {s.short:>3} short "
                f"({s.moved} moved)  cost ${s.cost:,.2f} ({s.cost / ref.cost:.4f} x before)"
            )
        after = score(runs["after (defaults)"], lo, hi, boot)
        ok = after.short <= ref.short / 2 and after.cost <= ref.cost + 1e-9
        met = met and (ok or part == "first half")
        print(
            f"    {part:<12} target (<= {ref.short / 2:g} short at <= ${ref.cost:,.2f}): {'MET' if ok else 'NOT MET'}"
        )
    a = runs["after (defaults)"]
    print(
        f"    fast ticks {a.fast_ticks}, burst servers {a.burst_servers}, out of reach (ticks) {a.out_of_reach_ticks}"
    )
    return met


def main(only: str | None = None) -> None:
    print("\n== issue 35: before (burst and fast path off) vs after (the defaults), 1-minute rows")
    for case in cases():
        if "1-minute" in case.name and (only is None or only in case.name):
            report_case(case)
