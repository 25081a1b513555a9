"""The controller's forecast and headroom step: observed rates in, planned rates out (core/capacity/forecast.py
and core/capacity/headroom.py decide).

Kept out of controller.py so the tick stays a list of named steps. The estimator runs whatever the
policy's headroom: with a number it only measures (errors, attainment) for the status endpoint;
with `auto` its headroom is the one planned with.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from autoscaler.config.policy import Policy
from autoscaler.core.capacity.error_window import Recent, WindowConfig, Windows
from autoscaler.core.capacity.forecast import (
    Columns,
    ForecastConfig,
    forecast,
    forecast_columns,
    ramp_columns,
    season_windows,
)
from autoscaler.core.capacity.headroom import HeadroomConfig, HeadroomState, TickInput, update
from autoscaler.core.capacity.periods import Fit, Period, PeriodConfig, decompose, refit_after
from autoscaler.core.fleet.lifecycle import LIVE, State
from autoscaler.loop.state.store import Store
from autoscaler.loop.tick.records import Observation
from autoscaler.transport.base import AgentStatus


def headroom_config(policy: Policy) -> HeadroomConfig:
    """The estimator's constants for this policy: its target, boot time, forecast horizon, how long
    an error counts (headroom_window_s), how fast the quantile follows measured attainment
    (headroom_feedback_s), and the burst floor's window (the scale-down delay: the
    hold on scale-in keeps plans that long, the floor keeps the busiest rate seen that long)."""
    sc = policy.scaling
    return HeadroomConfig(
        target=sc.target_attainment,
        lead_s=sc.boot_s,
        horizon_s=sc.boot_s + sc.interval_s,
        window_s=sc.headroom_window_s,
        feedback_s=sc.headroom_feedback_s,
        burst_window_s=sc.scale_down_delay_s,
    )


@dataclass(frozen=True)
class Tuned:
    """The step's answer: the estimator's new state (for ControllerState.headroom), planned rates
    (base * (1 + headroom)), the headroom per workload, the
    forecast errors this tick measured (observed / the newest base forecast at least boot_s old,
    minus 1), the attainment measured over the last hour, the burst floor, the quantile of the
    errors the headroom was sized at (the target, moved by the feedback; core/capacity/headroom.py)
    and the ramp floor (core/capacity/forecast.py: ramp)."""

    state: HeadroomState
    planned: dict[str, float | None]
    headroom: dict[str, float]
    errors: dict[str, float] = field(default_factory=dict)
    attainment: dict[str, float | None] = field(default_factory=dict)
    floor: dict[str, float] = field(default_factory=dict)
    level: dict[str, float] = field(default_factory=dict)
    ramp: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Seen:
    """What this tick saw, per workload: fresh rates, base forecasts (before headroom), the ready
    capacity that carried the rates, the rates the layout in force was planned for, the
    busiest rate since the previous read where the source tells it (rates/base.py: Peaked), and
    where a sustained rise would take each rate by the end of the horizon (the ramp floor)."""

    observed: Mapping[str, float]
    base: Mapping[str, float | None]
    capacity: Mapping[str, float]
    held: Mapping[str, float]
    peak: Mapping[str, float] = field(default_factory=dict)
    ramp: Mapping[str, float] = field(default_factory=dict)


def tune(state: HeadroomState, policy: Policy, now: float, seen: Seen) -> Tuned:
    """Update the estimator with this tick, then size each workload's headroom: planned is
    base * (1 + headroom), never below the burst floor (core/capacity/headroom.py) nor the ramp
    floor (core/capacity/forecast.py), both in auto mode only: a fixed headroom plans what it says."""
    cfg = headroom_config(policy)
    base = {w.name: seen.base.get(w.name) for w in policy.workloads}
    inp = TickInput(
        now=now,
        interval_s=policy.scaling.interval_s,
        observed=seen.observed,
        forecast=base,
        floor={w.name: float(w.min_rate_rps) for w in policy.workloads},
        capacity=seen.capacity,
        held=seen.held,
        peak=seen.peak,
        fixed=None if policy.scaling.headroom == "auto" else float(policy.scaling.headroom),
    )
    step = update(state, inp, cfg)
    rise = {w: seen.ramp.get(w, 0.0) if inp.fixed is None else 0.0 for w in base}
    planned = {
        w: None if f is None else max(f * (1.0 + step.headroom[w]), step.floor[w], rise[w]) for w, f in base.items()
    }
    attained = {w: step.state.attainment(w, now) for w in base}
    level = {w: step.state.level(w, cfg) for w in base} if inp.fixed is None else {}
    return Tuned(step.state, planned, step.headroom, step.errors, attained, step.floor, level, rise)


def ready_capacity(store: Store, statuses: Mapping[str, AgentStatus], contact: bool) -> dict[str, float]:
    """Predicted throughput per workload of the servers ready now: the capacity that carried the
    rate just observed. Contacted agents say which servers are ready; otherwise every server
    assigned to a ready instance counts (the simulator's and `transport: none`'s view)."""
    live = {r.key: r for r in store.open_records() if r.state in LIVE}
    out: dict[str, float] = {}
    for key, (_, servers) in store.applied().items():
        rec = live.get(key)
        if rec is None:
            continue
        names = statuses[rec.slot].ready_names() if contact and rec.slot in statuses else set()
        for s in servers:
            if (s.name in names) if contact else rec.state is State.READY:
                out[s.workload] = out.get(s.workload, 0.0) + s.predicted_throughput_rps
    return out


@dataclass(frozen=True)
class Planned:
    """The rate to plan for per workload, and the headroom step that sized it; with `forecast:
    auto`, each workload's periods found and the seasonal rise that raised its forecast this tick
    (a workload planned ahead of a burst: `ahead`), and the quantiles of its forecast errors over
    the last hour (core/capacity/error_window.py)."""

    rates: dict[str, float]
    tuned: Tuned
    periods: dict[str, tuple[Period, ...]] = field(default_factory=dict)
    ahead: dict[str, float] = field(default_factory=dict)
    recent_errors: Recent = field(default_factory=Recent)


@dataclass(frozen=True, slots=True)
class Held:
    """One workload's fit and its schedule: made at `at` over the history from `since` (its oldest
    point; `at` where it had none), due again at `due` (core/capacity/periods.py: refit_after)."""

    at: float
    since: float
    due: float
    fit: Fit


# The period fits per store (one per controller): a fit is a pure function of the history up to
# its time and the settings it was made with, kept until its `due` time passes (a restart refits
# on its first tick), or until the settings they were made with change (a reloaded policy's
# interval, boot_s, seasons, season_s or onset_spread_s takes effect on the next tick, not up to an
# hour later).
Settings = tuple[PeriodConfig, float, float]  # the period finder's config, the horizon, the span read
_FITS: weakref.WeakKeyDictionary[Store, tuple[Settings, dict[str, Held]]] = weakref.WeakKeyDictionary()


# The recent forecast errors per store, as the fits: the window starts afresh with the process
# (an hour of samples is all it shows), which keeps them out of the state file saved every tick.
_ERRORS: weakref.WeakKeyDictionary[Store, Windows] = weakref.WeakKeyDictionary()


def recent_errors(policy: Policy, store: Store, now: float, errors: Mapping[str, float]) -> Recent:
    """Add this tick's forecast errors to the store's windows (the policy's workloads only): their
    quantiles over the last hour, when asked (core/capacity/error_window.py)."""
    sc = policy.scaling
    size = min(240, math.ceil(1.125 * 3600.0 / sc.interval_s))  # the hour's ticks, and room for event ticks
    cfg = WindowConfig(max_gap_s=sc.boot_s + sc.interval_s, first_s=sc.interval_s, size=size)
    windows = _ERRORS.get(store, Windows()).keep([w.name for w in policy.workloads], cfg).update(now, errors, cfg)
    _ERRORS[store] = windows
    return Recent(windows, now, cfg)


def period_config(policy: Policy) -> PeriodConfig:
    """The period finder's grid (the tick interval, at least a minute) and how far it widens a
    burst's window for its onsets' spread (`scaling.onset_spread_s`)."""
    sc = policy.scaling
    return PeriodConfig(step_s=max(60.0, sc.interval_s), max_spread_s=sc.onset_spread_s)


def history_window_s(policy: Policy) -> float:
    """How far back a refit reads the rate history: max(1 day, seasons * season_s)."""
    return max(86400.0, policy.scaling.seasons * policy.scaling.season_s)


def period_fits(policy: Policy, store: Store, now: float) -> dict[str, Fit]:
    """Each workload's periods and seasonal rise (core/capacity/periods.py), refit from the last
    max(1 day, seasons * season_s) of the store's history when its fit is due (refit_after: often
    while its history is young, hourly once it is old); {} unless the policy's forecast is `auto`."""
    sc = policy.scaling
    if sc.forecast != "auto":
        return {}
    cfg = period_config(policy)
    settings: Settings = (cfg, sc.boot_s + sc.interval_s, sc.seasons * sc.season_s)  # what a refit reads
    made_with, held = _FITS.get(store, (settings, {}))
    if made_with != settings:
        held = {}
    names = [w.name for w in policy.workloads]
    due = [w for w in names if refit_due(held.get(w), now)]
    if due:
        held = {w: h for w, h in held.items() if w in names} | refits(store, now, due, held, policy, cfg)
        _FITS[store] = (settings, held)
    return {w: held[w].fit for w in names}


