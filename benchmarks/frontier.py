"""`igniter simulate --frontier` on the benchmark traces (issue 35: "the frontier for each trace"):
cost against attainment at each FRONTIER_TARGETS target with headroom auto, with the warm pool off
and on (`{size: auto}`), and the oracle, through the same function the CLI runs
(autoscaler/sim/frontier.py). Cases are benchmarks/_targets.py's (each example policy's workloads,
every other setting its default). `--half second` replays only the second half of each trace (the
part never tuned on: traces.window), where the whole trace does not fit the machine's time.

Writes benchmarks/results/OUT.json (`--out`, default frontier; figures `<case>_<run>_{attainment_pct,short,cost_usd,
warm_starts,pool_usd,returns}` and one markdown table per case). Nine replays per case: seconds
for Azure, about 9 x 3 CPU-minutes for ServeGen's 10-minute rows (x 0.5 for one half).

Run: nice -n 10 .venv/bin/python benchmarks/frontier.py --case Azure --out frontier_azure
     nice -n 10 .venv/bin/python benchmarks/frontier.py --case "ServeGen, 10" --half second --out frontier_servegen
"""

from __future__ import annotations

import argparse
import time

from _results import Results
from _targets import cases, slug

from autoscaler.sim import traces
from autoscaler.sim.frontier import frontier
from autoscaler.sim.result import SimResult


def run_slug(label: str) -> str:
    """`target 0.999 + warm pool` -> `0_999_pool`; `oracle` -> `oracle`."""
    return label.replace("target ", "").replace(" + warm pool", "_pool").replace(".", "_")


def report(name: str, results: list[SimResult], out: Results) -> None:
    key = slug(name)
    oracle = results[-1].cost_total_usd
    out.line(key, f"\n== {name}")
    out.line(
        key, "| run | attainment | short rows | cost $ | x oracle | warm starts | returns | pool $ | out of reach |"
    )
    out.line(key, "| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        s, run = r.summary(), f"{key}_{run_slug(r.label)}"
        out.figure(f"{run}_attainment_pct", s["slo_attainment"] * 100)
        out.figure(f"{run}_short", s["shortfall_steps"])
        out.figure(f"{run}_cost_usd", r.cost_total_usd)
        out.figure(f"{run}_warm_starts", r.warm_starts)
        out.figure(f"{run}_returns", r.warm_pool_returns)
        out.figure(f"{run}_pool_usd", r.warm_pool_cost_usd)
        reach = ", ".join(f"{k} {v}" for k, v in sorted(r.out_of_reach_ticks.items())) or "-"
        out.line(
            key,
            f"| {r.label} | {s['slo_attainment'] * 100:.3f} % | {s['shortfall_steps']} | {r.cost_total_usd:,.2f} | "
            f"{r.cost_total_usd / oracle:.3f} | {r.warm_starts} | {r.warm_pool_returns} | "
            f"{r.warm_pool_cost_usd:,.2f} | {reach} |",
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", action="append", default=[], help="cases whose name contains this (repeatable)")
    ap.add_argument("--half", choices=["whole", "second"], default="whole")
    ap.add_argument("--out", default="frontier", help="results/OUT.json")
    args = ap.parse_args()
    cmd = "nice -n 10 .venv/bin/python benchmarks/frontier.py " + " ".join(
        [f"--case '{c}'" for c in args.case] + [f"--half {args.half}", f"--out {args.out}"]
    )
    out = Results(args.out, cmd)
    for case in cases():
        if args.case and not any(c in case.name for c in args.case):
            continue
        trace = case.trace
        if args.half == "second":
            trace = traces.window(trace, trace.duration_s / 2, trace.duration_s)
        t0 = time.process_time()
        name = case.name + (", second half" if args.half == "second" else "")
        report(name, frontier(case.policy, trace), out)
        print(f"    ({time.process_time() - t0:.0f} s CPU)")
        out.write()  # after each case: a run stopped early keeps what it finished


if __name__ == "__main__":
    main()
