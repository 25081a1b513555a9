"""The result of one simulated run, and how capacity is judged.

Capacity is never taken from a planner's word: `feasible_capacity` re-predicts, with the
performance model, every GPU's servers as they are co-located, and a server whose predicted latency
breaks its budget (SLO / 2, the other half is the batch-filling wait) serves nothing within the SLO,
so it adds no capacity. That is how a plan from an interference-blind baseline (ffd, gslice) that
over-packs a GPU shows up as shortfall instead of as a cheap success.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from autoscaler.config.policy import Policy
from autoscaler.core.capacity import error_window
from autoscaler.core.rollout.colocation import GpuJudge, Server, judge
from autoscaler.sim.traces import Trace


def feasible_capacity(
    policy: Policy, gpus: Iterable[tuple[str, Sequence[Server]]], verdict: GpuJudge | None = None
) -> tuple[dict[str, float], int]:
    """Throughput per workload of the servers that meet their latency budget where they run, and
    how many servers do not. `gpus`: (GPU type, the servers co-located on one GPU of it);
    `verdict`: colocation.cached_judge(policy) for many calls (the same judgement, remembered)."""
    out: dict[str, float] = {}
    broken = 0
    for gpu, servers in gpus:
        answers = verdict(gpu, servers) if verdict is not None else judge(policy, gpu, servers)
        for (workload, *_), (ok, thr) in zip(servers, answers):
            if ok:
                out[workload] = out.get(workload, 0.0) + thr
            else:
                broken += 1
    return out, broken


@dataclass
class Tuning:
    """What the headroom step did over a run: per workload, the headroom each tick planned with,
    the capacity its layout planned (every server, booting or not: what a shortfall of ready
    capacity is measured against), and each forecast error sample (observed / the forecast
    boot_s earlier, minus 1).

    The series are arrays of doubles (`array('d')`, 8 bytes a value), not lists of float objects
    (32): a day of 1,000 workloads at four ticks a minute is 17 million values. Over six hours of
    that replay, the peak memory went from 762 to 653 MB; the CPU did not change (issue 50)."""

    names: Sequence[str]
    times: list[float] = field(default_factory=list)
    headroom: dict[str, array[float]] = field(default_factory=dict)
    planned: dict[str, array[float]] = field(default_factory=dict)
    errors: dict[str, array[float]] = field(default_factory=dict)
    ahead: dict[str, int] = field(default_factory=dict)  # forecast auto: ticks a seasonal rise raised the forecast
    periods: dict[str, list[float]] = field(default_factory=dict)  # forecast auto: the periods found at the last tick

    def add_ahead(self, ahead: dict[str, float], periods: dict[str, list[float]]) -> None:
        """Count the ticks `forecast: auto` planned ahead of a rise, per workload, and keep the periods."""
        for w in ahead:
            self.ahead[w] = self.ahead.get(w, 0) + 1
        self.periods.update(periods)

    def add(self, now: float, headroom: dict[str, float], errors: dict[str, float], planned: dict[str, float]) -> None:
        if not headroom:
            return
        self.times.append(now)
        for w in self.names:
            self.headroom.setdefault(w, array("d")).append(headroom.get(w, 0.0))
            self.planned.setdefault(w, array("d")).append(planned.get(w, 0.0))
            if w in errors:
                self.errors.setdefault(w, array("d")).append(errors[w])

    def final(self) -> dict[str, float]:
        """The headroom of the last tick, per workload."""
        return {w: round(v[-1], 4) for w, v in self.headroom.items() if v}

    def error_p99(self) -> dict[str, float | None]:
        """The 99th percentile of the forecast errors, per workload (None: never sampled)."""
        return {
            w: round(float(np.quantile(self.errors[w], 0.99)), 4) if self.errors.get(w) else None for w in self.names
        }

    def error_quantiles(self) -> dict[str, dict[str, float]]:
        """The forecast errors' quantiles over the run, per workload, as /v1/headroom's last hour
        (core/capacity/error_window.py: a value seen, each tick's sample counting alike; {}: never
        sampled)."""
        out: dict[str, dict[str, float]] = {}
        for w in self.names:
            values = error_window.weighted_quantiles([(e, 1.0) for e in self.errors.get(w, [])], error_window.QUANTILES)
            out[w] = {error_window.label(q): round(v, 4) for q, v in zip(error_window.QUANTILES, values, strict=False)}
        return out


@dataclass(kw_only=True)
class SimResult:
    """One replay: per-row rate and capacity, cost over time, and the fleet's bill."""

    label: str
    strategy: str
    planner: str
    forecast: str
    headroom: float | str
    trace: Trace
    capacity: dict[str, np.ndarray]
    cost_per_hour: np.ndarray
    cost_total_usd: float
    static_peak_cost_usd: float
    instance_hours: dict[str, float]
    launches: int = 0
    terminations: int = 0
    reconfigurations: int = 0
    ticks: int = 0
    tick_errors: list[str] = field(default_factory=list)
    unplaced: dict[str, str] = field(default_factory=dict)
    broken_servers: int = 0  # server-ticks predicted to miss their latency budget
    tick_times: np.ndarray | None = None  # when the fleet was sampled (after each tick)
    tick_capacity: dict[str, np.ndarray] | None = None  # capacity per workload at those times
    tuning: Tuning | None = None  # headroom per tick and forecast errors (None: static peak)
    spot_instance_hours: float | None = None  # None: the run could not buy spot
    interruptions: int | None = None  # spot interruption warnings while the fleet held the instance
    cost_on_demand_only_usd: float | None = None  # the same replay with spot switched off
    slo_attainment_on_demand_only: float | None = None
    change_base: dict[str, np.ndarray] | None = None  # capacity before the change under way per row (NaN: at rest)
    surge_instance_hours: float = 0.0
    surge_cost_usd: float = 0.0
    surge_launches: int = 0
    breaches: dict[str, int] = field(default_factory=dict)  # ticks a policy limit broke the invariant, by limit
    recuts: int = 0  # MIG GPUs asked for another cut while running one (sim/recuts.py)
    recut_rows: np.ndarray | None = None  # rows of a change that re-cuts a GPU
    recut_surge_instance_hours: float = 0.0  # surge alive while a re-cut was under way
    recut_surge_cost_usd: float = 0.0
    recut_surge_instances: int = 0  # surge instances (and spares) that served while a re-cut was under way
    burst_servers: int = 0  # stand-ins started in free share (scaling.burst)
    fast_ticks: int = 0  # ticks the fast path ran between regular ones (scaling.fast_path)
    warm_starts: int = 0  # launches that started a stopped warm-pool member (scaling.warm_pool)
    warm_pool_cost_usd: float = 0.0  # the pool's own bill: members warming up, and stopped (in cost_total_usd)
    warm_pool_returns: int = 0  # retiring instances stopped into the pool instead of terminated (reuse_on_scale_in)
    out_of_reach_ticks: dict[str, int] = field(default_factory=dict)  # workload-ticks out of reach, by cause
    tick_reads: str = "row"  # what a tick's rate source reads (engine.SimOptions.tick_reads)

    def outage_steps(self) -> int:
        """(row, workload) pairs with traffic and no capacity at all."""
        return sum(int(((self.trace.rates[w] > 0) & (self.capacity[w] <= 1e-9)).sum()) for w in self.trace.names)

    def reconfig_short_steps(self, rows: np.ndarray | None = None) -> int:
        """Short (row, workload) pairs that the capacity before the change under way would have
        covered: shortfalls a change of plan caused, not the forecast; only among `rows` if given."""
        if self.change_base is None:
            return 0
        total = 0
        for w in self.trace.names:
            rate, base = self.trace.rates[w], self.change_base[w]
            short = self.capacity[w] < rate - 1e-9
            caused = short & ~np.isnan(base) & (rate <= np.nan_to_num(base, nan=-1.0) + 1e-9)
            total += int((caused if rows is None else caused & rows).sum())
        return total

    def recut_short_steps(self) -> int:
        """The reconfig_short_steps of changes that re-cut a MIG GPU."""
        return 0 if self.recut_rows is None else self.reconfig_short_steps(self.recut_rows)

    def attainment(self) -> float:
        """Fraction of (row, workload) pairs whose capacity covers the rate."""
        ok = sum(int((self.capacity[w] >= self.trace.rates[w] - 1e-9).sum()) for w in self.trace.names)
        return ok / (len(self.trace.times) * len(self.trace.names))

    def attainment_time(self) -> float:
        """Fraction of workload-time whose capacity covers the rate, the fleet sampled after every
        tick (finer than `attainment` when rows are longer than the interval)."""
        if self.tick_times is None or self.tick_capacity is None:
            return self.attainment()
        times = self.trace.times
        end = float(times[0]) + self.trace.duration_s
        edges = np.unique(np.concatenate([times, self.tick_times, [end]]))
        edges = edges[edges <= end]
        starts, widths = edges[:-1], np.diff(edges)
        ri = np.searchsorted(times, starts, "right") - 1
        ci = np.maximum(np.searchsorted(self.tick_times, starts, "right") - 1, 0)
        covered = sum(
            float(widths[self.tick_capacity[w][ci] >= self.trace.rates[w][ri] - 1e-9].sum()) for w in self.trace.names
        )
        return covered / (float(widths.sum()) * len(self.trace.names))

    def worst(self) -> dict[str, Any] | None:
        """The (row, workload) with the largest unserved fraction of its rate, or None."""
        best: dict[str, Any] | None = None
        for w in self.trace.names:
            rate, cap = self.trace.rates[w], self.capacity[w]
            gap = np.where(rate > 0, (rate - cap) / np.where(rate > 0, rate, 1.0), 0.0)
            k = int(np.argmax(gap))
            if gap[k] > 1e-12 and (best is None or gap[k] > best["fraction"]):
                best = {
                    "workload": w,
                    "time_s": float(self.trace.times[k]),
                    "rate_rps": round(float(rate[k]), 3),
                    "capacity_rps": round(float(cap[k]), 3),
                    "fraction": round(float(gap[k]), 6),
                }
        return best

    def summary(self) -> dict[str, Any]:
        """The `--json` document (see docs/simulate.md for every field)."""
        worst = self.worst()
        short = sum(int((self.capacity[w] < self.trace.rates[w] - 1e-9).sum()) for w in self.trace.names)
        return {
            "label": self.label,
            "strategy": self.strategy,
            "planner": self.planner,
            "forecast": self.forecast,
            "headroom": self.headroom,
            "headroom_final": self.tuning.final() if self.tuning else {},
            "forecast_error_p99": self.tuning.error_p99() if self.tuning else {},
            "forecast_ahead_ticks": {w: self.tuning.ahead.get(w, 0) for w in self.tuning.names} if self.tuning else {},
            "forecast_error_quantiles": self.tuning.error_quantiles() if self.tuning else {},
            "forecast_periods_s": {w: [round(p, 1) for p in self.tuning.periods.get(w, [])] for w in self.tuning.names}
            if self.tuning
            else {},
            "steps": len(self.trace.times),
            "step_s": self.trace.step_s,
            "duration_s": self.trace.duration_s,
            "ticks": self.ticks,
            "cost_total_usd": round(self.cost_total_usd, 2),
            "static_peak_cost_usd": round(self.static_peak_cost_usd, 2),
            "cost_vs_static_peak": round(self.cost_total_usd / self.static_peak_cost_usd, 4)
            if self.static_peak_cost_usd > 0
            else None,
            "slo_attainment": round(self.attainment(), 6),
            "slo_attainment_time": round(self.attainment_time(), 6),
            "shortfall_steps": short,
            "worst_shortfall": worst["fraction"] if worst else 0.0,
            "worst_shortfall_at": worst,
            "scaling_actions": self.launches + self.terminations,
            "launches": self.launches,
            "terminations": self.terminations,
            "reconfigurations": self.reconfigurations,
            "instance_hours": {k: round(v, 3) for k, v in sorted(self.instance_hours.items())},
            "unplaced": dict(self.unplaced),
            "servers_over_budget": self.broken_servers,
            "outage_steps": self.outage_steps(),
            "reconfig_short_steps": self.reconfig_short_steps(),
            "surge_instance_hours": round(self.surge_instance_hours, 3),
            "surge_cost_usd": round(self.surge_cost_usd, 2),
            "surge_cost_fraction": round(self.surge_cost_usd / self.cost_total_usd, 6)
            if self.cost_total_usd > 0
            else 0.0,
            "surge_launches": self.surge_launches,
            "recuts": self.recuts,
            "recut_short_steps": self.recut_short_steps(),
            "recut_surge_instance_hours": round(self.recut_surge_instance_hours, 3),
            "recut_surge_cost_usd": round(self.recut_surge_cost_usd, 2),
            "recut_surge_instances": self.recut_surge_instances,
            "invariant_breaches": dict(self.breaches),
            "fast_ticks": self.fast_ticks,
            "burst_servers": self.burst_servers,
            "warm_starts": self.warm_starts,
            "warm_pool_cost_usd": round(self.warm_pool_cost_usd, 2),
            "warm_pool_returns": self.warm_pool_returns,
            "out_of_reach_ticks": dict(sorted(self.out_of_reach_ticks.items())),
            "tick_reads": self.tick_reads,
            "tick_errors": len(self.tick_errors),
            "first_tick_error": self.tick_errors[0] if self.tick_errors else None,
            **self._spot_summary(),
        }

    def _spot_summary(self) -> dict[str, Any]:
        """The spot fields, only for a run that could buy spot (docs/simulate.md)."""
        if self.spot_instance_hours is None:
            return {}
        out: dict[str, Any] = {
            "spot_instance_hours": round(self.spot_instance_hours, 3),
            "interruptions": self.interruptions,
        }
        if self.cost_on_demand_only_usd is not None:
            od, att = self.cost_on_demand_only_usd, self.slo_attainment_on_demand_only
            out["cost_on_demand_only_usd"] = round(od, 2)
            out["slo_attainment_on_demand_only"] = round(att, 6) if att is not None else None
            out["cost_vs_on_demand_only"] = round(self.cost_total_usd / od, 4) if od > 0 else None
        return out
