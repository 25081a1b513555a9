"""The iGniter performance model (the paper's Sec. 3.1): profile -> fitted coefficients -> predict.

Pure: no I/O beyond loading a profile through `load_perf_model`. Fitting happens once per profile (and
is cached); `predict` is plain float arithmetic because the planner calls it millions of times.

For workloads S co-located on one GPU, each with batch b and MPS share r (percent):

    t_act(b, r) = (k1 b^2 + k2 b + k3) / (r + k4) + k5          solo active time at full clock
    h           = 1000 b / t_act                                  its throughput (req/s)
    P           = P_idle + sum(p0 + p1 h)                         power demand of the GPU
    f           = F            if P <= P_cap
                  F + a (P - P_cap) otherwise                     the SM clock under the power cap
    c           = c0 + c1 h                                       its L2 utilisation (%)
    t_gpu       = (n_k delta(|S|) + t_idle + t_act (1 + alpha_cache sum(c of the others))) / (f / F)
    latency     = t_gpu + (d_in + d_out) b / B
    throughput  = 1000 b / (t_gpu + d_out b / B)

Fitting choices (each checked against the published golden values in tests):
- t_act is fitted on the 3x3 grid after undoing throttling (t f / F) and subtracting the solo
  scheduling time t_idle + n_k delta(1);
- power and L2 are regressed on the measured active throughput; power only on grid points where
  the clock was not throttled, because a throttled point reports the cap, not the demand;
- delta(1) is measured; delta(|S| >= 2) is the linear fit over the 2..5 co-location sweep;
- the power->clock slope a is a least-squares line through (P_cap, F) over the throttled sweep
  points, whose power demand is extended linearly from the unthrottled ones.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from autoscaler.config.profile import ModelProfile, Profile, load_profile
from autoscaler.model import fit_cache

SOLO_KEEP = 1 << 16  # solo predictions a model remembers (PerfModel.solo)


@dataclass(frozen=True, slots=True)
class Placement:
    """One inference server on a GPU: a model at a batch size and an MPS share (percent)."""

    model: str
    batch: int
    mps_percent: float


@dataclass(frozen=True, slots=True)
class Prediction:
    latency_ms: float
    throughput_rps: float


@dataclass(frozen=True, slots=True)
class ModelCoefficients:
    """Everything predict needs for one model, as plain floats."""

    k: tuple[float, float, float, float, float]
    power: tuple[float, float]  # p0 + p1 * h  (watts above idle)
    l2: tuple[float, float]  # c0 + c1 * h  (percent)
    alpha_cache: float
    kernels: int
    idle_ms: float
    in_ms_per_item: float  # d_in / B
    out_ms_per_item: float  # d_out / B
    memory_base_mb: float
    memory_per_item_mb: float

    def active_ms(self, batch: float, mps: float) -> float:
        k1, k2, k3, k4, k5 = self.k
        return (k1 * batch * batch + k2 * batch + k3) / (mps + k4) + k5


def _tact_surface(
    x: tuple[np.ndarray, np.ndarray], k1: float, k2: float, k3: float, k4: float, k5: float
) -> np.ndarray:
    b, r = x
    out: np.ndarray = (k1 * b * b + k2 * b + k3) / (r + k4) + k5
    return out


def _fit_active(
    profile: Profile, m: ModelProfile, sched_ms: float
) -> tuple[np.ndarray, tuple[float, float, float, float, float]]:
    """Fit k1..k5 on the grid; returns the measured active times and the coefficients."""
    f_max = profile.hardware.max_sm_clock_mhz
    b, r = np.meshgrid(profile.grid.batch_sizes, profile.grid.mps_percent, indexing="ij")
    t_act = np.array(m.gpu_latency_ms) * np.array(m.sm_clock_mhz) / f_max - sched_ms
    x = (b.ravel().astype(float), r.ravel().astype(float))
    # Start from the k4 = k5 = 0 linear least-squares solution so the fit does not wander off.
    design = np.stack([x[0] ** 2, x[0], np.ones_like(x[0])], axis=1) / x[1][:, None]
    start = np.linalg.lstsq(design, t_act.ravel(), rcond=None)[0]
    y, p0 = t_act.ravel(), np.array([*start, 0.0, 0.0])
    lower = np.array([-np.inf, -np.inf, -np.inf, -0.99 * min(profile.grid.mps_percent), -np.inf])

    def surface() -> tuple[float, ...]:
        # here, not at import: scipy.optimize costs every process that fits ~0.5 s of CPU
        from scipy.optimize import curve_fit

        k, _ = curve_fit(_tact_surface, x, y, p0=p0, bounds=(lower, [np.inf] * 5), maxfev=20000)
        return tuple(float(v) for v in k)

    # kept by every input of the fit (fit_cache.py): a process that finds it imports no scipy
    parts = [fit_cache.source(__file__), fit_cache.versions("scipy", "numpy")]
    parts += [np.ascontiguousarray(a, dtype=np.float64).tobytes() for a in (*x, y, p0, lower)]
    k1, k2, k3, k4, k5 = fit_cache.remembered(parts, surface, size=5)
    return t_act, (k1, k2, k3, k4, k5)


def _line(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Intercept and slope of a least-squares line (slope only if fewer than two x values)."""
    if len(set(np.round(x, 9))) < 2:
        return 0.0, float((x * y).sum() / max((x * x).sum(), 1e-12))
    slope, intercept = np.polyfit(x, y, 1)
    return float(intercept), float(slope)


