"""The policy's own targets in /metrics, so alert rules and dashboards compare against them.

`igniter_target_attainment_ratio` (scaling.target_attainment), `igniter_max_cost_per_hour`
(scaling.max_cost_per_hour, absent when unset) and `igniter_workload_slo_seconds{workload}` are read
from the running policy at every scrape, so a reload (SIGHUP) moves the thresholds with it and
deploy/prometheus/alerts.yaml never hard-codes a number the policy already holds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from autoscaler.config.policy import Policy


class PolicyCollector(Collector):
    def __init__(self, policy: Callable[[], Policy]) -> None:
        self.policy = policy

    def collect(self) -> Iterator[Any]:
        policy = self.policy()
        target = GaugeMetricFamily(
            "igniter_target_attainment_ratio", "scaling.target_attainment: the attainment each workload is planned for"
        )
        target.add_metric([], policy.scaling.target_attainment)
        yield target
        cap = GaugeMetricFamily("igniter_max_cost_per_hour", "scaling.max_cost_per_hour (absent when unset)")
        if policy.scaling.max_cost_per_hour is not None:
            cap.add_metric([], policy.scaling.max_cost_per_hour)
        yield cap
        slo = GaugeMetricFamily("igniter_workload_slo_seconds", "Each workload's latency SLO", labels=["workload"])
        for w in policy.workloads:
            slo.add_metric([w.name], w.slo_ms / 1000.0)
        yield slo
