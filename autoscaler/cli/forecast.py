"""`igniter forecast POLICY --trace FILE`: what `scaling.forecast: auto` finds in a trace.

Per workload, the significant periods of the whole trace (core/capacity/periods.py: periodogram,
Fisher's g-test bound, confirmed by the autocorrelation), their strength (the share of the
detrended variance the period and its harmonics carry), and when the controller would first plan
with each: the trace is replayed tick by tick (scaling.interval_s, the rates the simulator's
counter reads) through the controller's own refits (loop/tick/tuning.py: replay_fits, on the
schedule refit_after sets: span / 12 of the history, 5 minutes to an hour), and `found at` is the
first refit whose fit holds the period (within 5 %). `--plot OUT.png` draws each workload's rate,
the forecast those refits made at each tick (trend + seasonal profile; the last rate read where no
period was found) and the bands (the residual's 10 % and 90 % quantiles). `--json` prints the
periods as JSON (with `found_at_s`, seconds from the trace's start; null: never in the replay; and
`why_never`, the row's note where the history a refit reads is why).

Exit codes: 0 ok; 1 internal error; 2 bad input (`FILE: field: message`).
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autoscaler.cli import extras
from autoscaler.cli.simulate import add_trace_args, load_trace
from autoscaler.config.errors import InputError

if TYPE_CHECKING:
    from autoscaler.core.capacity.periods import PeriodConfig

FOUND_TOLERANCE = 0.05  # a refit's period within this share of a whole-trace period is that period


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
    from autoscaler.core.capacity.periods import find_periods, grid
    from autoscaler.loop.tick.tuning import history_window_s, period_config
    from autoscaler.sim.engine import check_ticks
    from autoscaler.sim.traces import check_workloads

    policy = load_policy(args.policy)
    if args.plot and extras.missing("matplotlib"):
        raise InputError("--plot", str(args.plot), f"needs matplotlib, not installed: {extras.install_hint('plot')}")
    trace = load_trace(args)
    names = [w.name for w in policy.workloads]
    check_workloads(trace, names, str(args.policy))
    check_ticks(trace, policy.scaling.interval_s)  # the replay ticks as the simulator does
    cfg = period_config(policy)
    end = float(trace.times[-1])
    found = {}
    for w in names:
        pts = list(zip(trace.times.tolist(), trace.rates[w].tolist(), strict=True))
        times, rates = grid(pts, cfg.step_s, end)
        found[w] = find_periods(times, rates, cfg)
    replay = Replay.of(policy, trace, names)
    firsts = {w: [replay.found_at(w, p.period_s) for p in ps] for w, ps in found.items()}
    history = History(cfg, history_window_s(policy), policy.scaling.season_s, trace.duration_s)
    if args.json:
        out = {
            w: [_period_json(p, at, history) for p, at in zip(ps, firsts[w], strict=True)] for w, ps in found.items()
        }
        print(json.dumps(out, indent=1))
    else:
        _print_table(trace, found, firsts, history, replay)
    if args.plot:
        _plot(trace, names, replay, found, args.plot)
        if not args.json:
            print(f"wrote {args.plot}")
    return 0


@dataclass(frozen=True)
class Replay:
    """The trace replayed through the controller's refits (tuning.replay_fits): the tick times, and
    per workload the forecast at each tick, its bands, and each refit's time and periods."""

    ticks: list[float]
    mid: dict[str, list[float]]
    lo: dict[str, list[float]]
    hi: dict[str, list[float]]
    refits: dict[str, list[tuple[float, tuple[float, ...]]]]

    @staticmethod
    def of(policy: Any, trace: Any, names: list[str]) -> Replay:
        from autoscaler.loop.tick.tuning import replay_fits

        reads = list(tick_reads(policy, trace, names))
        out = Replay([], {w: [] for w in names}, {w: [] for w in names}, {w: [] for w in names}, {w: [] for w in names})
        for i, (now, fits) in enumerate(replay_fits(policy, reads)):
            out.ticks.append(now)
            last = reads[max(i - 1, 0)][1]  # the fits see the ticks before this one
            for w in names:
                fit = fits[w]
                if not out.refits[w] or out.refits[w][-1][0] != fit.fitted_at:
                    out.refits[w].append((fit.fitted_at, tuple(p.period_s for p in fit.periods)))
                value = fit.trend + fit.seasonal(now) if fit.periods else last.get(w, math.nan)
                band = fit.bands if fit.periods else (math.nan, math.nan)  # no decomposition, no residual
                out.mid[w].append(value)
                out.lo[w].append(value + band[0])
                out.hi[w].append(value + band[1])
        return out

    def found_at(self, w: str, period_s: float) -> float | None:
        """Seconds from the first tick to the first refit whose fit holds this period, None: never."""
        for at, periods in self.refits[w]:
            if any(abs(p - period_s) <= FOUND_TOLERANCE * period_s for p in periods):
                return at - self.ticks[0]
        return None


