"""CloudWatch rate source against moto's server mode on 127.0.0.1 (GetMetricData)."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import boto3
import pytest
from botocore.config import Config

from autoscaler.config.policy import CloudWatchRates as CwCfg
from autoscaler.rates.cloudwatch import CloudWatchRates
from autoscaler.rates.reader import RateReader
from tests.kit.backends import Moto


@pytest.mark.e2e
def test_rates_from_get_metric_data(moto: Moto) -> None:
    cw = boto3.client("cloudwatch", endpoint_url=moto.url, region_name="us-east-1")
    now = time.time()
    stamp = datetime.fromtimestamp(now - 30, tz=UTC)
    for workload, count in (("alex", 6000.0), ("res", 1200.0)):
        cw.put_metric_data(
            Namespace="Igniter/Inference",
            MetricData=[
                {
                    "MetricName": "RequestCount",
                    "Dimensions": [{"Name": "Workload", "Value": workload}],
                    "Timestamp": stamp,
                    "Value": count,
                    "Unit": "Count",
                }
            ],
        )
    src = CloudWatchRates(CwCfg(period_s=60), "us-east-1", moto.url)
    got = src.read(now, ["alex", "res", "idle"])
    assert got["alex"] == pytest.approx(100.0) and got["res"] == pytest.approx(20.0) and got["idle"] is None
    avg = CloudWatchRates(CwCfg(period_s=60, statistic="Average"), "us-east-1", moto.url)
    assert avg.read(now, ["res"])["res"] == pytest.approx(1200.0)


@pytest.mark.unit
def test_unreachable_cloudwatch_keeps_last_good_value() -> None:
    client = boto3.client(
        "cloudwatch",
        endpoint_url="http://127.0.0.1:9",
        region_name="us-east-1",
        config=Config(retries={"max_attempts": 1}, connect_timeout=1),
    )
    guard = RateReader(CloudWatchRates(CwCfg(), "us-east-1", None, client=client), stale_after_s=60)
    guard.last_good["alex"] = (0.0, 42.0)
    reading = guard.read(30.0, ["alex"])
    assert reading.rates == {"alex": 42.0} and reading.error and not reading.missing
    assert guard.read(61.0, ["alex"]).missing == {"alex"}
