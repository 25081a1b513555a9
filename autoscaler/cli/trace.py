"""`igniter trace convert|show`: reshape request-rate traces for `igniter simulate`.

- `convert IN --out OUT`: a long trace (one row per time and name) into the wide format, or with
  `--wide` a wide trace with another time column, reshaped (--rename, --scale, --step-s/--agg).
- `show CSV`: rows, spacing, duration, and each column's mean, peak and peak-to-mean.

Exit codes: 0 ok; 1 internal error; 2 bad input (`FILE: field: message`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from autoscaler.cli.simulate import add_trace_args, load_trace, reshape


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add `trace convert` and `trace show` to the igniter CLI."""
    p = subparsers.add_parser(
        "trace",
        help="convert and inspect request-rate traces",
        description="Convert a long-format trace (time, name, rate) into the wide format "
        "`igniter simulate --trace` reads, or summarise a wide trace.",
    )
    sub = p.add_subparsers(dest="trace_command", required=True, metavar="ACTION")
    c = sub.add_parser("convert", help="long (time,name,rate) -> wide (time_s, one column per name)")
    c.add_argument("input", type=Path, help="input CSV")
    c.add_argument("--out", type=Path, required=True, help="wide CSV to write")
    c.add_argument("--wide", action="store_true", help="the input is already wide: only reshape it")
    c.add_argument("--name-col", default="name", help="long format: column holding the workload name (default name)")
    c.add_argument("--rate-col", default="rate_rps", help="long format: column holding req/s (default rate_rps)")
    c.add_argument("--names", help="long format: comma-separated names to keep (default all, in first-seen order)")
    add_trace_args(c)
    c.set_defaults(func=run_convert)
    s = sub.add_parser("show", help="summarise a wide trace")
    s.add_argument("trace", type=Path, help="wide CSV")
    add_trace_args(s)
    s.set_defaults(func=run_show)
    return p


def run_convert(args: argparse.Namespace) -> int:
    """Long -> wide (or wide -> wide), then the same reshaping `simulate` offers, then write."""
    from autoscaler.sim import traces

    if args.wide:
        args.trace = args.input
        trace = load_trace(args)
    else:
        cols = traces.LongColumns(args.time_col, args.name_col, args.rate_col)
        names = [n.strip() for n in args.names.split(",")] if args.names else None
        converted = traces.long_to_wide(args.input, cols, names)
        _report(converted)
        trace = reshape(args, converted.trace)
    traces.write_wide(trace, args.out)
    print(
        f"wrote {args.out}: {len(trace.times)} rows x {len(trace.names)} columns ({', '.join(trace.names)}), "
        f"{trace.step_s:g} s apart",
        file=sys.stderr,
    )
    return 0


def _report(converted: Any) -> None:
    if converted.filled:
        print(f"note: {converted.filled} (time, name) cells had no row and were written as 0 req/s", file=sys.stderr)
    if converted.summed:
        print(f"note: {converted.summed} duplicate (time, name) rows were summed", file=sys.stderr)


def run_show(args: argparse.Namespace) -> int:
    trace = load_trace(args)
    print(f"{trace.source}: {len(trace.times)} rows, {trace.step_s:g} s apart, {trace.duration_s / 3600:.2f} hours")
    print(f"{'column':<24} {'mean':>10} {'peak':>10} {'peak/mean':>10}")
    for name in trace.names:
        mean, peak = trace.mean()[name], trace.peak()[name]
        ratio = f"{peak / mean:.2f}" if mean > 0 else "-"
        print(f"{name:<24} {mean:>10.2f} {peak:>10.2f} {ratio:>10}")
    return 0
