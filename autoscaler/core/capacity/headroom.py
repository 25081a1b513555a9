"""Headroom sized from each workload's own forecast errors, for a stated attainment target. Pure.

Why: a fixed headroom is a guess that is too much for a smooth workload and too little for a bursty
one. With `scaling.headroom: auto` the controller asks instead how far above its forecast each
workload's traffic has recently gone, and plans for enough of that to cover the target fraction
of the time (`scaling.target_attainment`, default 0.999).

The estimator, per workload, every tick (time and rates are passed in):

- Sample. Judge the newest plan at least boot_s old: its new instances are the newest that can
  be serving now (a later plan's are still booting). The sample is x = observed rate / ref, where
  ref is that plan's base forecast (before headroom), or, where higher, the rate its layout was
  planned for divided by 1 + its headroom: the hold on scale-in keeps a layout at the rates it
  was planned for until a cheaper plan has held for scale_down_delay_s, and that capacity is
  there (the lower of then and now counts: a scale-in since then removed it). Covered iff
  x <= 1 + headroom, so x - 1 is the headroom that would have sufficed. The capacity the
  planner's rounding adds is not counted (it does not grow with the headroom), nor is ready
  capacity below the plan (still booting, or lost in a move: not the headroom's fault). The plan
  is never below the workload's floor (`min_rate_rps`), so a rate at or under it needs no
  headroom (x = 0), and where the forecast was so far under the floor that even the cap could
  not have lifted the plan above it (traffic returning after a quiet spell, a forecast of 0), the
  miss is the floor's, not the headroom's: nothing is sampled, rather than raising every later
  plan to the cap for nothing.
- Window. Samples go into a histogram of x over geometric bins, each weighted by the seconds since
  the workload's previous sample (so the quantile is a fraction of time, whatever the tick rate),
  and every weight decays with time constant `window_s`. A burst therefore raises the headroom on
  the tick that sees it (its weight exceeds the 0.1 % a 0.999 target leaves once the window is
  full) and stops counting a few window_s after the traffic calmed down.
- Headroom. The target quantile of x, minus 1 (the bin's upper edge: rounding errs on the side of
  capacity), clamped to [floor, cap]; until `warmup_s` seconds of samples are in, at least
  `cold_start`. A quantile beyond the cap's bin is the cap.
- Missing rate data adds nothing and decays nothing: the histogram, so the headroom, stays as it
  was (a quantile is unchanged by scaling every weight alike, and no weight is added).

- Burst floor. Attainment is scored on the rows a rate source's mean smooths away: a workload
  whose traffic comes in bursts of a few seconds (the Azure hour: 70 % of its code seconds are
  idle, its busiest seconds 20 times its 30 s mean) is short in every burst however well its mean
  is forecast. So each tick also notes the busiest rate the source saw since its previous read
  (its peak: the busiest second where the source can tell, as the gateway's can, else the rate it
  read), a sample is judged on that peak, and, in auto mode, no workload is planned below the
  busiest peak of the last `burst_window_s` (scaling.scale_down_delay_s). That is the
  stabilization window of Kubernetes' HPA (scale in only to the highest recommendation of the
  last 5 minutes) applied to the rate that is scored: a burst that came back within the window is
  covered the next time, and the floor lets go one window after the last burst, as the hold on
  scale-in does. Where rows are no finer than the tick, the peak is the rate read, and the floor
  is the busiest read of the window.

- Feedback. The histogram leaves out capacity the headroom does not size (the planner's
  rounding to whole servers, the hold on scale-in above what its sample counts, the burst floor),
  so the target quantile of x alone over-covers wherever those add much. The quantile's level
  therefore adapts to what capacity actually covered, as adaptive conformal inference does (Gibbs
  and Candes, "Adaptive Conformal Inference Under Distribution Shift", NeurIPS 2021): the
  allowance a (the share of time the quantile leaves uncovered, 1 - target to start) moves by
  dt / feedback_s x ((1 - target) - miss) with each sample whose ready capacity is known, where
  miss is 1 when that capacity fell short of the peak. Covered time raises it slowly (lower
  headroom), a short second lowers it target / (1 - target) times as fast (999 times at 0.999),
  so the time-average of misses is pulled to 1 - target where capacity over-covers. It is held
  between 1 - target and allowance_cap x (1 - target), and only moves once the warm-up is over:
  the feedback only ever lowers the quantile, where capacity covered more than the target asks.
  Misses the headroom did not cause (a jump while an instance boots) would otherwise push later
  plans to the histogram's top, which costs the most and, measured, covered no more.

The same state measures attainment: the fraction of the last hour (5-minute buckets) in which the
capacity that was ready covered the observed rate (core/capacity/coverage.py, with the feedback's step);
the status endpoint exports both.

`HeadroomState` is one small frozen value per controller (about 100 numbers per workload) with
`to_json`/`from_json`, carried between ticks by the controller's store.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from autoscaler.core.capacity import coverage, headroom_codec

BINS = 48  # geometric bins between ratio 1 and 1 + cap (about 1.5 % wide for cap 1.0)
MIN_RPS = 1e-6  # a reference rate below this is none: no multiple of it covers anything


def _repacked(state: HeadroomState, data: Mapping[str, Any] | None, known: Mapping[str, WorkloadErrors] | None) -> None:
    """`state`, read from the last `packed` answer with every workload known, packs to that answer
    again (each workload is the very record whose string it was): kept as its answer, so the
    state a save reads back (loop/state/controller_state.py Decoded) saves again without packing."""
    last = _LastPacked.kept  # read once: another thread (the status server) may pack meanwhile
    if last is None or data is None or known is None:
        return
    out, was = last[1]
    if data is out and known is was and all(isinstance(d, str) and d in was for d in out.values()):
        _LastPacked.kept = (state, (out, was))


class _LastPacked:
    """HeadroomState.packed's last answer, by the state's identity (the state is frozen, and
    neither its mappings nor the answer are changed by anyone: a new tick's update makes new
    ones); one attribute, read and replaced whole."""

    kept: tuple[HeadroomState, tuple[dict[str, Any], dict[str, WorkloadErrors]]] | None = None


_FIELDS = ("forecasts", "weights", "observed_at", "samples_s", "attain", "peaks", "allowance")  # to_json's order


@dataclass(frozen=True, slots=True, kw_only=True)
class HeadroomConfig:
    """The estimator's constants; docs/operations.md gives each one's default and why."""

    target: float = 0.999
    lead_s: float = 180.0  # boot_s: a sample judges the newest forecast at least this old
    horizon_s: float = 210.0  # boot_s + interval_s: the most seconds one sample weighs
    window_s: float = 6 * 3600.0  # decay time constant of the error histogram
    warmup_s: float = 3600.0  # seconds of samples before the histogram alone decides
    cold_start: float = 0.5  # the least headroom until then
    floor: float = 0.0
    cap: float = 1.0
    burst_window_s: float = 600.0  # scale_down_delay_s: plan for the busiest peak this recent (0: off)
    feedback_s: float = 6 * 3600.0  # the allowance's time constant (0: the quantile stays at target)
    allowance_cap: float = 20.0  # the most the allowance grows, in multiples of 1 - target

    def edges(self) -> tuple[float, ...]:
        """Upper ratio edge of each bin: bin 0 is x <= 1, bin k <= (1 + cap)^(k / BINS)."""
        return _edges(self.cap)


@functools.lru_cache(maxsize=16)
def _edges(cap: float) -> tuple[float, ...]:
    """HeadroomConfig.edges, worked out once per cap (every workload's headroom reads them each
    tick: 49 powers a workload were a fifth of the estimator's tick, issue 50)."""
    return (1.0, *((1.0 + cap) ** (k / BINS) for k in range(1, BINS + 1)))


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkloadErrors:
    """One workload's estimator: recent base forecasts (to judge once boot_s old), the decayed
    histogram of errors (BINS + 2 weights: covered, the bins, beyond the cap), when it last saw a
    rate, and attainment buckets (start, covered seconds, seconds)."""

    forecasts: tuple[Plan, ...] = ()  # (time, base forecast, headroom, rate its layout planned)
    weights: tuple[float, ...] = ()
    observed_at: float | None = None  # the latest tick with a fresh rate
    samples_s: float = 0.0  # undecayed seconds of samples (for the warm-up)
    attain: tuple[coverage.Bucket, ...] = ()
    peaks: tuple[tuple[float, float], ...] = ()  # (time, busiest rate since the previous read)
    allowance: float | None = None  # the feedback's share of time left uncovered (None: 1 - target)

    def total(self) -> float:
        return sum(self.weights)


@dataclass(frozen=True, slots=True)
class HeadroomState:
    """Every workload's estimator (see the module docstring); JSON round-trips exactly."""

    workloads: Mapping[str, WorkloadErrors] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """For json.dumps: each workload's numbers packed in one string (core/capacity/
        headroom_codec.py: formatting ~210 floats a workload as JSON cost 0.05 s a tick at 1,000
        workloads, issue 50); one that will not pack goes as JSON arrays, as before (its tuples
        as they are: json.dumps writes a tuple as the array a list gives)."""
        return self.packed()[0]

    def packed(self) -> tuple[dict[str, Any], dict[str, WorkloadErrors]]:
        """to_json's object, and the workloads whose strings unpack as themselves (every value a
        float, every sequence a tuple: headroom_codec.pack) by their strings: given back to
        from_json as `known`, a save reads back what it wrote (loop/state/controller_state.py
        Decoded) without unpacking it (~15 ms a tick at 1,000 workloads). Made once per state
        (the last one kept): a tick that does not forecast saves the state it read, the very
        object (scaling.plan_on: interval), and packing 1,000 workloads took 25 ms."""
        last = _LastPacked.kept
        if last is not None and last[0] is self:
            return last[1]
        out: dict[str, Any] = {}
        known: dict[str, WorkloadErrors] = {}
        for w, e in sorted(self.workloads.items()):
            fields = (e.forecasts, e.weights, e.observed_at, e.samples_s, e.attain, e.peaks, e.allowance)
            packed = headroom_codec.pack(*fields)
            if packed is None:
                out[w] = dict(zip(_FIELDS, fields, strict=True))
                continue
            out[w] = packed[0]
            if packed[1]:
                known[packed[0]] = e
        _LastPacked.kept = (self, (out, known))
        return out, known

    @classmethod
    def from_json(
        cls, data: Mapping[str, Any] | None, known: Mapping[str, WorkloadErrors] | None = None
    ) -> HeadroomState:
        """The state saved by to_json, a workload packed (headroom_codec) or as JSON arrays (as
        every state written before was); anything unreadable starts that workload afresh.
        `known`: packed's strings that need no unpacking, by string (whatever holds the string
        is what unpacking it gives, whoever packed it). The
        numbers are converted by map and list comprehensions, not generators (a save decodes
        the whole state once a tick: ~14 -> ~7 ms at 1,000 workloads, issue 50)."""
        out: dict[str, WorkloadErrors] = {}
        for w, d in (data or {}).items():
            try:
                if isinstance(d, str):
                    out[w] = (known or {}).get(d) or WorkloadErrors(**headroom_codec.unpack(d))
                    continue
                out[w] = WorkloadErrors(
                    forecasts=tuple(map(_plan, d.get("forecasts", ()))),
                    weights=tuple(map(float, d.get("weights", ()))),
                    observed_at=None if d.get("observed_at") is None else float(d["observed_at"]),
                    samples_s=float(d.get("samples_s", 0.0)),
                    attain=tuple([(float(a), float(b), float(c)) for a, b, c in d.get("attain", ())]),
                    peaks=tuple([(float(t), float(v)) for t, v in d.get("peaks", ())]),
                    allowance=None if d.get("allowance") is None else float(d["allowance"]),
                )
            except (TypeError, ValueError, AttributeError):
                out[w] = WorkloadErrors()
        state = cls(out)
        _repacked(state, data, known)
        return state

    def headroom(self, workload: str, cfg: HeadroomConfig) -> float:
        """The headroom to plan `workload` with now (cold_start for a workload never sampled)."""
        return headroom_of(self.workloads.get(workload, _NONE), cfg)

    def level(self, workload: str, cfg: HeadroomConfig) -> float:
        """The quantile the headroom is sized at now: the target, moved by the feedback."""
        return level_of(self.workloads.get(workload, _NONE), cfg)

    def attainment(self, workload: str, now: float) -> float | None:
        """Fraction of the last hour whose ready capacity covered the observed rate (None: no data)."""
        return coverage.attained(self.workloads.get(workload, _NONE).attain, now)


def _plan(p: Any) -> Plan:
    """A remembered plan (time, base forecast, headroom, planned rate or None)."""
    t, f, h, planned = p
    return float(t), float(f), float(h), None if planned is None else float(planned)


# -- the estimator ---------------------------------------------------------------------------------
def headroom_of(e: WorkloadErrors, cfg: HeadroomConfig) -> float:
    """The quantile (level_of) of the recent errors, minus 1, clamped; cold_start while warming up."""
    q = _quantile(e.weights, level_of(e, cfg), cfg) if len(e.weights) == BINS + 2 else None
    h = cfg.cold_start if q is None else q - 1.0
    if e.samples_s < cfg.warmup_s:
        h = max(h, cfg.cold_start)
    return min(max(h, cfg.floor), cfg.cap)


def level_of(e: WorkloadErrors, cfg: HeadroomConfig) -> float:
    """1 - the allowance: the target until the feedback has moved it."""
    return cfg.target if e.allowance is None or cfg.feedback_s <= 0 else 1.0 - e.allowance


def _quantile(weights: tuple[float, ...], level: float, cfg: HeadroomConfig) -> float | None:
    """The smallest bin edge with at least `level` of the weight at or below it (None: empty)."""
    total = sum(weights)
    if total <= 0:
        return None
    need, run = level * total, 0.0
    edges = cfg.edges()
    for k, w in enumerate(weights[:-1]):
        run += w
        if run >= need * (1 - 1e-12):
            return edges[k]
    return 1.0 + cfg.cap


def error_bin(x: float, cfg: HeadroomConfig) -> int:
    """Histogram index of ratio x: 0 when x <= 1, BINS + 1 beyond 1 + cap."""
    if x <= 1.0:
        return 0
    if x > 1.0 + cfg.cap:
        return BINS + 1
    return min(BINS, max(1, math.ceil(BINS * math.log(x) / math.log1p(cfg.cap) - 1e-9)))


Plan = tuple[float, float, float, float | None]  # (time, base forecast, headroom, rate the layout planned)


def judged(forecasts: tuple[Plan, ...], now: float, cfg: HeadroomConfig) -> Plan | None:
    """The newest plan at least lead_s old: the one a sample judges."""
    cut = now - cfg.lead_s + 1e-6
    older = [p for p in forecasts if p[0] <= cut]
    return older[-1] if older else None


def sample(plan: Plan | None, rate: float, floor_rps: float, held: float | None, cfg: HeadroomConfig) -> float | None:
    """The ratio x this observation gives of the judged plan (see the module docstring), or None
    when it gives none. `held`: the rate the layout in force now was planned for."""
    if plan is None or not math.isfinite(rate) or rate < 0:
        return None
    if rate <= floor_rps:
        return 0.0
    _, forecast, room, planned = plan
    ref = forecast
    if planned is not None and held is not None and forecast * (1.0 + room) >= floor_rps:
        ref = max(forecast, min(planned, held) / (1.0 + room))
    if ref * (1.0 + cfg.cap) <= max(floor_rps, MIN_RPS):
        return None
    return rate / ref


def forecast_error(plan: Plan | None, rate: float) -> float | None:
    """observed / the judged plan's base forecast - 1 (how far the forecast alone was off)."""
    return None if plan is None or plan[1] <= MIN_RPS else rate / plan[1] - 1.0


# The steps below give a workload's new fields, not a new WorkloadErrors each: `update` builds one
# record per workload from them (a dataclasses.replace per step was a tenth of a steady tick's
# CPU at 2,000 MIG instances, 8,500 workloads: benchmarks/fleet_scale.py).
def learn(
    weights: tuple[float, ...], samples_s: float, x: float, dt: float, cfg: HeadroomConfig
) -> tuple[tuple[float, ...], float]:
    """Add sample x with weight dt (seconds) to the histogram, every older weight decayed over
    dt: the weights, and the seconds of samples."""
    decay = math.exp(-dt / cfg.window_s) if cfg.window_s > 0 else 0.0
    out = [w * decay for w in weights] if len(weights) == BINS + 2 else [0.0] * (BINS + 2)
    out[error_bin(x, cfg)] += dt
    return tuple(out), samples_s + dt


def remember(
    forecasts: tuple[Plan, ...], now: float, forecast: float | None, headroom: float, cfg: HeadroomConfig
) -> tuple[Plan, ...]:
    """Keep this tick's plan (base forecast, headroom; its layout's rate comes next tick), those
    younger than lead_s, and the newest older one."""
    kept = list(forecasts)
    if forecast is not None and math.isfinite(forecast):
        kept.append((now, max(forecast, 0.0), headroom, None))
    old = [k for k, p in enumerate(kept) if p[0] <= now - cfg.lead_s + 1e-6]
    return tuple(kept[old[-1] :] if old else kept)


def settle(forecasts: tuple[Plan, ...], held: float | None) -> tuple[Plan, ...]:
    """Record on the newest remembered plan the rate its tick's layout was planned for (`held`,
    read a tick later: the hold on scale-in may have kept it above forecast * (1 + headroom))."""
    if held is None or not forecasts or forecasts[-1][3] is not None:
        return forecasts
    t, f, h, _ = forecasts[-1]
    return (*forecasts[:-1], (t, f, h, float(held)))


def adapt(allowance: float | None, samples_s: float, dt: float, covered: bool, cfg: HeadroomConfig) -> float | None:
    """Move the allowance by dt seconds of coverage (see Feedback); nothing while warming up."""
    if cfg.feedback_s <= 0 or samples_s < cfg.warmup_s:
        return allowance
    return coverage.allowance_after(
        allowance, dt, covered, goal=1.0 - cfg.target, cap=cfg.allowance_cap, time_s=cfg.feedback_s
    )


# -- the burst floor -----------------------------------------------------------------------------------
def note_peak(
    peaks: tuple[tuple[float, float], ...], now: float, peak: float, cfg: HeadroomConfig
) -> tuple[tuple[float, float], ...]:
    """Keep this tick's peak and those of the last burst_window_s."""
    if cfg.burst_window_s <= 0:
        return ()
    cut = now - cfg.burst_window_s
    kept = [p for p in peaks if p[0] > cut]
    kept.append((now, peak))
    return tuple(kept)


def burst_floor(e: WorkloadErrors, now: float, cfg: HeadroomConfig) -> float:
    """The busiest peak of the last burst_window_s (0 when none): the least rate to plan for."""
    cut = now - cfg.burst_window_s
    return max([v for t, v in e.peaks if t > cut], default=0.0)


# -- one tick ----------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class TickInput:
    """What one tick tells the estimator, per workload. `observed`: fresh rates only (a missing
    workload is absent); `forecast`: base forecasts (before headroom); `floor`: min_rate_rps;
    `capacity`: the ready capacity that served the observed rate; `held`: the rates the layout in
    force was planned for (the previous tick's: hold or target); `peak`: the busiest rate since
    the previous read, where the source can tell (else the observed rate stands for it); `fixed`: a
    fixed headroom (`headroom: 0.2`), or None for auto."""

    now: float
    interval_s: float
    observed: Mapping[str, float]
    forecast: Mapping[str, float | None]
    floor: Mapping[str, float] = field(default_factory=dict)
    capacity: Mapping[str, float] = field(default_factory=dict)
    held: Mapping[str, float] = field(default_factory=dict)
    peak: Mapping[str, float] = field(default_factory=dict)
    fixed: float | None = None


@dataclass(frozen=True, slots=True)
class Step:
    """One tick's answer: the new state, the headroom to plan each workload with, the forecast
    errors this tick measured (observed / the judged base forecast - 1), and the burst floor: the
    least rate to plan each workload for (0 with a fixed headroom)."""

    state: HeadroomState
    headroom: dict[str, float]
    errors: dict[str, float]
    floor: dict[str, float] = field(default_factory=dict)


def update(state: HeadroomState, inp: TickInput, cfg: HeadroomConfig) -> Step:
    """One tick for every workload in inp.forecast: sample, learn, record attainment, size the
    headroom, and remember the plan it is used for."""
    out: dict[str, WorkloadErrors] = dict(state.workloads)
    room: dict[str, float] = {}
    errors: dict[str, float] = {}
    floor: dict[str, float] = {}
    for w, fc in inp.forecast.items():
        e = out.get(w, _NONE)
        forecasts = settle(e.forecasts, inp.held.get(w))
        rate = inp.observed.get(w)
        if rate is not None:
            e = _observe(e, forecasts, inp, w, rate, cfg, errors)
        room[w] = headroom_of(e, cfg) if inp.fixed is None else inp.fixed
        floor[w] = burst_floor(e, inp.now, cfg) if inp.fixed is None else 0.0
        out[w] = _planned(e, remember(forecasts, inp.now, fc, room[w], cfg))
    return Step(HeadroomState(out), room, errors, floor)


_NONE = WorkloadErrors()


def _planned(e: WorkloadErrors, forecasts: tuple[Plan, ...]) -> WorkloadErrors:
    """`e` with these plans remembered (built directly: dataclasses.replace looks its fields up
    on every call, and this runs for every workload every tick)."""
    return WorkloadErrors(
        forecasts=forecasts,
        weights=e.weights,
        observed_at=e.observed_at,
        samples_s=e.samples_s,
        attain=e.attain,
        peaks=e.peaks,
        allowance=e.allowance,
    )


def _observe(
    e: WorkloadErrors,
    forecasts: tuple[Plan, ...],
    inp: TickInput,
    w: str,
    rate: float,
    cfg: HeadroomConfig,
    errors: dict[str, float],
) -> WorkloadErrors:
    """A fresh rate: its seconds (since the previous fresh rate, at most a horizon) count towards
    attainment and weigh its sample, both judged on the peak (what capacity had to carry); the
    forecast error is of the rate read (what the forecast forecasts). `forecasts`: e's, settled."""
    dt = inp.interval_s if e.observed_at is None else min(max(inp.now - e.observed_at, 0.0), cfg.horizon_s)
    peak = max(rate, inp.peak.get(w, rate))
    capacity = inp.capacity.get(w)
    attain, allowance = e.attain, e.allowance
    if capacity is not None:
        covered = capacity >= peak - 1e-9
        attain = coverage.record(e.attain, inp.now, dt, covered)
        allowance = adapt(allowance, e.samples_s, dt, covered, cfg)
    plan = judged(forecasts, inp.now, cfg)
    error = forecast_error(plan, rate)
    if error is not None:
        errors[w] = error
    x = sample(plan, peak, inp.floor.get(w, 0.0), inp.held.get(w), cfg)
    weights, samples_s = e.weights, e.samples_s
    if x is not None and dt > 0:
        weights, samples_s = learn(weights, samples_s, x, dt, cfg)
    return WorkloadErrors(
        forecasts=forecasts,
        weights=weights,
        observed_at=inp.now,
        samples_s=samples_s,
        attain=attain,
        peaks=note_peak(e.peaks, inp.now, peak, cfg),
        allowance=allowance,
    )