def _fit_model(profile: Profile, m: ModelProfile, delta1: float) -> ModelCoefficients:
    hw = profile.hardware
    t_act, k = _fit_active(profile, m, m.solo_idle_time_ms + m.kernels * delta1)
    batches = np.array(profile.grid.batch_sizes, dtype=float)[:, None]
    throughput = 1000.0 * batches / t_act
    unthrottled = np.array(m.sm_clock_mhz) >= hw.max_sm_clock_mhz
    power = _line(throughput[unthrottled], (np.array(m.power_w) - hw.idle_power_w)[unthrottled])
    diag = np.array([throughput[i, i] for i in range(3)])
    l2 = _line(diag, np.array(m.l2_cache_utilization_percent_at_grid_diagonal))
    probe = m.pair_probe
    slowdown = probe.active_time_colocated_ms * probe.sm_clock_mhz / hw.max_sm_clock_mhz / probe.active_time_solo_ms
    mem = m.memory_mb
    return ModelCoefficients(
        k=k,
        power=power,
        l2=l2,
        alpha_cache=(slowdown - 1.0) / probe.interfering_l2_utilization_percent,
        kernels=m.kernels,
        idle_ms=m.solo_idle_time_ms,
        in_ms_per_item=m.input_bytes_per_request / hw.pcie_bandwidth_bytes_per_ms,
        out_ms_per_item=m.output_bytes_per_request / hw.pcie_bandwidth_bytes_per_ms,
        memory_base_mb=mem.base if mem else 0.0,
        memory_per_item_mb=mem.per_batch_item if mem else 0.0,
    )


def _fit_clock_slope(profile: Profile) -> float:
    """MHz lost per watt of demand above the cap, from the co-location sweep."""
    hw, sw = profile.hardware, profile.hardware.colocation_sweep
    n = np.array(sw.colocated_workloads, dtype=float)
    power, clock = np.array(sw.power_w), np.array(sw.sm_clock_mhz)
    throttled = clock < hw.max_sm_clock_mhz
    if not throttled.any() or (~throttled).sum() < 2:
        return 0.0
    p0, p1 = _line(n[~throttled], power[~throttled])
    excess = p0 + p1 * n[throttled] - hw.power_limit_w
    drop = clock[throttled] - hw.max_sm_clock_mhz
    return float((excess * drop).sum() / max((excess * excess).sum(), 1e-12))


