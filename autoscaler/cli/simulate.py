"""`igniter simulate POLICY --trace CSV`: what the policy would cost on a real trace, and how often
capacity would fall short, by replaying the trace through the real controller on a simulated clock.

Exit codes: 0 ok; 1 internal error, or a simulated tick failed (the numbers would not be trustworthy);
2 bad input (`FILE: field: message`, no traceback).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

from autoscaler.cli import extras
from autoscaler.config.errors import InputError
from autoscaler.config.limits import MAX_INTERVAL_S

DESCRIPTION = """Replay a wide trace (a time_s column and one req/s column per workload) through the
autoscaler's real controller (forecast, planner, hold/scale-down, reconcile) with a simulated clock and
simulated instances that are ready scaling.boot_s after launch. Prints cost, the cost of static peak
provisioning, SLO attainment (fraction of trace rows x workloads whose capacity covers the rate),
the worst shortfall and the scaling actions."""


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the `simulate` subcommand to the igniter CLI."""
    p = subparsers.add_parser(
        "simulate", help="replay a request-rate trace through the autoscaler", description=DESCRIPTION
    )
    p.add_argument("policy", type=Path, help="policy YAML")
    p.add_argument("--trace", type=Path, required=True, help="wide trace CSV: time_s, then one column per workload")
    p.add_argument("--json", action="store_true", help="print the summary as JSON (with --compare: a list)")
    p.add_argument(
        "--timeline", type=Path, metavar="OUT.csv", help="write time_s,workload,rate_rps,capacity_rps,cost_per_hour"
    )
    p.add_argument("--plot", type=Path, metavar="OUT.png", help="draw rate against capacity per workload, and cost")
    p.add_argument("--planner", help="planner to use instead of the policy's (igniter, ffd, gslice, gpulets, exact)")
    p.add_argument(
        "--forecast", choices=["last", "ewma", "holt", "seasonal", "auto"], help="forecast instead of the policy's"
    )
    p.add_argument(
        "--headroom",
        help="headroom instead of the policy's: auto (sized from each workload's forecast errors for "
        "scaling.target_attainment) or a number (0.2 = plan for 120 %%)",
    )
    p.add_argument("--interval-s", type=float, help="tick interval instead of the policy's scaling.interval_s")
    p.add_argument(
        "--plan-on",
        choices=["tick", "interval"],
        help="scaling.plan_on instead of the policy's: whether early ticks plan (tick) or keep the standing layout",
    )
    p.add_argument(
        "--strategy",
        choices=["autoscaler", "reactive", "static-peak", "oracle"],
        default="autoscaler",
        help="autoscaler (default), reactive target tracking (40-70 %% utilisation), static peak, "
        "oracle (a perfect forecast of the coming boot_s + interval_s: the floor for forecasting)",
    )
    p.add_argument(
        "--rate-stat",
        choices=["mean", "max"],
        default="mean",
        help="what the simulated rate source reports per interval: the mean rate (a request counter, "
        "default) or the busiest trace row (a Maximum statistic), for bursty per-second traces",
    )
    p.add_argument(
        "--tick-reads",
        choices=["row", "past"],
        default="row",
        help="what a tick reads of the trace: row (default) counts a row from its own time, so a tick "
        "on a row's boundary sees the coming row; past counts only what has happened, as a request "
        "counter does (what shows the fast path's worth on rows as long as the interval)",
    )
    p.add_argument(
        "--compare",
        action="store_true",
        help="run igniter under each forecast, ffd, gslice, gpulets, static peak, reactive and oracle side by side "
        "(on-demand only), plus a spot line when the policy buys spot",
    )
    p.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="--compare: replay in N processes (default one per CPU; 1: one after another in this process)",
    )
    p.add_argument(
        "--frontier",
        action="store_true",
        help="cost against attainment: headroom auto at a few target_attainment values, and the oracle "
        "(with --plot: the frontier as a chart)",
    )
    add_spot_args(p)
    add_trace_args(p)
    p.set_defaults(func=run)
    return p


def add_spot_args(p: argparse.ArgumentParser) -> None:
    """Spot what-ifs: interruptions of the simulated spot market, prices and the on-demand floor."""
    p.add_argument(
        "--spot-interruptions-per-hour",
        type=float,
        default=0.0,
        metavar="RATE",
        help="interruption warnings per spot instance-hour (Poisson, seeded by --seed; default 0)",
    )
    p.add_argument(
        "--interruption-warning-s",
        type=float,
        default=120.0,
        metavar="S",
        help="seconds from a warning until EC2 takes the instance (default 120, as EC2 gives)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the interruption draws (default 0)")
    p.add_argument(
        "--spot-price-ratio",
        type=float,
        metavar="R",
        help="give every type without one a spot price of R x its on-demand price (e.g. 0.35)",
    )
    p.add_argument(
        "--min-on-demand-fraction",
        type=float,
        metavar="F",
        help="on-demand floor for every workload instead of the policy's (0 .. 1)",
    )


