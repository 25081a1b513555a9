"""What the planner's idle-share step buys: igniter with and without it, on the ServeGen example.

Algorithm 2 leaves each GPU at the least shares that meet every budget; the default planner then
hands half of what no placement needed to the GPU's new placements (docs/planner.md, step 6). It
never changes cost, so the question is what it changes in a replay: short rows (capacity below
the rate) and server restarts (`reconfigurations`: servers started or resized in place). Each
run replays policies/servegen-sim.yaml's 14 days with the igniter planner, at each trace size
(rates x factor, so every plan rounds differently) and headroom, once with the step and once
without (planner `igniter-lean`: `Config(spend_idle=False)`, otherwise the same planner). Then the same 120 plans as
simulate_quality.py's plan-by-plan table (rates x 1 + headroom), re-predicted as co-located:
in-budget capacity per planned req/s.

Run: .venv/bin/python benchmarks/idle_share.py [--scales 0.7,1] [--headrooms 0.2,0.4]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from _results import Results  # noqa: E402

from autoscaler.config.policy import Policy, load_policy  # noqa: E402
from autoscaler.loop.service.wiring import default_planner  # noqa: E402
from autoscaler.planner.types import Plan  # noqa: E402
from autoscaler.sim import traces  # noqa: E402
from autoscaler.sim.engine import SimOptions, default_plan_fn, simulate  # noqa: E402
from autoscaler.sim.result import feasible_capacity  # noqa: E402
from autoscaler.sim.strategies import plan_gpus  # noqa: E402

PLAN_SAMPLES = 120


def lean_planner(
    policy: Policy,
    rates: Mapping[str, float],
    corrections: Mapping[str, float],
    caps: Mapping[str, int],
    current: Plan | None,
) -> Plan:
    """wiring.default_planner with `igniter-lean`: the same planner without the idle-share step."""
    scaling = policy.scaling.model_copy(update={"planner": "igniter-lean"})
    return default_planner(policy.model_copy(update={"scaling": scaling}), rates, corrections, caps, current)


def replays(res: Results, policy: Policy, trace: traces.Trace, scales: list[float], headrooms: list[float]) -> None:
    """One replay per (size, headroom, with/without); a line each and the totals."""
    totals = {"without": np.zeros(3), "with": np.zeros(3)}
    better = worse = 0
    print(f"{'size':>5} {'headroom':>8}  {'cost $ without / with':>22}  {'short rows':>10}  {'restarts':>11}")
    for f in scales:
        tr = traces.scale(trace, f)
        for h in headrooms:
            opts = SimOptions(planner="igniter", headroom=h)
            got = {}
            for name, fn in (("without", lean_planner), ("with", default_plan_fn(policy))):
                s = simulate(policy, tr, opts, fn).summary()
                got[name] = np.array([s["cost_total_usd"], s["shortfall_steps"], s["reconfigurations"]])
                totals[name] += got[name]
            a, b = got["without"], got["with"]
            better, worse = better + int(b[1] < a[1]), worse + int(b[1] > a[1])
            print(
                f"{f:>5g} {h:>8g}  {a[0]:>10,.2f} / {b[0]:>9,.2f}  {a[1]:>4.0f} / {b[1]:<4.0f}  {a[2]:>5.0f} / {b[2]:<5.0f}"
            )
    a, b = totals["without"], totals["with"]
    res.figure("replays", len(scales) * len(headrooms))
    res.figure("cost_change_pct", (b[0] / a[0] - 1) * 100)
    res.figure("short_rows_without", int(a[1]))
    res.figure("short_rows_with", int(b[1]))
    res.figure("runs_fewer_short", better)
    res.figure("runs_more_short", worse)
    res.figure("restarts_without", int(a[2]))
    res.figure("restarts_with", int(b[2]))
    res.figure("restarts_fewer_pct", (1 - b[2] / a[2]) * 100)
    print(
        f"total: cost {a[0]:,.2f} -> {b[0]:,.2f} ({b[0] / a[0] - 1:+.3%}); short rows {a[1]:.0f} -> {b[1]:.0f} "
        f"(fewer in {better} runs, more in {worse}); restarts {a[2]:.0f} -> {b[2]:.0f} ({b[2] / a[2] - 1:+.1%})"
    )


def plans(res: Results, policy: Policy, trace: traces.Trace) -> None:
    """Capacity per planned req/s of the same plans with and without the step (cost identical)."""
    h = policy.scaling.headroom
    rows = sorted(set(np.linspace(0, len(trace.times) - 1, PLAN_SAMPLES).round().astype(int).tolist()))
    out = {}
    for name, fn in (("without", lean_planner), ("with", default_plan_fn(policy))):
        cost = cap = rate = 0.0
        for k in rows:
            rates = {w: float(trace.rates[w][k]) * (1 + h) for w in trace.names}
            plan = fn(policy, rates, {}, {}, None)
            got, _ = feasible_capacity(policy, plan_gpus(plan))
            cost += plan.cost_per_hour
            cap += sum(got.get(w, 0.0) for w in rates)
            rate += sum(rates.values())
        out[name] = (cost, cap / rate)
    res.figure("plan_rows", len(rows))
    res.figure("plan_rate_factor", 1 + h)
    res.figure("capacity_per_rps_without", out["without"][1])
    res.figure("capacity_per_rps_with", out["with"][1])
    res.figure("capacity_gain_pct", (out["with"][1] / out["without"][1] - 1) * 100)
    print(
        f"plans for {len(rows)} trace rows (rate x {1 + h:g}): $/h summed {out['without'][0]:,.2f} -> "
        f"{out['with'][0]:,.2f}; in-budget capacity per planned req/s {out['without'][1]:.3f} -> {out['with'][1]:.3f}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scales", default="0.7,0.85,1,1.15,1.3")
    ap.add_argument("--headrooms", default="0.2,0.3,0.4")
    args = ap.parse_args()
    res = Results("idle_share", f"python benchmarks/idle_share.py --scales {args.scales} --headrooms {args.headrooms}")
    print(res.doc["machine"])
    policy = load_policy(ROOT / "policies" / "servegen-sim.yaml")
    trace = traces.read_wide(ROOT / "traces" / "servegen-3models-wide.csv")
    t0 = time.process_time()
    plans(res, policy, trace)
    replays(
        res, policy, trace, [float(x) for x in args.scales.split(",")], [float(x) for x in args.headrooms.split(",")]
    )
    print(f"CPU time: {time.process_time() - t0:.0f} s")
    res.write()


if __name__ == "__main__":
    main()
