"""`igniter simulate --compare`: every planner, forecast and strategy on one policy and trace, side
by side (docs/simulate.md)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from autoscaler.config.policy import Policy
from autoscaler.loop.tick import PlanFn
from autoscaler.sim.engine import SimOptions, simulate, with_overrides
from autoscaler.sim.result import SimResult
from autoscaler.sim.traces import Trace


def compare_options(policy: Policy, base: SimOptions = SimOptions()) -> list[SimOptions]:
    """`--compare`: igniter under each forecast, the baseline planners, static peak, reactive, and
    the oracle (a perfect forecast: the floor for forecasting); every run keeps `base`'s headroom
    and rate statistic. With a fixed headroom, one more line: igniter with `headroom: auto`. With a
    policy that buys spot, those runs are on-demand only (so they compare planners and strategies,
    not markets) and one more line is the policy's spot run (igniter under the policy's forecast,
    with `base`'s interruptions)."""
    forecast = base.forecast or policy.scaling.forecast
    runs = [SimOptions(planner="igniter", forecast=f) for f in ("last", "ewma", "holt", "seasonal")]
    runs += [SimOptions(planner=p, forecast=forecast) for p in ("ffd", "gslice", "gpulets")]
    runs += [
        SimOptions(strategy="static-peak", planner="igniter"),
        SimOptions(strategy="reactive"),
        SimOptions(strategy="oracle", planner="igniter"),
    ]
    runs = [replace(r, headroom=base.headroom, rate_stat=base.rate_stat, spot=False) for r in runs]
    room = policy.scaling.headroom if base.headroom is None else base.headroom
    if room != "auto":
        auto = SimOptions(planner="igniter", forecast=forecast, headroom="auto", rate_stat=base.rate_stat, spot=False)
        runs.insert(4, replace(auto, label=f"igniter/{forecast} headroom auto"))
    if policy.buys_spot():
        runs.append(replace(base, planner="igniter", forecast=forecast, label=spot_label(policy, forecast)))
    return runs


def spot_label(policy: Policy, forecast: str) -> str:
    return f"igniter/{forecast} + spot (on-demand floor {policy.scaling.spot.min_on_demand_fraction:g})"


def compare(
    policy: Policy,
    trace: Trace,
    base: SimOptions = SimOptions(),
    progress: Callable[[str], None] | None = None,
    plan_fn: PlanFn | None = None,
) -> list[SimResult]:
    """Every run of `compare_options`, in order, on the same policy and trace. The spot line's
    on-demand-only figures are those of the igniter line with the same forecast."""
    out = []
    for opts in compare_options(policy, base):
        if progress:
            progress(opts.describe(with_overrides(policy, opts)))
        out.append(simulate(policy, trace, replace(opts, on_demand_twin=False), plan_fn))
    if policy.buys_spot():
        spot = out[-1]
        twin = next(r for r in out if r.label == f"igniter/{spot.forecast}")
        spot.cost_on_demand_only_usd, spot.slo_attainment_on_demand_only = twin.cost_total_usd, twin.attainment()
    return out
