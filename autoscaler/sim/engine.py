"""Replay a request-rate trace through the real controller on a simulated clock.

`igniter simulate` answers "what would this policy cost on this traffic, and how often would
capacity fall short?" without a cloud account. Nothing here re-implements the control loop: the
engine builds the same `Controller` that `igniter run` builds (the same forecast, planner, hold
and scale-down logic, reconcile and actuator, an in-memory SQLite store) and swaps only what
touches the world: the clock (simulated), the provider (fleet/sim.py: instances are ready boot_s
after launch), the rate source (the trace) and the transport (`none`: agents are not contacted, so a
server counts as ready once it is assigned to a ready instance).

Time model. The controller ticks every `scaling.interval_s` of simulated time, and early where a
tick asks to (`TickReport.wake_at`: instances due to finish booting, make-before-break work
waiting on servers just started), as `igniter run` does. Trace row k's rate holds from its time
to the next row's. The rate source reports what a counter-based source would: the mean of the
trace rows of the last interval (or the latest row when rows are coarser than the interval), and
as its peak (rates.base.Peaked) the busiest of those rows, what the gateway's source reads as
HAProxy's rate_max, the busiest second since its previous read. A row that starts at a tick's own
time counts as read by that tick, so on a row's boundary a tick sees the coming row (1-minute rows
and 60 s ticks: the minute ahead, sooner than any watcher could, so the fast path never fires
there); `SimOptions.tick_reads="past"` reads only what has happened, as a counter does, and is
what shows what the fast path is worth (trace_rates.TraceRates). At each trace row a workload's
capacity is the summed predicted throughput of its servers on ready instances, as the fleet
stands after the ticks up to that time; it is compared with the row's rate. Cost is every
instance's price from launch to termination (pending time is billed, as EC2 bills it). The simulation starts warm: the fleet the first tick plans is already running.

The `oracle` strategy is the same controller with a perfect forecast: its rate source reports the
highest rate of the coming boot_s + interval_s (the horizon a forecast must cover), with no
headroom. No forecast can do better under the policy's boot time, interval and scale-down delay,
so its cost is the floor for what forecasting and headroom can reach on that trace.
"""

from __future__ import annotations

import itertools
import logging
import math
from array import array
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np

from autoscaler.config.errors import InputError
from autoscaler.config.limits import MAX_SIM_TICKS
from autoscaler.config.offerings import offering_prices
from autoscaler.config.policy import Policy
from autoscaler.core.fleet.lifecycle import State
from autoscaler.core.layout.layout_types import Layout
from autoscaler.core.rollout.colocation import Server, cached_judge, server_tuple
from autoscaler.core.rollout.fast_path import panicking
from autoscaler.core.rollout.rollout import loading
from autoscaler.core.rollout.surge import is_surge_slot
from autoscaler.fleet.sim import SimInterruptions, SimProvider
from autoscaler.loop.state.store import Store
from autoscaler.loop.tick.controller import Controller, Deps, PlanFn, TickReport
from autoscaler.loop.tick.records import BoundFn
from autoscaler.rates.reader import RateReader
from autoscaler.sim.changes import Moves
from autoscaler.sim.memo import MemoPlanner, PlanMemo
from autoscaler.sim.recuts import running_cuts
from autoscaler.sim.result import SimResult, Tuning, feasible_capacity
from autoscaler.sim.strategies import oracle_horizon_s, peak_plan, reactive_planner, static_result
from autoscaler.sim.trace_rates import FutureRates, TraceRates, TraceWatch
from autoscaler.sim.traces import Trace
from autoscaler.transport.fake import NoneTransport

Strategy = Literal["autoscaler", "reactive", "static-peak", "oracle"]
Progress = Callable[[float], None]  # the fraction of the trace replayed so far, 0 .. 1
MAX_WAKES = 8  # early ticks per interval at most: boots and make-before-break chains are few
SERVING = (State.READY, State.GOING_AWAY)  # records whose servers serve (a going one until EC2 takes it)
QUIET = (
    "autoscaler.loop.tick.controller",
    "autoscaler.loop.steps.actuator",
    "autoscaler.rates.reader",
    "autoscaler.core.capacity.slo_guard",
    "autoscaler.loop.tick.reach",
    "autoscaler.loop.steps.pool_step",
)