def refit_due(held: Held | None, now: float) -> bool:
    """A workload's fit is made again when it has none, when its `due` time has come, or when the
    clock reads earlier than the fit (a clock set back, a replay restarted)."""
    return held is None or not held.at <= now < held.due


def replay_fits(
    policy: Policy, reads: Iterable[tuple[float, Mapping[str, float]]]
) -> Iterator[tuple[float, dict[str, Fit]]]:
    """The fits `forecast: auto` holds at each tick of a replay, made as the controller makes them:
    period_fits on a fresh in-memory Store, each tick's rates added after its fits (Controller.forecast:
    planned_rates, then add_rates), so a refit at `now` sees the ticks before it and the refits
    come on the controller's schedule (refit_after). `reads`: (tick time, fresh rates), in order.
    `igniter forecast` replays a trace through this; the policy's forecast is taken as `auto`."""
    auto = policy.model_copy(update={"scaling": policy.scaling.model_copy(update={"forecast": "auto"})})
    store = Store(":memory:")
    for now, rates in reads:
        yield now, period_fits(auto, store, now)
        # the refits read only the last max(1 day, seasons * season_s): what is kept beyond changes nothing
        store.add_rates(now, rates, rates, keep_s=math.inf)


def refits(
    store: Store, now: float, due: list[str], held: Mapping[str, Held], policy: Policy, cfg: PeriodConfig
) -> dict[str, Held]:
    """The due workloads refit: the store read from the oldest point any of them had (a young
    workload's refits read its own short history, not the day), the whole span for one never fit
    or fit at a later time than now (a clock set back)."""
    sc = policy.scaling
    start = now - history_window_s(policy)
    since = max(start, min(held[w].since if w in held and held[w].at <= now else start for w in due))
    history = store.rate_history(since)
    out: dict[str, Held] = {}
    for w in due:
        pts = history.get(w, [])
        first = pts[0][0] if pts else now
        fit = decompose(pts, now, sc.boot_s + sc.interval_s, cfg)
        out[w] = Held(now, first, now + refit_after(now - first, cfg), fit)
    return out


