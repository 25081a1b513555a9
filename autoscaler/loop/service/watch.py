"""The fast path's watcher (core/rollout/fast_path.py decides): between ticks it reads each workload
backend's request counter from the gateway (HAProxy's `req_tot`, one `show stat` per read: the
cheapest thing the fleet can tell) every scaling.fast_path.poll_s, and measures the rate over the
last window_s from the counters' change. The service asks it whether any workload panics.

It keeps its own samples: the rate source's counters (rates/gateway.py) are read by the ticks,
so the ticks' rates do not depend on how often the watcher looked."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Mapping

from autoscaler.config.scaling import FastPathConfig
from autoscaler.core.rollout.fast_path import Panic, panicking
from autoscaler.core.routing.routes import GatewayView
from autoscaler.loop.state.store import Store
from autoscaler.loop.tick.tuning import ready_capacity

log = logging.getLogger(__name__)


class FastWatch:
    def __init__(self, observe: Callable[[], GatewayView], store: Store) -> None:
        self.observe = observe
        self.store = store
        self.samples: deque[tuple[float, Mapping[str, int]]] = deque()

    def rates(self, now: float, window_s: float) -> dict[str, float]:
        """Read the counters; the rate over the last window_s (or since the oldest sample kept) per
        workload. Empty until two samples are in; a counter that went down starts afresh."""
        view = self.observe()
        self.samples.append((now, {w: b.requests_total for w, b in view.backends.items()}))
        while len(self.samples) > 2 and self.samples[1][0] <= now - window_s:
            self.samples.popleft()
        (t0, first), (t1, last) = self.samples[0], self.samples[-1]
        if t1 - t0 <= 0:
            return {}
        return {w: (n - first[w]) / (t1 - t0) for w, n in last.items() if w in first and n >= first[w]}

    def check(self, now: float, cfg: FastPathConfig) -> list[Panic]:
        """The workloads that panic now (core/rollout/fast_path.py); a failed read panics nobody."""
        try:
            rates = self.rates(now, cfg.window_s)
        except Exception as exc:  # the watcher is a shortcut: the next tick reads the rates anyway
            log.debug("fast path: gateway read failed: %s", exc)
            return []
        if not rates:
            return []
        layout = self.store.current_layout()
        planned = dict(layout.rates) if layout is not None else {}
        coming = layout.capacity() if layout is not None else {}
        return panicking(rates, ready_capacity(self.store, {}, contact=False), coming, planned, cfg.panic_ratio)