@dataclass(frozen=True)
class SimOptions:
    """What to vary between runs on the same policy and trace (None: keep the policy's value)."""

    planner: str | None = None
    forecast: str | None = None
    headroom: float | Literal["auto"] | None = None
    strategy: Strategy = "autoscaler"
    label: str | None = None
    rate_stat: Literal["mean", "max"] = "mean"
    tick_reads: Literal["row", "past"] = "row"  # past: a tick reads only what has happened (trace_rates.TraceRates)
    spot: bool = True  # False: the policy's spot offerings are switched off (the on-demand-only twin)
    spot_interruptions_per_hour: float = 0.0  # per spot instance, Poisson
    interruption_warning_s: float = 120.0  # warning to reclaim
    seed: int = 0  # the interruption draws
    on_demand_twin: bool = True  # with spot: also replay with spot off, for the *_on_demand_only figures

    def describe(self, policy: Policy) -> str:
        if self.label:
            return self.label
        sc = policy.scaling
        if self.strategy != "autoscaler":
            return self.strategy
        return f"{self.planner or sc.planner}/{self.forecast or sc.forecast}"


class SimClock:
    """The simulated time every component reads; only the engine moves it."""

    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def with_overrides(policy: Policy, opts: SimOptions) -> Policy:
    """The policy with the run's planner, forecast and headroom; the reactive strategy reads the
    observed rate itself (forecast `last`, no headroom: its 40-70 % band is its headroom), and so
    does the oracle (its rate source already reports the future)."""
    update: dict[str, Any] = {}
    if opts.planner:
        update["planner"] = opts.planner
    if opts.forecast:
        update["forecast"] = opts.forecast
    if opts.headroom is not None:
        update["headroom"] = opts.headroom
    if opts.strategy in ("reactive", "oracle"):
        update.update(forecast="last", headroom=0.0)
    if not opts.spot and policy.scaling.spot.enabled:
        update["spot"] = policy.scaling.spot.model_copy(update={"enabled": False})
    return policy.model_copy(update={"scaling": policy.scaling.model_copy(update=update)}) if update else policy


def default_plan_fn(policy: Policy) -> PlanFn:
    """The planner `igniter run` uses (wiring.default_planner), imported late: it needs the planner."""
    from autoscaler.loop.service.wiring import default_planner

    return default_planner


def bound_for(plan_fn: PlanFn) -> BoundFn | None:
    """The bound that goes with `plan_fn` (Deps.bound): wiring's for wiring's planner, none for
    any other (a bound says what one planner's plan costs at most)."""
    from autoscaler.loop.service.wiring import default_bound, default_planner

    return default_bound if plan_fn is default_planner else None


