"""`igniter forecast POLICY --trace FILE`: what `scaling.forecast: auto` finds in a trace.

Per workload, the significant periods of the whole trace (core/capacity/periods.py: periodogram,
Fisher's g-test bound, confirmed by the autocorrelation) and their strength (the share of the
detrended variance the period and its harmonics carry). `--plot OUT.png` draws each workload's
rate, the forecast the decomposition made (refit every refit_s on the trace up to then, as the
controller does: trend + seasonal profile; the last rate held where no period was found) and the
bands (its residual's 10 % and 90 % quantiles). `--json` prints the periods as JSON.

Exit codes: 0 ok; 1 internal error; 2 bad input (`FILE: field: message`).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from autoscaler.cli import extras
from autoscaler.cli.simulate import add_trace_args, load_trace
from autoscaler.config.errors import InputError

MIN_HISTORY_S = 7200.0  # the plot's first refit: two hours of trace


def register(subparsers: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "forecast",
        help="the periods forecast: auto finds in a trace, and their strength",
        description="Find the significant periods of each workload's rate in a trace (what "
        "`scaling.forecast: auto` plans ahead with), and draw the forecast and its bands.",
    )
    p.add_argument("policy", type=Path, help="policy YAML (its workloads name the trace's columns)")
    p.add_argument("--trace", type=Path, required=True, help="wide CSV: time_s, one column per workload")
    p.add_argument("--plot", type=Path, metavar="OUT.png", help="draw the trace, the forecast and the bands")
    p.add_argument("--json", action="store_true", help="print the periods as JSON")
    add_trace_args(p)
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    from autoscaler.config.policy import load_policy
    from autoscaler.core.capacity.periods import decompose, find_periods, grid
    from autoscaler.loop.tick.tuning import period_config
    from autoscaler.sim.traces import check_workloads

    policy = load_policy(args.policy)
    if args.plot and extras.missing("matplotlib"):
        raise InputError("--plot", str(args.plot), f"needs matplotlib, not installed: {extras.install_hint('plot')}")
    trace = load_trace(args)
    names = [w.name for w in policy.workloads]
    check_workloads(trace, names, str(args.policy))
    cfg = period_config(policy)
    horizon = policy.scaling.boot_s + policy.scaling.interval_s
    end = float(trace.times[-1])
    found = {}
    for w in names:
        pts = list(zip(trace.times.tolist(), trace.rates[w].tolist(), strict=True))
        times, rates = grid(pts, cfg.step_s, end)
        found[w] = find_periods(times, rates, cfg)
    if args.json:
        print(json.dumps({w: [_period_json(p) for p in ps] for w, ps in found.items()}, indent=1))
    else:
        _print_table(trace, found, cfg.step_s, cfg.alpha)
    if args.plot:
        bands = {w: _replay(trace, w, cfg, horizon, decompose) for w in names}
        _plot(trace, names, bands, found, args.plot)
        if not args.json:
            print(f"wrote {args.plot}")
    return 0


def _period_json(p: Any) -> dict[str, float]:
    return {"period_s": round(p.period_s, 1), "strength": round(p.strength, 4), "p_value": p.p_value}


def _duration(seconds: float) -> str:
    """1d 02h, 1h 00m, 30m 05s: the two largest units."""
    s = round(seconds)
    d, h, m, sec = s // 86400, s % 86400 // 3600, s % 3600 // 60, s % 60
    if d:
        return f"{d}d {h:02d}h"
    if h:
        return f"{h}h {m:02d}m"
    return f"{m}m {sec:02d}s"


def _print_table(trace: Any, found: dict[str, Any], step_s: float, alpha: float) -> None:
    print(
        f"periods in {trace.source}: {len(trace.times)} rows, {trace.duration_s / 86400:.2f} days "
        f"(grid {step_s:g} s; significant at a false-alarm bound below {alpha:g}, and repeating)"
    )
    width = max(len("workload"), *(len(w) for w in found))
    print(f"{'workload':<{width}}  {'period':>10}  {'seconds':>9}  {'strength':>8}  {'p (bound)':>9}")
    for w, periods in found.items():
        if not periods:
            print(f"{w:<{width}}  {'none':>10}  {'-':>9}  {'-':>8}  {'-':>9}   (auto plans as seasonal)")
        for p in periods:
            print(
                f"{w:<{width}}  {_duration(p.period_s):>10}  {p.period_s:>9.0f}  {p.strength:>8.3f}  {p.p_value:>9.1e}"
            )


def _replay(
    trace: Any, w: str, cfg: Any, horizon: float, decompose: Any
) -> tuple[list[float], list[float], list[float]]:
    """The forecast and its bands at each row: refit every refit_s on the trace up to then."""
    times, rates = trace.times.tolist(), trace.rates[w].tolist()
    mid, lo, hi = [float("nan")] * len(times), [float("nan")] * len(times), [float("nan")] * len(times)
    t0, fit, last = times[0], None, 0.0
    for i, t in enumerate(times):
        if t - t0 < MIN_HISTORY_S:
            continue
        if fit is None or t - fit.fitted_at >= cfg.refit_s:
            fit = decompose(list(zip(times[:i], rates[:i], strict=True)), times[i - 1], horizon, cfg)
            last = rates[i - 1]
        value = fit.trend + fit.seasonal(t) if fit.periods else last
        mid[i], lo[i], hi[i] = value, value + fit.bands[0], value + fit.bands[1]
    return mid, lo, hi


def _plot(trace: Any, names: list[str], bands: dict[str, Any], found: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    hours = (trace.times - trace.times[0]) / 3600.0
    fig, axes = plt.subplots(len(names), 1, figsize=(11, 2.6 * len(names)), sharex=True, squeeze=False)
    for ax, w in zip(axes[:, 0], names, strict=True):
        mid, lo, hi = bands[w]
        ax.plot(hours, trace.rates[w], color="black", lw=0.7, label="rate")
        ax.plot(hours, mid, color="tab:blue", lw=0.9, label="forecast (trend + seasonal)")
        ax.fill_between(hours, lo, hi, color="tab:blue", alpha=0.2, lw=0, label="band (residual 10-90 %)")
        title = ", ".join(f"{_duration(p.period_s)} ({p.strength:.2f})" for p in found[w]) or "no period"
        ax.set_title(f"{w}: {title}", fontsize=9, loc="left")
        ax.set_ylabel("req/s")
    axes[0, 0].legend(loc="upper right", fontsize=7)
    axes[-1, 0].set_xlabel("hours since the trace's start")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