def add_trace_args(p: argparse.ArgumentParser) -> None:
    """Options that reshape a trace before it is replayed (shared with `igniter trace`)."""
    p.add_argument("--time-col", default="time_s", help="name of the time column (default time_s)")
    p.add_argument(
        "--rename", action="append", default=[], metavar="OLD=NEW", help="rename a trace column (repeatable)"
    )
    p.add_argument(
        "--scale", type=float, default=1.0, help="multiply every rate (replay a trace's shape at another size)"
    )
    p.add_argument("--step-s", type=float, help="aggregate rows into windows of this many seconds first")
    p.add_argument(
        "--agg",
        choices=["mean", "max", "linear"],
        default="mean",
        help="how --step-s aggregates (default mean); linear interpolates onto a finer grid",
    )
    p.add_argument("--start-s", type=float, help="first second to replay (relative to the trace's start)")
    p.add_argument("--end-s", type=float, help="second to stop at (relative to the trace's start)")


def load_trace(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    """Read the wide trace at args.trace and reshape it (see `reshape`)."""
    from autoscaler.sim import traces

    return reshape(args, traces.read_wide(args.trace, args.time_col))


def reshape(args: argparse.Namespace, trace):  # type: ignore[no-untyped-def]
    """Apply --rename, --start-s/--end-s, --step-s/--agg and --scale, in that order."""
    from autoscaler.sim import traces

    if args.rename:
        trace = traces.rename(trace, _pairs(args.rename))
    if args.start_s is not None or args.end_s is not None:
        trace = traces.window(trace, args.start_s, args.end_s)
    if args.step_s is not None:
        trace = traces.resample(trace, args.step_s, args.agg)
    if args.scale != 1.0:
        if not args.scale > 0:
            raise InputError(trace.source, "--scale", "must be positive")
        trace = traces.scale(trace, args.scale)
    return trace


def _pairs(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        old, sep, new = item.partition("=")
        if not sep or not old or not new:
            raise InputError("--rename", item, "expected OLD=NEW")
        out[old] = new
    return out


def run(args: argparse.Namespace) -> int:
    """Load, replay (once or --compare), then print and write what was asked for."""
    from autoscaler.config.policy import load_policy
    from autoscaler.sim import engine as sim
    from autoscaler.sim.traces import check_workloads

    policy = load_policy(args.policy)
    _check_options(args, policy)
    trace = load_trace(args)
    check_workloads(trace, [w.name for w in policy.workloads], str(args.policy))
    _check_size(policy, trace)
    scaling = {
        k: v for k, v in (("interval_s", args.interval_s), ("plan_on", args.plan_on)) if v is not None
    }  # checked by argparse and _check_options
    if scaling:
        policy = policy.model_copy(update={"scaling": policy.scaling.model_copy(update=scaling)})
    if args.spot_price_ratio is not None or args.min_on_demand_fraction is not None:
        from autoscaler.sim.whatif import with_spot

        policy = with_spot(policy, args.spot_price_ratio, args.min_on_demand_fraction)
    started = time.perf_counter()
    opts = sim.SimOptions(
        args.planner,
        args.forecast,
        _headroom(args.headroom),
        args.strategy,
        rate_stat=args.rate_stat,
        tick_reads=args.tick_reads,
        spot_interruptions_per_hour=args.spot_interruptions_per_hour,
        interruption_warning_s=args.interruption_warning_s,
        seed=args.seed,
    )
    if args.frontier:
        from autoscaler.sim.frontier import frontier

        results = frontier(policy, trace, opts, progress=None if args.json else _say_running)
    elif args.compare:
        results = _compare(args, policy, trace, opts)
    else:
        results = [sim.simulate(policy, trace, opts)]
    wall = time.perf_counter() - started
    _output(args, results, wall)
    return _exit_code(results)


def _check_options(args: argparse.Namespace, policy: Any) -> None:
    from autoscaler.planner import PLANNERS

    if args.planner is not None and args.planner not in PLANNERS:
        raise InputError("--planner", args.planner, f"unknown planner (known: {', '.join(PLANNERS)})")
    why = policy.scaling.redundancy_refuses(args.planner or policy.scaling.planner)
    if why is not None:
        raise InputError(policy.source or "<policy>", "scaling.redundancy.min_servers", why)
    _headroom(args.headroom)
    if args.frontier and (args.compare or args.strategy != "autoscaler"):
        other = "--compare" if args.compare else "--strategy"
        raise InputError(
            "--frontier", other, "give --frontier alone: it runs headroom auto at each target and the oracle"
        )
    if args.workers is not None and args.workers < 1:
        raise InputError("--workers", str(args.workers), "must be at least 1")
    if args.plot and extras.missing("matplotlib"):  # before the replay, not after it
        raise InputError("--plot", str(args.plot), f"needs matplotlib, not installed: {extras.install_hint('plot')}")
    if args.interval_s is not None and not 0 < args.interval_s <= MAX_INTERVAL_S:
        raise InputError("--interval-s", str(args.interval_s), f"must be positive, at most {MAX_INTERVAL_S:g}")
    _check_spot_options(args)


def _check_spot_options(args: argparse.Namespace) -> None:
    finite = math.isfinite
    if not (finite(args.spot_interruptions_per_hour) and args.spot_interruptions_per_hour >= 0):
        raise InputError("--spot-interruptions-per-hour", str(args.spot_interruptions_per_hour), "must be 0 or more")
    if not (finite(args.interruption_warning_s) and args.interruption_warning_s >= 0):
        raise InputError("--interruption-warning-s", str(args.interruption_warning_s), "must be 0 or more")
    if args.spot_price_ratio is not None and not (finite(args.spot_price_ratio) and args.spot_price_ratio > 0):
        raise InputError("--spot-price-ratio", str(args.spot_price_ratio), "must be positive")
    if args.min_on_demand_fraction is not None and not 0 <= args.min_on_demand_fraction <= 1:
        raise InputError("--min-on-demand-fraction", str(args.min_on_demand_fraction), "must be between 0 and 1")


def _check_size(policy: Any, trace: Any) -> None:
    """Refuse a trace whose busiest rows need more instances than the policy allows, before replaying."""
    from autoscaler.planner import TooManyInstances, planning_inputs
    from autoscaler.planner.limits import check_bound

    try:
        check_bound(*planning_inputs(policy, rates=trace.peak()), policy.scaling.instance_limit)
    except TooManyInstances as exc:
        raise InputError(trace.source, f"column {exc.workload!r}", f"at its peak, {exc}") from None


def _headroom(value: str | None) -> float | str | None:
    """--headroom: None, "auto" or a number from 0 to 10 (else bad input, exit 2)."""
    if value is None or value == "auto":
        return value
    try:
        number = float(value)
    except ValueError:
        number = -1.0
    if not 0 <= number <= 10:
        raise InputError("--headroom", value, "must be auto or a finite number from 0 to 10")
    return number


def _say_running(label: str) -> None:
    print(f"simulating {label} ...", file=sys.stderr, flush=True)


def _compare(args: argparse.Namespace, policy: Any, trace: Any, opts: Any) -> list[Any]:
    """--compare, its runs in --workers processes, watched on stderr (sim/watch.py)."""
    from contextlib import nullcontext

    from autoscaler.sim.compare import compare
    from autoscaler.sim.watch import Bars, watcher_for

    watch = watcher_for(sys.stderr, quiet=args.json)
    with watch if isinstance(watch, Bars) else nullcontext():
        return compare(policy, trace, opts, watch, workers=args.workers)


def _output(args: argparse.Namespace, results: list[Any], wall: float) -> None:
    from autoscaler.sim import report as simreport

    r0 = results[0]
    print(
        f"simulated {r0.trace.duration_s / 86400:.2f} days ({len(r0.trace.times)} rows x "
        f"{len(r0.trace.names)} workloads, {r0.ticks} ticks) {len(results)} time(s) in {wall:.1f} s",
        file=sys.stderr,
    )
    if args.timeline:
        simreport.write_timeline(r0, args.timeline)
    several = args.compare or args.frontier
    if args.plot and args.frontier:
        from autoscaler.sim.frontier import plot_frontier

        plot_frontier(results, args.plot)
    elif args.plot:
        simreport.plot(results if args.compare else [r0], args.plot)
    if args.json:
        docs = [r.summary() for r in results]
        print(json.dumps(docs if several else docs[0], indent=1))
    elif args.frontier:
        from autoscaler.sim.frontier import print_frontier

        print_frontier(results)
    elif args.compare:
        simreport.print_compare(results)
    else:
        simreport.print_summary(r0)
    for r in results:
        for msg in r.tick_errors[:3]:
            print(f"warning: {r.label}: tick failed at {msg}", file=sys.stderr)


def _exit_code(results: list[Any]) -> int:
    return 1 if any(r.tick_errors for r in results) else 0