class Replay:
    """One run of the controller over a trace; `run()` returns the SimResult."""

    def __init__(
        self, policy: Policy, trace: Trace, opts: SimOptions, plan_fn: PlanFn, plans: PlanMemo | None = None
    ) -> None:
        self.policy, self.trace, self.opts = policy, trace, opts
        t0 = float(trace.times[0])
        self.clock = SimClock(t0)
        self.provider = SimProvider(
            policy.fleet,
            self.clock,
            offering_prices(policy),
            boot_s=policy.scaling.boot_s,
            warm_boot_s=policy.scaling.warm_pool.warm_boot_s,
            stopped_price_per_hour=policy.scaling.warm_pool.stopped_price_per_hour,
            interruptions_per_hour=opts.spot_interruptions_per_hour,
            warning_s=opts.interruption_warning_s,
            rng=np.random.default_rng(opts.seed),
        )
        self.store = Store(":memory:")
        sc = policy.scaling
        source = (
            FutureRates(trace, oracle_horizon_s(sc))
            if opts.strategy == "oracle"
            else TraceRates(
                trace, sc.interval_s, opts.rate_stat, warm_s=sc.boot_s + sc.interval_s, past=opts.tick_reads == "past"
            )
        )
        rates = RateReader(source, policy.rates.stale_after_s)
        self.planner = MemoPlanner(plan_fn, policy, plans)
        deps = Deps(
            self.provider,
            NoneTransport(),
            rates,
            self.store,
            self.planner,
            self.clock,
            contact=False,
            interruptions=SimInterruptions(self.provider),
            bound=bound_for(plan_fn),
        )
        self.controller = Controller(policy, deps)
        n = len(trace.times)
        self.capacity = {w: np.zeros(n) for w in trace.names}
        self.cost = np.zeros(n)
        self.tick_times: list[float] = []
        # doubles, not float objects (sim/result.py Tuning)
        self.tick_capacity: dict[str, array[float]] = {w: array("d") for w in trace.names}
        self.tuning = Tuning(trace.names)
        self.errors: list[str] = []
        self.broken = 0
        self.unplaced: dict[str, str] = {}
        self.ticks = 0
        self.moves = Moves(trace.names, n)
        self.verdict = cached_judge(policy)
        self.layout: Layout | None = None  # the layout of the last tick
        self.bursts = 0  # stand-ins started in free share
        self.configures = 0  # configure actions after the first two ticks (the result's reconfigurations)
        self.fast_ticks = 0
        fp = policy.scaling.fast_path
        self.watch = TraceWatch(trace, fp if fp.enabled and opts.strategy == "autoscaler" else None)
        self.out_of_reach: dict[str, int] = {}  # workload-ticks out of reach, by cause

    def tick(self, now: float, fast: bool = False) -> TickReport:
        self.clock.t = now
        self.moves.begin(self._cuts())
        report = self.controller.tick(fast=fast)
        self.ticks += 1
        self.fast_ticks += fast
        planned = report.layout.capacity() if report.layout is not None else {}
        self.tuning.add(now, report.headroom, report.forecast_error, planned)
        self.tuning.add_ahead(report.ahead, report.periods)
        self.moves.end(report)
        self.layout = report.layout or self.layout
        self.bursts += len(report.bursts)
        if report.tick > 2:  # counted as the replay goes: the store keeps only state.history_s of actions
            self.configures += sum(1 for a in self.store.actions(report.tick) if a["kind"] == "configure")
        for r in report.reach.values():
            if r.out and r.cause:
                self.out_of_reach[r.cause] = self.out_of_reach.get(r.cause, 0) + 1
        if not report.ok and report.error:
            self.errors.append(f"t={now:g}: {report.error}")
        if report.layout is not None:
            self.unplaced.update({u.workload: u.reason for u in report.layout.unplaced})
        return report

    def _cuts(self) -> dict[tuple[str, int], frozenset[tuple[str, int]]]:
        """The MIG cut each ready instance's GPUs run (sim/recuts.py); {} off MIG."""
        ready = {r.key for r in self.store.open_records() if r.state is State.READY}
        return running_cuts((key[0], servers) for key, (_, servers) in self.store.applied().items() if key in ready)

    def warm_start(self) -> int:
        """Two ticks at the trace's start with instant boots: the run begins with a converged fleet."""
        t0 = float(self.trace.times[0])
        self.tick(t0)
        self.provider.boot_all()
        self.tick(t0)
        return self.provider.launches

    def snapshot(self, at: float, commit: bool = False) -> dict[str, float]:
        """Capacity per workload: the servers assigned to ready instances (and to going-away ones,
        which serve until EC2 takes them), re-predicted as they are co-located on each GPU
        (simresult.feasible_capacity); an instance EC2 has taken by `at` serves nothing. A server
        counts the moment it is assigned (the simulator's instances are up at boot_s, their
        servers at once); in a handover (a resized server started beside the one it `replaces`)
        the successor takes over the old one's load at once too (rollout.loading), as reconcile
        judges it once it reports ready. `commit` adds the servers over budget to the run's count."""
        gpu_of = {t.name: t.gpu for t in self.policy.instance_types}
        ready = {
            r.key: r.instance_type
            for r in self.store.open_records()
            if r.state in SERVING and self.provider.alive(r.instance_id or "", at)
        }
        wanted = frozenset(s.agent_key() for _, s in self.layout.servers()) if self.layout else frozenset()
        gpus: dict[tuple[tuple[str, int], int], list[Server]] = {}
        for key, (_, servers) in self.store.applied().items():
            if key not in ready:
                continue
            for gi in {s.gpu_index for s in servers}:
                on = [s for s in servers if s.gpu_index == gi]
                for s in loading(on, {v.name for v in on}, wanted):
                    gpus.setdefault((key, gi), []).append(server_tuple(s))
        cap, broken = feasible_capacity(
            self.policy, ((gpu_of[ready[k]], v) for (k, _), v in gpus.items()), self.verdict
        )
        if commit:
            self.broken += broken
        return {w: cap.get(w, 0.0) for w in self.trace.names}

    def record(self, start: float, end: float) -> None:
        """The fleet as it stands now serves every trace row in [start, end), less the spot
        instances EC2 takes in between (the fleet is sampled again at each of those moments)."""
        cuts = [start, *self.provider.reclaims_between(start, end), end]
        for a, b in itertools.pairwise(cuts):
            self._record(a, b)

    def _record(self, start: float, end: float) -> None:
        lo = int(np.searchsorted(self.trace.times, start, "left"))
        hi = int(np.searchsorted(self.trace.times, end, "left"))
        cap = self.snapshot(start, commit=True)
        self.tick_times.append(start)
        for w in self.trace.names:
            self.tick_capacity[w].append(cap.get(w, 0.0))
            self.capacity[w][lo:hi] = cap.get(w, 0.0)
        self.cost[lo:hi] = self.provider.cost_per_hour(start)
        self.moves.record(lo, hi, cap)
        self.moves.bill(start, end, self.provider.lifetimes.values())

    def run(self, progress: Progress | None = None) -> tuple[int, int]:
        """Tick on the interval grid to the trace's end, plus the early ticks `igniter run` adds
        (TickReport.wake_at: when instances are due to finish booting, or settle_s after a tick
        whose changes wait on servers it started; at most MAX_WAKES per interval); returns warm-up
        launches and the end time. `progress` hears the fraction of the trace replayed after each
        interval."""
        t0, end = float(self.trace.times[0]), float(self.trace.times[0]) + self.trace.duration_s
        sc = self.policy.scaling
        check_ticks(self.trace, sc.interval_s)
        warm = self.warm_start()
        grid = [t0 + k * sc.interval_s for k in range(1, math.ceil(self.trace.duration_s / sc.interval_s))] + [end]
        self.record(t0, grid[0])
        for t, nxt in itertools.pairwise(grid):
            wake, extra = self._wake(t, self.tick(t).wake_at), 0
            while extra < MAX_WAKES:
                fast = self.watch.next_panic(t, nxt if wake is None else min(wake, nxt), self._panic)
                at = fast if fast is not None else wake
                if at is None or not t < at < nxt:
                    break
                self.record(t, at)
                t, extra = at, extra + 1
                wake = self._wake(t, self.tick(t, fast=fast is not None).wake_at)
            self.record(t, nxt)
            if progress is not None:
                progress((nxt - t0) / (end - t0))
        return warm, int(end)

    def _panic(self, rates: dict[str, float]) -> bool:
        """The fast path's test (core/fast_path.py) against the fleet as last recorded."""
        cap = {w: v[-1] for w, v in self.tick_capacity.items() if v}
        planned = dict(self.layout.rates) if self.layout is not None else {}
        coming = self.layout.capacity() if self.layout is not None else {}
        return bool(panicking(rates, cap, coming, planned, self.policy.scaling.fast_path.panic_ratio))

    def _wake(self, now: float, asked: float | None) -> float | None:
        """The early tick a tick asked for, or the one `igniter run`'s interruption poll makes
        when the next spot warning arrives (at the first poll after it, every
        scaling.spot.queue_poll_s), whichever comes first."""
        poll_s = self.policy.scaling.spot.queue_poll_s
        warning = self.provider.next_warning(now)
        if poll_s <= 0 or warning is None:
            return asked
        t0 = float(self.trace.times[0])
        seen = t0 + math.ceil((warning - t0) / poll_s - 1e-9) * poll_s
        return seen if asked is None else min(asked, seen)