def _fit_delta(profile: Profile) -> tuple[float, float, float]:
    """Per-kernel scheduling delay: measured for 1, a line over 2..N (intercept, slope)."""
    sw = profile.hardware.colocation_sweep
    n = np.array(sw.colocated_workloads[1:], dtype=float)
    intercept, slope = _line(n, np.array(sw.idle_time_per_kernel_ms[1:]))
    return sw.idle_time_per_kernel_ms[0], intercept, slope


class PerfModel:
    """A fitted model of one GPU type. Build with `fit(profile)` or `load_perf_model(path)`."""

    def __init__(self, name: str, profile: Profile) -> None:
        hw = profile.hardware
        self.name = name
        self.profile = profile
        self.unit = hw.resource_unit_percent
        self.memory_mb = hw.memory_mb
        self.f_max = hw.max_sm_clock_mhz
        self.power_cap = hw.power_limit_w
        self.idle_power = hw.idle_power_w
        self.clock_slope = _fit_clock_slope(profile)
        self.delta1, self.delta0, self.delta_slope = _fit_delta(profile)
        self.coef = {name: _fit_model(profile, m, self.delta1) for name, m in profile.models.items()}
        self._solo: dict[tuple[str, float, float], tuple[float, float]] = {}

    @property
    def models(self) -> frozenset[str]:
        return frozenset(self.coef)

    def delta(self, colocated: int) -> float:
        """Scheduling delay per kernel (ms) with `colocated` workloads on the GPU."""
        if colocated <= 1:
            return self.delta1
        return max(self.delta1, self.delta0 + self.delta_slope * colocated)

    def clock_ratio(self, power_demand: float) -> float:
        """f / F for a GPU whose summed power demand is `power_demand` watts."""
        if power_demand <= self.power_cap:
            return 1.0
        return max(0.05, (self.f_max + self.clock_slope * (power_demand - self.power_cap)) / self.f_max)

    def predict(self, placements: Sequence[Placement]) -> list[Prediction]:
        """Latency and throughput of each placement, co-located with all the others."""
        return [
            Prediction(lat, thr)
            for lat, thr in self.predict_raw([(p.model, p.batch, p.mps_percent) for p in placements])
        ]

    def predict_raw(self, items: Sequence[tuple[str, float, float]]) -> list[tuple[float, float]]:
        """`predict` on (model, batch, mps) tuples: the planner's hot path, no object churn."""
        coefs = [self.coef[m] for m, _, _ in items]
        acts = [c.active_ms(b, r) for c, (_, b, r) in zip(coefs, items)]
        power = self.idle_power
        l2 = []
        for c, (_, b, _), t in zip(coefs, items, acts):
            h = 1000.0 * b / t
            power += c.power[0] + c.power[1] * h
            l2.append(c.l2[0] + c.l2[1] * h)
        ratio = self.clock_ratio(power)
        delta = self.delta(len(items))
        total_l2 = sum(l2)
        out = []
        for c, (_, b, _), t, own in zip(coefs, items, acts, l2):
            t_gpu = (c.kernels * delta + c.idle_ms + t * (1.0 + c.alpha_cache * (total_l2 - own))) / ratio
            out.append(
                (t_gpu + (c.in_ms_per_item + c.out_ms_per_item) * b, 1000.0 * b / (t_gpu + c.out_ms_per_item * b))
            )
        return out

    def solo(self, model: str, batch: int, mps: float) -> tuple[float, float]:
        """(latency_ms, throughput_rps) of a model alone on the GPU. Remembered: the planner asks
        for the same few (batch, share) pairs of a model many times a plan, and the answer of a
        pure function of the key is the same float each time (at most SOLO_KEEP kept)."""
        key = (model, batch, mps)
        out = self._solo.get(key)
        if out is None:
            if len(self._solo) >= SOLO_KEEP:
                self._solo.clear()
            out = self._solo[key] = self.predict_raw([(model, batch, mps)])[0]
        return out

    def forget_solo(self) -> None:
        """Forget the remembered solo predictions (planner/api.py's forget_memos)."""
        self._solo.clear()

    def batch_size(self, model: str, slo_ms: float, rate_rps: float) -> int:
        """The paper's batch rule: the smallest batch that fills within half the SLO at this rate."""
        c = self.coef[model]
        t, r = slo_ms / 2.0, rate_rps / 1000.0
        return max(1, math.ceil(t * r / (1.0 + c.in_ms_per_item * r) - 1e-9))

    def lower_bound(self, model: str, batch: int, slo_ms: float, rate_rps: float = 0.0) -> float | None:
        """The paper's resource lower bound: the smallest share meeting SLO / 2 alone."""
        return self.min_share(model, batch, slo_ms / 2.0, rate_rps)

    def min_share(self, model: str, batch: int, budget_ms: float, need_rps: float = 0.0) -> float | None:
        """Smallest share (a multiple of the unit) at which `batch` meets the latency budget and the
        throughput need alone on the GPU; None if even 100 % does not.

        t_act is inverted in closed form for a first estimate, then checked with full predictions
        (the clock may throttle), so this usually costs one prediction, not a walk over units.
        """
        c = self.coef[model]
        k1, k2, k3, k4, k5 = c.k
        over = c.kernels * self.delta1 + c.idle_ms
        allowed = budget_ms - (c.in_ms_per_item + c.out_ms_per_item) * batch - over
        if need_rps > 0:
            allowed = min(allowed, 1000.0 * batch / need_rps - c.out_ms_per_item * batch - over)
        if allowed <= k5:
            return None
        exact = (k1 * batch * batch + k2 * batch + k3) / (allowed - k5) - k4
        share = max(self.unit, math.ceil(exact / self.unit - 1e-9) * self.unit)
        while share <= 100.0 + 1e-9:
            lat, thr = self.solo(model, batch, share)
            if lat <= budget_ms * (1 + 1e-9) and thr >= need_rps * (1 - 1e-9):
                return share
            share += self.unit
        return None

    def min_latency(self, model: str) -> float:
        """The fastest this GPU can serve one request of `model` (batch 1, whole GPU)."""
        return self.solo(model, 1, 100.0)[0]

    def memory(self, model: str, batch: int) -> float:
        c = self.coef[model]
        return c.memory_base_mb + c.memory_per_item_mb * batch


