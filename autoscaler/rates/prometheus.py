"""Prometheus rate source: one instant query per workload over the HTTP API (/api/v1/query).

The query is a template with `{workload}` (see rates.prometheus.query). An empty result or NaN is
missing data for that workload; an HTTP or API error fails the whole read (the guard keeps the
last good values)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import httpx

from autoscaler.config.policy import PrometheusRates as PrometheusConfig


class PrometheusRates:
    def __init__(self, cfg: PrometheusConfig, client: httpx.Client | None = None) -> None:
        self.cfg = cfg
        self.client = client or httpx.Client(timeout=cfg.timeout_s)

    def read(self, now: float, workloads: Sequence[str]) -> dict[str, float | None]:
        return {w: self._query(self.cfg.query.format(workload=w), now) for w in workloads}

    def _query(self, query: str, now: float) -> float | None:
        reply = self.client.get(self.cfg.url.rstrip("/") + "/api/v1/query", params={"query": query, "time": now})
        reply.raise_for_status()
        body = reply.json()
        if body.get("status") != "success":
            raise RuntimeError(f"prometheus: {body.get('errorType')}: {body.get('error')}")
        result = body.get("data", {}).get("result", [])
        if not result:
            return None
        value = float(result[0]["value"][1])
        return None if math.isnan(value) or value < 0 else value

    def close(self) -> None:
        self.client.close()
