"""Presenting simulation results: the summary and comparison tables, the timeline CSV, the plot."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from autoscaler.sim.engine import SimResult


def _console() -> Console:
    """A console that does not squash tables when the output is a file or a pipe."""
    console = Console()
    return console if console.is_terminal else Console(width=200)


def _money(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:,.2f}"


def write_timeline(result: SimResult, path: str | Path) -> None:
    """One row per trace row and workload: time_s,workload,rate_rps,capacity_rps,cost_per_hour."""
    trace = result.trace
    with Path(path).open("w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh)
        out.writerow(["time_s", "workload", "rate_rps", "capacity_rps", "cost_per_hour"])
        for k, t in enumerate(trace.times):
            for w in trace.names:
                out.writerow(
                    [
                        f"{t:g}",
                        w,
                        f"{trace.rates[w][k]:.3f}",
                        f"{result.capacity[w][k]:.3f}",
                        f"{result.cost_per_hour[k]:.4f}",
                    ]
                )


def print_summary(result: SimResult, console: Console | None = None) -> None:
    """The single-run summary as a two-column table."""
    console = console or _console()
    s = result.summary()
    table = Table(title=f"simulation: {s['label']} on {Path(result.trace.source).name}", show_header=False)
    table.add_column("what")
    table.add_column("value", justify="right")
    worst = s["worst_shortfall_at"]
    rows = [
        ("duration", f"{s['duration_s'] / 86400:.2f} days, {s['steps']} rows of {s['step_s']:g} s, {s['ticks']} ticks"),
        ("cost", f"${s['cost_total_usd']:,.2f}"),
        ("static peak cost", f"${s['static_peak_cost_usd']:,.2f}"),
        ("cost / static peak", _ratio(s["cost_vs_static_peak"])),
        (
            "SLO attainment",
            f"{s['slo_attainment']:.4%} of rows ({s['shortfall_steps']} short), "
            f"{s['slo_attainment_time']:.4%} of the time",
        ),
        (
            "worst shortfall",
            "none"
            if worst is None
            else f"{worst['fraction']:.1%} of {worst['workload']} at t={worst['time_s']:g} s "
            f"({worst['capacity_rps']:g} of {worst['rate_rps']:g} req/s)",
        ),
        (
            "scaling actions",
            f"{s['scaling_actions']} ({s['launches']} launches, {s['terminations']} terminations), "
            f"{s['reconfigurations']} reconfigurations",
        ),
        ("instance-hours", ", ".join(f"{k} {v:,.1f}" for k, v in s["instance_hours"].items()) or "none"),
        (
            "reconfiguration",
            f"{s['outage_steps']} outage rows (traffic, no capacity), {s['reconfig_short_steps']} short rows "
            "a change of plan caused",
        ),
        (
            "surge",
            f"{s['surge_instance_hours']:,.2f} instance-hours ({s['surge_launches']} launches), "
            f"${s['surge_cost_usd']:,.2f} = {s['surge_cost_fraction']:.2%} of the cost",
        ),
    ]
    if s["recuts"]:
        rows.append(
            (
                "MIG re-cuts",
                f"{s['recuts']} ({s['recut_short_steps']} short rows they caused), surge meanwhile "
                f"{s['recut_surge_instance_hours']:,.2f} instance-hours on {s['recut_surge_instances']} "
                f"instance(s), ${s['recut_surge_cost_usd']:,.2f}",
            )
        )
    if s["headroom_final"]:
        rows.append(("headroom at the end", _per_workload(s["headroom_final"], f"({s['headroom']})")))
        rows.append(("forecast error p99", _per_workload(s["forecast_error_p99"], "(observed / forecast - 1)")))
    if "spot_instance_hours" in s:
        rows.append(("spot", _spot_line(s)))
    if s["invariant_breaches"]:
        rows.append(
            (
                "invariant breaches",
                ", ".join(f"{n} tick(s) by {k}" for k, n in s["invariant_breaches"].items())
                + " (a policy limit left no room for surge)",
            )
        )
    if s["servers_over_budget"]:
        rows.append(
            (
                "servers over budget",
                f"{s['servers_over_budget']} server-ticks predicted to miss SLO/2 (their throughput is not counted)",
            )
        )
    if s["unplaced"]:
        rows.append(("unplaced", "; ".join(f"{k}: {v}" for k, v in s["unplaced"].items())))
    for what, value in rows:
        table.add_row(what, value)
    console.print(table)


def _per_workload(values: dict[str, float | None], note: str) -> str:
    return ", ".join(f"{w} {'-' if v is None else f'{v:.2f}'}" for w, v in values.items()) + f" {note}"


def _spot_line(s: dict[str, Any]) -> str:
    """Spot instance-hours and interruptions, and what the same replay on-demand only gave."""
    out = f"{s['spot_instance_hours']:,.1f} spot instance-hours, {s['interruptions']} interruptions"
    if s.get("cost_on_demand_only_usd") is not None:
        out += (
            f"; on-demand only: ${s['cost_on_demand_only_usd']:,.2f} (this run {_ratio(s['cost_vs_on_demand_only'])} x),"
            f" attainment {s['slo_attainment_on_demand_only']:.4%}"
        )
    return out


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def reference_cost(results: Sequence[SimResult]) -> float:
    """One yardstick for a comparison: the static-peak run's cost if there is one, else the first
    run's static peak (each run's own static peak uses its own planner, which may over-pack)."""
    static = next((r for r in results if r.strategy == "static-peak"), None)
    return static.cost_total_usd if static is not None else results[0].static_peak_cost_usd


def print_compare(results: Sequence[SimResult], console: Console | None = None) -> None:
    """`--compare`: one row per strategy; "x static peak" is against the static-peak row."""
    console = console or _console()
    first = results[0]
    ref = reference_cost(results)
    table = Table(
        title=f"{Path(first.trace.source).name}: {first.trace.duration_s / 86400:.2f} days, "
        f"{len(first.trace.names)} workloads; static peak (igniter) ${_money(ref)}"
    )
    for col in (
        "strategy",
        "cost $",
        "x static peak",
        "SLO attainment",
        "of the time",
        "worst shortfall",
        "scaling actions",
        "outage",
        "reconfig",
        "surge h",
        "servers over budget",
        "instance-hours",
        *(["spot h / interruptions"] if any(r.spot_instance_hours is not None for r in results) else []),
    ):
        table.add_column(col, justify="left" if col in ("strategy", "instance-hours") else "right", no_wrap=True)
    for r in results:
        s = r.summary()
        table.add_row(
            r.label,
            _money(s["cost_total_usd"]),
            _ratio(s["cost_total_usd"] / ref if ref > 0 else None),
            f"{s['slo_attainment']:.4f}",
            f"{s['slo_attainment_time']:.4f}",
            f"{s['worst_shortfall']:.1%}",
            str(s["scaling_actions"]),
            str(s["outage_steps"]),
            str(s["reconfig_short_steps"]),
            f"{s['surge_instance_hours']:,.2f}",
            str(s["servers_over_budget"]),
            ", ".join(f"{k} {v:,.1f}" for k, v in s["instance_hours"].items()),
            *_spot_cells(r, results),
        )
    console.print(table)


def _spot_cells(r: SimResult, results: Sequence[SimResult]) -> list[str]:
    if not any(x.spot_instance_hours is not None for x in results):
        return []
    if r.spot_instance_hours is None:
        return ["-"]
    return [f"{r.spot_instance_hours:,.1f} / {r.interruptions}"]


def plot(results: Sequence[SimResult], path: str | Path) -> None:
    """Rate against capacity per workload (one panel each, with each run's headroom on a second
    axis, dashed), and cost per hour over time, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    trace = results[0].trace
    hours = (trace.times - trace.times[0]) / 3600.0
    names = trace.names
    fig, axes = plt.subplots(len(names) + 1, 1, figsize=(11, 2.4 * (len(names) + 1)), sharex=True)
    for ax, w in zip(axes, names):
        ax.step(hours, trace.rates[w], where="post", color="black", lw=0.8, label="rate")
        for r in results:
            ax.step(hours, r.capacity[w], where="post", lw=0.8, label=f"capacity ({r.label})")
        ax.set_ylabel(f"{w}\nreq/s")
        _plot_headroom(ax, results, w, float(trace.times[0]))
    axes[0].legend(loc="upper right", fontsize=7)
    for r in results:
        axes[-1].step(hours, r.cost_per_hour, where="post", lw=0.8, label=r.label)
    axes[-1].set_ylabel("fleet $/h")
    axes[-1].set_xlabel("hours since the trace's start")
    axes[-1].legend(loc="upper right", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_headroom(ax, results: Sequence[SimResult], workload: str, t0: float) -> None:  # type: ignore[no-untyped-def]
    """Each run's headroom over time for `workload`, dashed, on the panel's right-hand axis."""
    runs = [r for r in results if r.tuning and r.tuning.headroom.get(workload)]
    if not runs:
        return
    right = ax.twinx()
    for r in runs:
        hours = [(t - t0) / 3600.0 for t in r.tuning.times]  # type: ignore[union-attr]
        line = r.tuning.headroom[workload]  # type: ignore[union-attr]
        right.step(
            hours, line, where="post", ls="--", lw=0.7, color=f"C{results.index(r)}", label=f"headroom ({r.label})"
        )
    right.set_ylabel("headroom", fontsize=7)
    right.set_ylim(bottom=0)
    right.legend(loc="upper left", fontsize=7)