def simulate(
    policy: Policy,
    trace: Trace,
    opts: SimOptions = SimOptions(),
    plan_fn: PlanFn | None = None,
    progress: Progress | None = None,
    plans: PlanMemo | None = None,
) -> SimResult:
    """Replay `trace` under `policy` with the options' strategy; see the module docstring.
    `progress` hears the fraction of the trace replayed (Replay.run); `plans`: plans shared with
    other replays (a `--compare`'s, memo.PlanMemo), else the replay keeps its own."""
    policy = with_overrides(policy, opts)
    base_fn = plan_fn or default_plan_fn(policy)
    peak = peak_plan(policy, trace, MemoPlanner(base_fn, policy, plans))
    if opts.strategy == "static-peak":
        return static_result(policy, trace, opts.describe(policy), peak)
    peak_cost = peak.cost_per_hour * trace.duration_s / 3600.0
    fn = reactive_planner if opts.strategy == "reactive" else base_fn
    with _quiet():
        replay = Replay(policy, trace, opts, fn, plans)
        warm, end = replay.run(progress)
    p = replay.provider
    sc = policy.scaling
    surge = [life for life in p.lifetimes.values() if is_surge_slot(life.slot)]
    surge_launches = len(surge)
    result = SimResult(
        label=opts.describe(policy),
        strategy=opts.strategy,
        planner="reactive" if opts.strategy == "reactive" else sc.planner,
        forecast=sc.forecast,
        headroom=sc.headroom,
        trace=trace,
        capacity=replay.capacity,
        cost_per_hour=replay.cost,
        cost_total_usd=p.cost_usd(end),
        static_peak_cost_usd=peak_cost,
        instance_hours=p.instance_hours(end),
        launches=p.launches - warm - surge_launches,  # the plan's own; surge is counted apart
        terminations=p.terminations - sum(1 for life in surge if life.end is not None),
        reconfigurations=replay.configures,
        ticks=replay.ticks,
        tick_errors=replay.errors,
        unplaced=replay.unplaced,
        broken_servers=replay.broken,
        tick_times=np.array(replay.tick_times),
        tick_capacity={w: np.array(v) for w, v in replay.tick_capacity.items()},
        tuning=replay.tuning,
        change_base=replay.moves.base,
        surge_instance_hours=sum(p.instance_hours(end, is_surge_slot).values()) + replay.moves.spare_hours,
        surge_cost_usd=p.cost_usd(end, is_surge_slot) + replay.moves.spare_cost_usd,
        surge_launches=surge_launches,
        recuts=replay.moves.recuts.count,
        recut_rows=replay.moves.recuts.rows,
        recut_surge_instance_hours=replay.moves.recuts.surge_hours,
        recut_surge_cost_usd=replay.moves.recuts.surge_cost_usd,
        recut_surge_instances=len(replay.moves.recuts.surge_slots),
        breaches=dict(replay.moves.breaches),
        burst_servers=replay.bursts,
        fast_ticks=replay.fast_ticks,
        warm_starts=p.warm_starts,
        warm_pool_cost_usd=p.pool_cost_usd(end),
        warm_pool_returns=p.returned,
        out_of_reach_ticks=replay.out_of_reach,
        tick_reads=opts.tick_reads,
    )
    return with_spot_figures(result, policy, trace, opts, plan_fn, p, end, plans)


