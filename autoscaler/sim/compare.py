"""`igniter simulate --compare`: every planner, forecast and strategy on one policy and trace, side
by side (docs/simulate.md)."""

from __future__ import annotations

from dataclasses import replace

from autoscaler.config.policy import Policy
from autoscaler.loop.tick.records import PlanFn
from autoscaler.sim.engine import SimOptions, default_plan_fn, simulate, with_overrides
from autoscaler.sim.memo import MemoPlanner, PlanMemo
from autoscaler.sim.parallel import PLAN_MEMO_SIZE, Run, picklable, run_parallel, shared, workers_for
from autoscaler.sim.result import SimResult
from autoscaler.sim.strategies import peak_plan
from autoscaler.sim.traces import Trace
from autoscaler.sim.watch import Watcher


def compare_options(policy: Policy, base: SimOptions = SimOptions()) -> list[SimOptions]:
    """`--compare`: igniter under each forecast, the baseline planners, static peak, reactive, and
    the oracle (a perfect forecast: the floor for forecasting); every run keeps `base`'s headroom
    and rate statistic. With a fixed headroom, one more line: igniter with `headroom: auto`. With a
    policy that buys spot, those runs are on-demand only (so they compare planners and strategies,
    not markets) and one more line is the policy's spot run (igniter under the policy's forecast,
    with `base`'s interruptions). With scaling.redundancy min_servers 2 the baseline planners are
    left out (they plan no fault domains)."""
    forecast = base.forecast or policy.scaling.forecast
    runs = [SimOptions(planner="igniter", forecast=f) for f in ("last", "ewma", "holt", "seasonal")]
    if policy.scaling.redundancy.min_servers == 1:  # the baselines plan no fault domains
        runs += [SimOptions(planner=p, forecast=forecast) for p in ("ffd", "gslice", "gpulets")]
    runs += [
        SimOptions(strategy="static-peak", planner="igniter"),
        SimOptions(strategy="reactive"),
        SimOptions(strategy="oracle", planner="igniter"),
    ]
    runs = [
        replace(r, headroom=base.headroom, rate_stat=base.rate_stat, tick_reads=base.tick_reads, spot=False)
        for r in runs
    ]
    room = policy.scaling.headroom if base.headroom is None else base.headroom
    if room != "auto":
        auto = SimOptions(
            planner="igniter",
            forecast=forecast,
            headroom="auto",
            rate_stat=base.rate_stat,
            tick_reads=base.tick_reads,
            spot=False,
        )
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
    watch: Watcher | None = None,
    plan_fn: PlanFn | None = None,
    workers: int | None = None,
) -> list[SimResult]:
    """Every run of `compare_options`, in order, on the same policy and trace: in `workers`
    processes (default one per CPU, parallel.py), else one after another here; the numbers are
    the same either way. The runs share one plan memo per process, started with the peak plans
    made here once. The spot line's on-demand-only figures are those of the igniter line with
    the same forecast. `watch` hears each run start, advance and finish."""
    runs = [
        Run(i, opts.describe(with_overrides(policy, opts)), replace(opts, on_demand_twin=False))
        for i, opts in enumerate(compare_options(policy, base))
    ]
    plans = PlanMemo(PLAN_MEMO_SIZE)
    for run in runs:  # the static peak of every strategy, planned once for all of them
        planned = with_overrides(policy, run.opts)
        peak_plan(planned, trace, MemoPlanner(plan_fn or default_plan_fn(planned), planned, plans))
    if watch is not None:
        watch.begin([run.label for run in runs])
    n = workers_for(len(runs), workers)
    out = None
    if n > 1 and picklable(plan_fn):
        out = run_parallel(shared(policy, trace, plan_fn, plans), runs, n, watch)
    if out is None:
        out = [_here(policy, trace, run, plan_fn, plans, watch) for run in runs]
    if policy.buys_spot():
        spot = out[-1]
        twin = next(r for r in out if r.label == f"igniter/{spot.forecast}")
        spot.cost_on_demand_only_usd, spot.slo_attainment_on_demand_only = twin.cost_total_usd, twin.attainment()
    return out


def _here(
    policy: Policy, trace: Trace, run: Run, plan_fn: PlanFn | None, plans: PlanMemo, watch: Watcher | None
) -> SimResult:
    """One run in this process (one worker, or no pool to be had)."""
    if watch is None:
        return simulate(policy, trace, run.opts, plan_fn, plans=plans)
    watch.started(run.index, run.label)
    result = simulate(policy, trace, run.opts, plan_fn, lambda f: watch.advanced(run.index, f), plans)
    watch.finished(run.index)
    return result
