"""Static rates: each workload's `rate_rps` from the policy (the default source), and a manual
source whose values tests and the simulator set directly."""

from __future__ import annotations

from collections.abc import Mapping, Sequence


class StaticRates:
    def __init__(self, rates: Mapping[str, float]) -> None:
        self.rates = dict(rates)

    def read(self, now: float, workloads: Sequence[str]) -> dict[str, float | None]:
        return {w: self.rates.get(w) for w in workloads}


class ManualRates(StaticRates):
    """Rates set by the caller (`set`); a workload set to None reads as missing data; `fail`
    makes the next reads raise, to exercise the stale-value path."""

    def __init__(self, rates: Mapping[str, float | None] | None = None) -> None:
        super().__init__({})
        self.values: dict[str, float | None] = dict(rates or {})
        self.fail = False

    def set(self, **rates: float | None) -> None:
        self.values.update(rates)

    def read(self, now: float, workloads: Sequence[str]) -> dict[str, float | None]:
        if self.fail:
            raise ConnectionError("rate source down (manual)")
        return {w: self.values.get(w) for w in workloads}
