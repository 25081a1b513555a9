"""The simulator's rate sources: what a request counter read every interval would report for a
trace, and the oracle's perfect forecast of the coming rows. Both are RateSources (rates/base.py)
that the real controller reads through the same RateReader as `igniter run`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from autoscaler.config.scaling import FastPathConfig
from autoscaler.sim.traces import Trace


class Area:
    """Each workload's trace as a step function (row k's rate holds from its time to the next
    row's) and its running integral: the mean rate over any span, whatever the rows' width."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self.t0 = float(trace.times[0])
        widths = np.diff(np.concatenate([trace.times, [self.t0 + trace.duration_s]]))
        self.area = {w: np.concatenate([[0.0], np.cumsum(v * widths)]) for w, v in trace.rates.items()}

    def mean(self, a: float, b: float) -> dict[str, float]:
        """Each workload's mean rate over [a, b] (the trace's start bounds a)."""
        a = max(a, self.t0)
        return {w: (self._integral(w, b) - self._integral(w, a)) / (b - a) for w in self.trace.names} if b > a else {}

    def _integral(self, w: str, x: float) -> float:
        k = max(int(np.searchsorted(self.trace.times, x, "right")) - 1, 0)
        return float(self.area[w][k] + self.trace.rates[w][k] * (x - self.trace.times[k]))


class TraceRates:
    """RateSource: what a request counter read every interval reports, i.e. the mean (or with
    stat "max", the busiest row, like CloudWatch's Maximum) of the trace rows of the last
    `window_s`; the latest row when rows are coarser than the window. At the trace's first
    instant it reports the first `warm_s` (default: the window), so the warm fleet is sized for the
    traffic about to come: the replay runs it from boot_s + interval_s, the time the first plan
    that reacts to the trace needs to serve (a fleet sized for the first row alone starts empty
    for a workload idle at that instant and short when its traffic arrives a minute later).

    Which rows a read at `now` covers. By default (`past` False) the rows whose time lies in
    (now - window_s, now]: a row that starts at `now` is read at once, so a tick on a row's
    boundary sees the coming row, up to an interval before a counter could (1-minute rows and
    60 s ticks: every tick reads the minute ahead). With `past` a read sees what the gateway's
    counters would (rates/gateway.py): the time-weighted mean since the previous read and, as the
    peak, the busiest row of that span, never a row that starts at `now` (`igniter simulate
    --tick-reads past`, docs/simulate.md). A fast tick's read a few seconds after a tick then
    sees those seconds, as `igniter run`'s does."""

    def __init__(
        self, trace: Trace, window_s: float, stat: str = "mean", warm_s: float | None = None, past: bool = False
    ) -> None:
        self.times = trace.times
        self.window_s = window_s
        self.warm_s = window_s if warm_s is None else max(warm_s, window_s)
        self.stat = stat
        self.rates = trace.rates
        self.prefix = {w: np.concatenate([[0.0], np.cumsum(v)]) for w, v in trace.rates.items()}
        self.area = Area(trace) if past else None
        self.span: tuple[float, float] | None = None  # past: what the latest read covered

    def _since(self, now: float) -> tuple[float, float]:
        """past: the span a read at `now` covers, since the previous read (the window before the first)."""
        if self.span is None:
            return now - self.window_s, now
        last = self.span[1]
        return self.span if last == now else (last if last < now else now - self.window_s, now)

    def _rows(self, now: float) -> tuple[int, int]:
        t0 = float(self.times[0])
        if now <= t0:
            return 0, max(1, int(np.searchsorted(self.times, t0 + self.warm_s, "left")))
        if self.area is not None:
            a, _ = self._since(now)
            hi = int(np.searchsorted(self.times, now, "left"))
            return max(int(np.searchsorted(self.times, a, "right")) - 1, 0), hi
        hi = int(np.searchsorted(self.times, now, "right"))
        return min(int(np.searchsorted(self.times, now - self.window_s, "right")), hi - 1), hi

    def peaks(self, now: float, workloads: list[str] | tuple[str, ...]) -> dict[str, float | None]:
        """Peaked: the busiest row of what read() covers, as HAProxy's rate_max gives the busiest
        second since the previous read (rows are seconds at the finest)."""
        if now < self.times[0]:
            return {w: None for w in workloads}
        lo, hi = self._rows(now)
        return {w: float(self.rates[w][lo:hi].max()) if w in self.rates else None for w in workloads}

    def read(self, now: float, workloads: list[str] | tuple[str, ...]) -> dict[str, float | None]:
        if now < self.times[0]:
            return {w: None for w in workloads}
        lo, hi = self._rows(now)
        mean = None
        if self.area is not None:
            self.span = self._since(now)
            mean = self.area.mean(*self.span) if now > self.times[0] else None
        out: dict[str, float | None] = {}
        for w in workloads:
            if w not in self.rates:
                out[w] = None
            elif self.stat == "max":
                out[w] = float(self.rates[w][lo:hi].max())
            elif mean is not None:
                out[w] = mean[w]
            else:
                out[w] = float((self.prefix[w][hi] - self.prefix[w][lo]) / (hi - lo))
        return out


class FutureRates(TraceRates):
    """RateSource for the oracle: the busiest trace row of [now, now + horizon_s], i.e. exactly
    the rate the fleet planned now must carry until the next plan's instances are ready."""

    def __init__(self, trace: Trace, horizon_s: float) -> None:
        super().__init__(trace, horizon_s, "max")

    def _rows(self, now: float) -> tuple[int, int]:
        lo = max(int(np.searchsorted(self.times, now, "right")) - 1, 0)
        return lo, max(int(np.searchsorted(self.times, now + self.window_s, "right")), lo + 1)


class TraceWatch:
    """The fast path's watcher on a trace (loop/service/watch.py reads the gateway instead): every poll_s
    it measures each workload's mean rate over the last window_s, and the first poll at which
    `panics` says so (at least min_gap_s after the last one) is a fast tick. Rates are step
    functions of the rows, so only polls within window_s of a row's start can change the answer."""

    def __init__(self, trace: Trace, cfg: FastPathConfig | None) -> None:
        self.trace, self.cfg = trace, cfg
        self.t0 = float(trace.times[0])
        self.area = Area(trace)
        self.last = -np.inf

    def next_panic(self, after: float, before: float, panics: Callable[[dict[str, float]], bool]) -> float | None:
        """The first poll in (after, before) where `panics` holds, None if none."""
        cfg = self.cfg
        if cfg is None or before <= after:
            return None
        for p in self._polls(after, before, cfg):
            if p - self.last >= cfg.min_gap_s and panics(self.area.mean(p - cfg.window_s, p)):
                self.last = p
                return p
        return None

    def _polls(self, after: float, before: float, cfg: FastPathConfig) -> list[float]:
        times = self.trace.times
        lo = int(np.searchsorted(times, after - cfg.window_s, "right"))
        hi = int(np.searchsorted(times, before, "left"))
        polls: set[float] = set()
        for r in times[lo:hi]:
            k = math.ceil((max(float(r), after) - self.t0) / cfg.poll_s - 1e-9)
            while (p := self.t0 + k * cfg.poll_s) <= min(float(r) + cfg.window_s + cfg.poll_s, before):
                if after < p < before:
                    polls.add(p)
                k += 1
        return sorted(polls)
