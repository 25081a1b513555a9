"""A load generator for the live demo: replays a rate schedule as real KServe v2 requests.

Arrivals are Poisson at the schedule's current rate (open loop: a slow server does not slow the
sender, as real users do not wait for each other). Each request goes to the workload's URL, as a
real client's would: in the demo that is the gateway's one URL per workload, which picks the
server (`endpoints` may list several base URLs; they are taken round robin). A request is refused
when there is no URL, or when the gateway answers 503 (no server of the workload can take it);
any other error or timeout is failed. It only ever connects to 127.0.0.1. Counters are kept per
workload for the final summary (client-side latency percentiles).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import httpx
import numpy as np

from autoscaler.rates.base import RateSource

SLICE_S = 0.05
BODY = {"inputs": [{"name": "x", "shape": [1, 8], "datatype": "FP32", "data": [0.1 * i for i in range(8)]}]}


@dataclass
class Counts:
    """One workload's requests: sent, answered 200, failed (HTTP error or timeout), refused."""

    sent: int = 0
    ok: int = 0
    failed: int = 0
    refused: int = 0
    arrivals: deque[float] = field(default_factory=deque)  # monotonic arrival times (last minute)
    latencies_ms: list[float] = field(default_factory=list)

    def p99(self, last: int | None = None) -> float | None:
        values = self.latencies_ms[-last:] if last else self.latencies_ms
        return float(np.percentile(values, 99)) if values else None


class LoadGen:
    """`schedule(elapsed_s)` gives req/s per workload; `endpoints(workload)` the ready base URLs."""

    def __init__(
        self,
        schedule: Callable[[float], Mapping[str, float]],
        endpoints: Callable[[str], list[str]],
        seed: int = 1,
        workers: int = 12,
        timeout_s: float = 2.0,
    ) -> None:
        self.schedule = schedule
        self.endpoints = endpoints
        self.rng = np.random.default_rng(seed)
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="loadgen")
        self.client = httpx.Client(timeout=timeout_s, limits=httpx.Limits(max_connections=workers))
        self.counts: dict[str, Counts] = {}
        self.lock = threading.Lock()
        self.stop_event = threading.Event()
        self.started = 0.0
        self._rr = itertools.count()
        self._thread = threading.Thread(target=self._run, name="loadgen-dispatch", daemon=True)

    def start(self) -> None:
        self.started = time.monotonic()
        self._thread.start()

    def elapsed(self) -> float:
        return time.monotonic() - self.started if self.started else 0.0

    def _run(self) -> None:
        """Every SLICE_S, draw each workload's Poisson arrivals for the slice and hand them out."""
        next_at = time.monotonic()
        while not self.stop_event.is_set():
            for workload, rate in self.schedule(self.elapsed()).items():
                for _ in range(int(self.rng.poisson(max(rate, 0.0) * SLICE_S))):
                    self._dispatch(workload)
            next_at += SLICE_S
            self.stop_event.wait(max(0.0, next_at - time.monotonic()))

    def _dispatch(self, workload: str) -> None:
        now = time.monotonic()
        with self.lock:
            c = self.counts.setdefault(workload, Counts())
            c.sent += 1
            c.arrivals.append(now)
            while c.arrivals and c.arrivals[0] < now - 60.0:
                c.arrivals.popleft()
        urls = self.endpoints(workload)
        if not urls:
            with self.lock:
                c.refused += 1
            return
        url = f"{urls[next(self._rr) % len(urls)]}/v2/models/{workload}/infer"
        self.pool.submit(self._send, workload, url)

    def _send(self, workload: str, url: str) -> None:
        start = time.perf_counter()
        try:
            code = self.client.post(url, json=BODY).status_code
        except httpx.HTTPError:
            code = 0
        ms = (time.perf_counter() - start) * 1000.0
        with self.lock:
            c = self.counts[workload]
            if code == 200:
                c.ok += 1
                c.latencies_ms.append(ms)
            elif code == 503:
                c.refused += 1
            else:
                c.failed += 1

    def offered_rps(self, workload: str, window_s: float) -> float | None:
        """Requests offered (sent or refused) per second over the last `window_s`."""
        now = time.monotonic()
        span = min(window_s, self.elapsed())
        if span <= 0.5:
            return None
        with self.lock:
            c = self.counts.get(workload)
            n = sum(1 for t in c.arrivals if t >= now - span) if c else 0
        return n / span

    def snapshot(self) -> dict[str, Counts]:
        with self.lock:
            return {
                w: Counts(c.sent, c.ok, c.failed, c.refused, deque(), list(c.latencies_ms))
                for w, c in self.counts.items()
            }

    def close(self) -> None:
        self.stop_event.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        self.pool.shutdown(wait=True, cancel_futures=True)
        self.client.close()


class GatewayRates:
    """RateSource for the demo controller: what the gateway measured (rates/gateway.py, each
    workload backend's request counter), times `scale` (planned per sent). Before the load starts
    it reports `initial` (the schedule's first rates), so the fleet the replay starts on is sized
    for the traffic about to arrive."""

    def __init__(self, gen: LoadGen, measured: RateSource, scale: float, initial: Mapping[str, float]) -> None:
        self.gen, self.measured, self.scale, self.initial = gen, measured, scale, dict(initial)

    def read(self, now: float, workloads: Sequence[str]) -> dict[str, float | None]:
        got = self.measured.read(now, workloads)  # read every tick, so the first window is a full one
        if not self.gen.started:
            return {w: self.initial.get(w) for w in workloads}
        return {w: _times(got.get(w), self.scale) for w in workloads}


def _times(value: float | None, scale: float) -> float | None:
    return None if value is None else value * scale


class OfferedRates:
    """RateSource for the demo controller: the load generator's offered rate over the last tick
    interval (what a load balancer's request count reports), times `scale` (planned per sent).
    Until the load has run for `min_span_s` it reports `initial` (the schedule's first rates), so
    the fleet the replay starts on is sized for the traffic about to arrive, and no count over a
    moment (a handful of requests: mostly noise) is planned for."""

    def __init__(
        self, gen: LoadGen, window_s: float, scale: float, initial: Mapping[str, float], min_span_s: float = 0.5
    ) -> None:
        self.gen, self.window_s, self.scale, self.initial = gen, window_s, scale, dict(initial)
        self.min_span_s = min_span_s

    def read(self, now: float, workloads: Sequence[str]) -> dict[str, float | None]:
        out: dict[str, float | None] = {}
        counted = self.gen.started and self.gen.elapsed() >= self.min_span_s
        for w in workloads:
            r = self.gen.offered_rps(w, self.window_s) if counted else self.initial.get(w)
            out[w] = None if r is None else r * self.scale
        return out