@dataclass(frozen=True)
class History:
    """What bounds the periods the controller can plan with: the finder's settings, the history a
    refit reads (tuning.history_window_s), the policy's season_s and the trace's span."""

    cfg: PeriodConfig
    window_s: float
    season_s: float
    span_s: float

    def why_never(self, period_s: float) -> str:
        """Why a period found in the whole trace is never planned with, where the history is the
        cause (periods.history_to_plan_s); "" where it is not (the out-of-sample test dropped it)."""
        from autoscaler.core.capacity.periods import history_to_plan_s

        need = history_to_plan_s(period_s, self.cfg)
        if need is None or need <= min(self.window_s, self.span_s):
            return ""
        cycles = need / period_s
        head = f"planned with once {cycles:.1f} cycles, {_duration(need)}, are in the history"
        if need > self.span_s:
            return f"({head}: longer than the trace)"
        seasons = math.ceil(need / self.season_s - 1e-9)
        most = _max_seasons()
        fix = (
            f"seasons: {seasons}" if seasons <= most else f"seasons * season_s of {_duration(need)} (seasons <= {most})"
        )
        return f"({head}; the policy reads {_duration(self.window_s)}: {fix})"


def _max_seasons() -> int:
    """scaling.seasons' upper bound, as the policy's schema states it."""
    from autoscaler.config.scaling import ScalingConfig

    return min(int(m.le) for m in ScalingConfig.model_fields["seasons"].metadata if hasattr(m, "le"))


def tick_reads(policy: Any, trace: Any, names: list[str]) -> Iterator[tuple[float, dict[str, float]]]:
    """The controller's ticks over the trace as the simulator runs them (one at the start, then
    every interval_s up to the end), each with the rates its counter reads (sim/trace_rates.py)."""
    from autoscaler.sim.trace_rates import TraceRates

    sc = policy.scaling
    source = TraceRates(trace, sc.interval_s, warm_s=sc.boot_s + sc.interval_s)
    t0 = float(trace.times[0])
    for k in range(math.ceil(trace.duration_s / sc.interval_s)):
        now = t0 + k * sc.interval_s
        yield now, {w: v for w, v in source.read(now, names).items() if v is not None}


def _period_json(p: Any, found_at: float | None, history: History) -> dict[str, float | str | None]:
    return {
        "period_s": round(p.period_s, 1),
        "strength": round(p.strength, 4),
        "p_value": p.p_value,
        "found_at_s": None if found_at is None else round(found_at, 1),
        "why_never": (history.why_never(p.period_s) or None) if found_at is None else None,
    }


def _duration(seconds: float) -> str:
    """1d 02h, 1h 00m, 30m 05s: the two largest units."""
    s = round(seconds)
    d, h, m, sec = s // 86400, s % 86400 // 3600, s % 3600 // 60, s % 60
    if d:
        return f"{d}d {h:02d}h"
    if h:
        return f"{h}h {m:02d}m"
    return f"{m}m {sec:02d}s"


def _print_table(
    trace: Any, found: dict[str, Any], firsts: dict[str, list[float | None]], history: History, r: Replay
) -> None:
    cfg = history.cfg
    print(
        f"periods in {trace.source}: {len(trace.times)} rows, {trace.duration_s / 86400:.2f} days "
        f"(grid {cfg.step_s:g} s; significant at a false-alarm bound below {cfg.alpha:g}, and repeating)"
    )
    counts = sorted({len(v) for v in r.refits.values()}) or [0]
    refits = f"{counts[0]}" if counts[0] == counts[-1] else f"{counts[0]}-{counts[-1]}"
    print(
        f"found at: the first of the controller's refits that holds the period "
        f"({len(r.ticks)} ticks replayed, {refits} refits a workload)"
    )
    width = max(len("workload"), *(len(w) for w in found))
    print(f"{'workload':<{width}}  {'period':>10}  {'seconds':>9}  {'strength':>8}  {'p (bound)':>9}  {'found at':>9}")
    for w, periods in found.items():
        if not periods:
            print(f"{w:<{width}}  {'none':>10}  {'-':>9}  {'-':>8}  {'-':>9}  {'-':>9}   (auto plans as seasonal)")
        for p, at in zip(periods, firsts[w], strict=True):
            when = "never" if at is None else _duration(at)
            why = history.why_never(p.period_s) if at is None else ""
            print(
                f"{w:<{width}}  {_duration(p.period_s):>10}  {p.period_s:>9.0f}  {p.strength:>8.3f}  "
                f"{p.p_value:>9.1e}  {when:>9}" + (f"   {why}" if why else "")
            )


def _plot(trace: Any, names: list[str], r: Replay, found: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t0 = float(trace.times[0])
    hours = (trace.times - t0) / 3600.0
    ticks = [(t - t0) / 3600.0 for t in r.ticks]
    fig, axes = plt.subplots(len(names), 1, figsize=(11, 2.6 * len(names)), sharex=True, squeeze=False)
    for ax, w in zip(axes[:, 0], names, strict=True):
        ax.step(hours, trace.rates[w], where="post", color="black", lw=0.7, label="rate")
        ax.step(ticks, r.mid[w], where="post", color="tab:blue", lw=0.9, label="forecast (trend + seasonal)")
        ax.fill_between(
            ticks, r.lo[w], r.hi[w], step="post", color="tab:blue", alpha=0.2, lw=0, label="band (residual 10-90 %)"
        )
        title = ", ".join(f"{_duration(p.period_s)} ({p.strength:.2f})" for p in found[w]) or "no period"
        ax.set_title(f"{w}: {title}", fontsize=9, loc="left")
        ax.set_ylabel("req/s")
    axes[0, 0].legend(loc="upper right", fontsize=7)
    axes[-1, 0].set_xlabel("hours since the trace's start")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