def fit(profile: Profile, name: str = "gpu") -> PerfModel:
    """Fit a model from a validated profile (no caching; prefer `load_perf_model`)."""
    return PerfModel(name, profile)


FITTED_KEEP = 32  # fitted models kept (per profile file and modification time)
_fitted: dict[tuple[Path, int], PerfModel] = {}


def load_perf_model(path: str | Path) -> PerfModel:
    """Load a profile file and fit it, once per (path, modification time)."""
    resolved = Path(path).resolve()
    try:
        stamp = resolved.stat().st_mtime_ns
    except OSError:
        stamp = 0
    model = _fitted.get((resolved, stamp))
    if model is None:
        model = _fitted[resolved, stamp] = PerfModel(resolved.stem, load_profile(resolved))
        if len(_fitted) > FITTED_KEEP:
            _fitted.pop(next(iter(_fitted)))
    return model


def fitted_perf_models() -> dict[tuple[Path, int], PerfModel]:
    """Every model fitted in this process so far, by (profile path, modification time)."""
    return dict(_fitted)


def prime_perf_models(models: dict[tuple[Path, int], PerfModel]) -> None:
    """Models another process fitted (a `--compare` worker gets its parent's), so that
    load_perf_model answers with them instead of fitting the same files again. A key holds the
    file's modification time, so a profile edited since is still fitted afresh."""
    for key, model in models.items():
        _fitted.setdefault(key, model)
