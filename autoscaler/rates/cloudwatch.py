"""CloudWatch rate source: GetMetricData with one metric per workload (dimension = workload name).

With statistic Sum the metric is a request count per period and is divided by the period; with
Average it is taken as requests per second. The newest datapoint of the last three periods is used;
a workload without one is missing data."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
from botocore.config import Config

from autoscaler.config.policy import CloudWatchRates as CloudWatchConfig

BATCH = 500  # GetMetricData's limit on queries per call


class CloudWatchRates:
    def __init__(self, cfg: CloudWatchConfig, region: str, endpoint_url: str | None, client: Any = None) -> None:
        self.cfg = cfg
        self.client = client or boto3.client(
            "cloudwatch",
            region_name=region,
            endpoint_url=endpoint_url,
            config=Config(retries={"mode": "standard", "total_max_attempts": 3}, connect_timeout=5, read_timeout=15),
        )

    def read(self, now: float, workloads: Sequence[str]) -> dict[str, float | None]:
        end = datetime.fromtimestamp(now, tz=UTC)
        start = end - timedelta(seconds=3 * self.cfg.period_s)
        out: dict[str, float | None] = {}
        for i in range(0, len(workloads), BATCH):
            out.update(self._batch(list(workloads[i : i + BATCH]), start, end))
        return out

    def _batch(self, workloads: list[str], start: datetime, end: datetime) -> dict[str, float | None]:
        queries = [self._query(f"w{i}", w) for i, w in enumerate(workloads)]
        latest: dict[str, float] = {}
        pages = self.client.get_paginator("get_metric_data").paginate(
            MetricDataQueries=queries, StartTime=start, EndTime=end, ScanBy="TimestampDescending"
        )
        for page in pages:
            for res in page.get("MetricDataResults", []):
                pairs = sorted(zip(res.get("Timestamps", []), res.get("Values", [])), reverse=True)
                if pairs and res["Id"] not in latest:
                    latest[res["Id"]] = float(pairs[0][1])
        scale = 1.0 / self.cfg.period_s if self.cfg.statistic == "Sum" else 1.0
        return {w: (latest[f"w{i}"] * scale if f"w{i}" in latest else None) for i, w in enumerate(workloads)}

    def _query(self, qid: str, workload: str) -> dict[str, Any]:
        metric = {
            "Namespace": self.cfg.namespace,
            "MetricName": self.cfg.metric_name,
            "Dimensions": [{"Name": self.cfg.dimension_name, "Value": workload}],
        }
        return {
            "Id": qid,
            "MetricStat": {"Metric": metric, "Period": self.cfg.period_s, "Stat": self.cfg.statistic},
            "ReturnData": True,
        }