def with_spot_figures(
    result: SimResult,
    policy: Policy,
    trace: Trace,
    opts: SimOptions,
    plan_fn: PlanFn | None,
    provider: SimProvider,
    end: float,
    plans: PlanMemo | None = None,
) -> SimResult:
    """A run that could buy spot gets its spot figures, and (with `on_demand_twin`) the cost and
    attainment of the same replay with spot switched off, the yardstick for what spot saves."""
    if not policy.buys_spot():
        return result
    result.spot_instance_hours = provider.spot_instance_hours(end)
    result.interruptions = provider.interruptions(end)
    if opts.on_demand_twin:
        twin = simulate(policy, trace, replace(opts, spot=False, label=None), plan_fn, plans=plans)
        result.cost_on_demand_only_usd = twin.cost_total_usd
        result.slo_attainment_on_demand_only = twin.attainment()
    return result


class _quiet:
    """The controller logs every tick at INFO; thousands of simulated ticks would drown the output."""

    def __enter__(self) -> None:
        self.levels = {n: logging.getLogger(n).level for n in QUIET}
        root = logging.getLogger()
        if root.level > logging.DEBUG:
            for n in QUIET:
                logging.getLogger(n).setLevel(logging.ERROR)

    def __exit__(self, *exc: object) -> None:
        for n, level in self.levels.items():
            logging.getLogger(n).setLevel(level)


def check_ticks(trace: Trace, interval_s: float) -> None:
    """A replay past MAX_SIM_TICKS is refused before it starts (two rows ten years apart would
    tick for hours): the error says how to shorten it."""
    ticks = math.ceil(trace.duration_s / interval_s)
    if ticks > MAX_SIM_TICKS:
        raise InputError(
            trace.source,
            "time_s",
            f"replaying it takes {ticks:,} ticks of {interval_s:g} s (at most {MAX_SIM_TICKS:,}); "
            "replay a window (--start-s, --end-s) or set a longer scaling.interval_s",
        )
