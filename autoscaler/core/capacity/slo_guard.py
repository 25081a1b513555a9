"""SLO guard: the product's answer to the paper's shadow process. Pure.

iGniter's prototype runs a shadow instance to catch prediction errors at run time. Here the agents
report each server's measured p99; when a workload's worst p99 stays above its SLO for `ticks`
consecutive ticks, its correction factor (>= 1, it inflates the model's predicted latency in the
planner) is raised so the next plan gives it more GPU share. When p99 is well under the SLO the
factor decays slowly back towards 1. The factors are persisted by the caller (the store).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class GuardConfig:
    ticks: int = 3  # consecutive ticks above the SLO before raising
    raise_factor: float = 1.2
    max_correction: float = 3.0
    decay_factor: float = 0.98  # per tick while well under the SLO
    well_under: float = 0.5  # "well under": p99 below this fraction of the SLO


@dataclass(frozen=True, slots=True)
class GuardState:
    corrections: Mapping[str, float] = field(default_factory=dict)
    over: Mapping[str, int] = field(default_factory=dict)  # consecutive ticks above the SLO

    def to_json(self) -> dict[str, dict[str, float]]:
        return {"corrections": dict(self.corrections), "over": {k: float(v) for k, v in self.over.items()}}

    @staticmethod
    def from_json(data: Mapping[str, Mapping[str, float]] | None) -> GuardState:
        data = data or {}
        return GuardState(dict(data.get("corrections", {})), {k: int(v) for k, v in data.get("over", {}).items()})


@dataclass(frozen=True, slots=True)
class GuardEvent:
    workload: str
    old: float
    new: float
    why: str


def update(
    state: GuardState, p99: Mapping[str, float | None], slo_ms: Mapping[str, float], cfg: GuardConfig = GuardConfig()
) -> tuple[GuardState, list[GuardEvent]]:
    """One tick of the guard. Workloads without a p99 this tick keep their state unchanged."""
    corr, over = dict(state.corrections), dict(state.over)
    events: list[GuardEvent] = []
    for w, slo in slo_ms.items():
        value = p99.get(w)
        if value is None:
            continue
        old = corr.get(w, 1.0)
        new, over[w] = _step(old, over.get(w, 0), value, slo, cfg)
        if new != old:
            corr[w] = new
            events.append(GuardEvent(w, old, new, f"p99 {value:.1f} ms vs SLO {slo:g} ms"))
    corr = {w: c for w, c in corr.items() if w in slo_ms and c > 1.0 + 1e-6}
    over = {w: n for w, n in over.items() if w in slo_ms and n > 0}
    return GuardState(corr, over), events


def _step(corr: float, over: int, p99: float, slo: float, cfg: GuardConfig) -> tuple[float, int]:
    if p99 > slo:
        over += 1
        if over >= cfg.ticks:
            return min(cfg.max_correction, corr * cfg.raise_factor), 0
        return corr, over
    if p99 < cfg.well_under * slo and corr > 1.0:
        return max(1.0, corr * cfg.decay_factor), 0
    return corr, 0