def planned_rates(policy: Policy, store: Store, headroom: HeadroomState, obs: Observation, contact: bool) -> Planned:
    """Forecast each workload from the store's rate history (and its past seasons), add the
    headroom (tune), and fall back where data is missing: to the current layout's rate, else the
    policy's rate_rps; no rate sits below the workload's min_rate_rps (the planner's floor)."""
    sc = policy.scaling
    cfg = ForecastConfig(
        sc.forecast,
        sc.boot_s + sc.interval_s,
        0.0,  # the base forecast: the headroom step (tune) multiplies it
        tau_s=4 * sc.interval_s,
        trend_tau_s=10 * sc.interval_s,
        season_s=sc.season_s,
        seasons=sc.seasons,
    )
    window = store.rate_window(obs.now - max(3600.0, 20 * sc.interval_s))
    read = dict(zip(window.names, window.read(), strict=True))
    rates = obs.reading.rates
    # this tick's rate: where fresh, or where the window holds none (a stale rate is all there is)
    cols = window.with_row(obs.now, {w: v for w, v in rates.items() if w in obs.reading.fresh or not read.get(w)})
    keys = [w for w in cols.names if read.get(w) or w in rates]  # the workloads with a point
    past: dict[str, list[tuple[float, float]]] = {}
    for lo, hi in season_windows(obs.now, cfg):
        for w, pts in store.rate_history(lo, hi).items():
            past.setdefault(w, []).extend(pts)
    current = store.current_layout()
    fallback = dict(current.rates) if current else {}
    capacity = ready_capacity(store, obs.statuses, contact)
    every = ramp_columns(cols, cfg.horizon_s, sc.ramp_reads)
    rises = {w: every[w] for w in keys}
    fits = period_fits(policy, store, obs.now)
    seasonal = {w: f.rise(obs.now) for w, f in fits.items() if f.periods}
    found = forecast_columns(cols, cfg, past, seasonal)
    base = {w: found[w] for w in keys}
    ahead = {w: r for w, r in seasonal.items() if r > 0 and (base.get(w) or 0.0) > _without(cols, cfg, past, w)}
    seen = Seen(obs.reading.fresh, base, capacity, fallback, obs.reading.peaks, rises)
    tuned = tune(headroom, policy, obs.now, seen)
    planned = {w.name: _first(tuned.planned.get(w.name), fallback.get(w.name), w.rate_rps) for w in policy.workloads}
    for w in obs.reading.missing:
        planned[w] = max(planned[w], fallback.get(w, 0.0))
    for wl in policy.workloads:
        planned[wl.name] = max(planned[wl.name], float(wl.min_rate_rps))
    recent = recent_errors(policy, store, obs.now, tuned.errors)
    return Planned(planned, tuned, {w: f.periods for w, f in fits.items()}, ahead, recent)


def _without(cols: Columns, cfg: ForecastConfig, past: Mapping[str, list[tuple[float, float]]], w: str) -> float:
    """The forecast with no seasonal rise (`seasonal`'s): what `auto` raised, where it did."""
    points = cols.points(cols.names.index(w)) if w in cols.names else []
    return forecast(points, cfg, past.get(w, ())) or 0.0


def _first(*values: float | None) -> float:
    return next(v for v in values if v is not None)
