"""EC2 at fleet size: terminations go in batches (fleet/ec2.py terminate_many), counted at moto's
server (tests/kit/awscalls.py), not by the code under test."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import boto3
import pytest

from autoscaler.config.policy import ProviderConfig
from autoscaler.fleet.base import TAG_FLEET, PermanentError, terminate_many
from autoscaler.fleet.ec2 import Ec2Provider
from tests.kit.awscalls import AwsCalls
from tests.kit.backends import Moto

pytestmark = pytest.mark.e2e

KEY = "AKIDBATCHTEST0000001"


def _client(moto: Moto) -> Any:
    return boto3.client(
        "ec2", endpoint_url=moto.url, region_name="us-east-1", aws_access_key_id=KEY, aws_secret_access_key="x"
    )


def _fleet(moto: Moto, n: int, fleet: str = "big") -> list[str]:
    client = _client(moto)
    image = client.describe_images()["Images"][0]["ImageId"]
    tags = [{"ResourceType": "instance", "Tags": [{"Key": TAG_FLEET, "Value": fleet}]}]
    reply = client.run_instances(ImageId=image, MinCount=n, MaxCount=n, TagSpecifications=tags)
    return sorted(i["InstanceId"] for i in reply["Instances"])


def _provider(moto: Moto) -> Ec2Provider:
    """The provider over a client that signs with KEY (boto3's default session may hold another
    test's credentials), so the server's recording tells its calls apart."""
    cfg = ProviderConfig(kind="ec2", region="us-east-1", endpoint_url=moto.url)
    return Ec2Provider("big", cfg, _client(moto))


def _states(moto: Moto, ids: list[str]) -> Counter[str]:
    pages = _client(moto).get_paginator("describe_instances").paginate(InstanceIds=ids)
    return Counter(i["State"]["Name"] for p in pages for r in p["Reservations"] for i in r["Instances"])


@pytest.mark.slow
def test_500_terminations_go_in_one_request(moto: Moto, tmp_path: Path) -> None:
    ids = _fleet(moto, 500)
    provider = _provider(moto)
    calls = AwsCalls(tmp_path / "calls.jsonl")
    try:
        failed = terminate_many(provider, ids)
        made = Counter(c.action for c in calls.by(KEY))
    finally:
        calls.close()
    assert failed == {}
    assert made["TerminateInstances"] == 1  # 500 ids, <= 1000 a request
    assert made["DescribeInstances"] <= 5  # ownership: 200 ids a filter, not one call per id
    assert set(_states(moto, ids)) <= {"shutting-down", "terminated"}


def test_a_batch_refuses_another_fleets_instance_and_skips_gone_ones(moto: Moto) -> None:
    ours, theirs = _fleet(moto, 5), _fleet(moto, 1, fleet="other")
    provider = _provider(moto)
    provider.terminate(ours[0])  # gone already: terminate is idempotent
    failed = terminate_many(provider, [*ours, *theirs, "i-0123456789abcdef0"])
    assert set(failed) == set(theirs) and isinstance(failed[theirs[0]], PermanentError)
    assert _states(moto, theirs) == Counter({"running": 1})
    assert set(_states(moto, ours)) <= {"shutting-down", "terminated"}


def test_an_id_that_vanished_between_describe_and_terminate_does_not_fail_the_others(moto: Moto) -> None:
    """TerminateInstances fails as a whole on one unknown id; the batch falls back to each id."""
    ids = _fleet(moto, 4)
    provider = _provider(moto)
    real = provider.client.terminate_instances

    def first_call_sees_a_gone_id(**kwargs: Any) -> Any:
        provider.client.terminate_instances = real
        return real(InstanceIds=[*kwargs["InstanceIds"], "i-0123456789abcdef0"])

    provider.client.terminate_instances = first_call_sees_a_gone_id
    assert terminate_many(provider, ids) == {}
    assert set(_states(moto, ids)) <= {"shutting-down", "terminated"}
