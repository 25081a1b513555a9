"""Per-server counters: Prometheus metrics for scraping, plus a last-minute window for `status`.

Prometheus histograms cannot give an exact last-minute p99, so latencies of the last 60 s are also
kept raw (bounded) and summarised into the stats file the agent reads.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics, generate_latest

disable_created_metrics()  # the *_created series only add noise to every scrape

LATENCY_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)


class Window:
    """Values observed in the last `span_s` seconds (at most `cap` kept), for exact percentiles."""

    def __init__(self, span_s: float = 60.0, cap: int = 200_000, clock: Callable[[], float] = time.monotonic) -> None:
        self._span_s = span_s
        self._items: deque[tuple[float, float]] = deque(maxlen=cap)
        self._clock = clock
        self._lock = threading.Lock()

    def add(self, value: float) -> None:
        with self._lock:
            self._items.append((self._clock(), value))

    def values(self) -> list[float]:
        """Drop what is older than the span, return the rest."""
        cutoff = self._clock() - self._span_s
        with self._lock:
            while self._items and self._items[0][0] < cutoff:
                self._items.popleft()
            return [v for _, v in self._items]


def percentiles(values: list[float], qs: tuple[float, ...] = (50, 99)) -> list[float | None]:
    """Percentiles rounded to 0.001, or None when nothing was observed."""
    if not values:
        return [None for _ in qs]
    return [round(float(v), 3) for v in np.percentile(values, qs)]


class ServerMetrics:
    """Everything one inference server counts, labelled with its workload."""

    def __init__(self, workload: str, queue_depth: Callable[[], int], in_flight: Callable[[], int] = lambda: 0) -> None:
        self.workload = workload
        self.registry = CollectorRegistry()
        labels = ["workload"]
        self._requests = Counter(
            "igniter_requests", "Inference requests by HTTP status", [*labels, "code"], registry=self.registry
        )
        self._latency = Histogram(
            "igniter_request_latency_seconds",
            "Inference request latency",
            labels,
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self._batch = Histogram(
            "igniter_batch_size", "Items per executed batch", labels, buckets=BATCH_BUCKETS, registry=self.registry
        )
        self._compute = Histogram(
            "igniter_batch_compute_seconds",
            "Model time per batch",
            labels,
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        gauge = Gauge("igniter_queue_depth", "Requests waiting for a batch", labels, registry=self.registry)
        gauge.labels(workload).set_function(queue_depth)
        accepted = Gauge(
            "igniter_requests_in_flight", "Infer requests accepted and not yet answered", labels, registry=self.registry
        )
        accepted.labels(workload).set_function(in_flight)
        self._lock = threading.Lock()
        self._totals = {"requests_total": 0, "items_total": 0, "batches_total": 0, "errors_total": 0}
        self._latency_ms = Window()
        self._compute_ms = Window()

    def observe_request(self, code: int, seconds: float, items: int = 0) -> None:
        """Count one infer request; only successes feed the latency figures."""
        self._requests.labels(self.workload, str(code)).inc()
        with self._lock:
            key = "requests_total" if code == 200 else "errors_total"
            self._totals[key] += 1
            self._totals["items_total"] += items if code == 200 else 0
        if code == 200:
            self._latency.labels(self.workload).observe(seconds)
            self._latency_ms.add(seconds * 1000.0)

    def observe_batch(self, size: int, seconds: float) -> None:
        self._batch.labels(self.workload).observe(size)
        self._compute.labels(self.workload).observe(seconds)
        self._compute_ms.add(seconds * 1000.0)
        with self._lock:
            self._totals["batches_total"] += 1

    def exposition(self) -> bytes:
        """The Prometheus text format for GET /metrics."""
        return generate_latest(self.registry)

    def snapshot(self) -> dict[str, Any]:
        """Counters since start plus last-minute latency percentiles, for the agent's status."""
        with self._lock:
            out: dict[str, Any] = dict(self._totals)
        latencies = self._latency_ms.values()
        out["requests_last_minute"] = len(latencies)
        out["latency_ms_p50"], out["latency_ms_p99"] = percentiles(latencies)
        out["compute_ms_p50"], out["compute_ms_p99"] = percentiles(self._compute_ms.values())
        return out
