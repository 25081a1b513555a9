"""EC2 at fleet size: terminations, warm-pool stops and returns, and tags go in batches
(fleet/ec2.py terminate_many, fleet/ec2_pool.py, fleet/ec2_batch.py), counted at moto's server
(tests/kit/awscalls.py), not by the code under test."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import boto3
import pytest

from autoscaler.config.policy import ProviderConfig
from autoscaler.fleet.base import (
    POOL_CLAIMED,
    POOL_MEMBER,
    TAG_FLEET,
    TAG_POOL,
    Claim,
    Instance,
    NotFoundError,
    PermanentError,
    terminate_many,
)
from autoscaler.fleet.ec2 import Ec2Provider, classify
from autoscaler.fleet.ec2_batch import each_id, tag_many
from tests.kit.awscalls import AwsCalls
from tests.kit.backends import Moto, launch_image

pytestmark = pytest.mark.e2e

KEY = "AKIDBATCHTEST0000001"


def _client(moto: Moto) -> Any:
    return boto3.client(
        "ec2", endpoint_url=moto.url, region_name="us-east-1", aws_access_key_id=KEY, aws_secret_access_key="x"
    )


def _fleet(moto: Moto, n: int, fleet: str = "big", **more: str) -> list[str]:
    client = _client(moto)
    image = launch_image(client)
    pairs = {TAG_FLEET: fleet, **more}
    tags = [{"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in pairs.items()]}]
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


def _left(moto: Moto, fleet: str = "big") -> list[str]:
    """The fleet's instances neither terminated nor on their way (a filtered describe: a small answer)."""
    live = ["pending", "running", "stopping", "stopped"]
    filters = [{"Name": f"tag:{TAG_FLEET}", "Values": [fleet]}, {"Name": "instance-state-name", "Values": live}]
    pages = _client(moto).get_paginator("describe_instances").paginate(Filters=filters)
    return [i["InstanceId"] for p in pages for r in p["Reservations"] for i in r["Instances"]]


@pytest.mark.slow
def test_500_instances_stop_tag_and_terminate_in_batches(moto: Moto, tmp_path: Path) -> None:
    """500 instances (one RunInstances): stopped, tagged and terminated in a request per 1,000
    ids (a tag set shared by all in one CreateTags, a set of its own in its own), ownership read
    200 ids a DescribeInstances. Before the batches: a StopInstances and a DescribeInstances per id."""
    ids = _fleet(moto, 500)
    provider = _provider(moto)
    tags = {i: {"team": "a"} for i in ids} | {ids[0]: {"team": "b"}, ids[1]: {"team": "c"}}
    calls = AwsCalls(tmp_path / "calls.jsonl")
    made: list[Counter[str]] = []
    try:
        for step in (
            lambda: provider.pool_stop_many(ids),
            lambda: tag_many(
                lambda chunk, pairs: provider.client.create_tags(Resources=chunk, Tags=pairs), tags, classify
            ),
            lambda: terminate_many(provider, ids),
        ):
            n = len(calls.by(KEY))
            assert step() == {}
            made.append(Counter(c.action for c in calls.by(KEY)[n:]))
    finally:
        calls.close()
    stops, tagged, ends = made
    assert stops == {"DescribeInstances": 3, "StopInstances": 1}  # 500 ids: 3 describes of <= 200
    assert tagged == {"CreateTags": 3}  # one per distinct tag set (498 share one)
    assert ends == {"DescribeInstances": 3, "TerminateInstances": 1}
    reply = _client(moto).describe_tags(Filters=[{"Name": "key", "Values": ["team"]}], MaxResults=1000)
    assert Counter(t["Value"] for t in reply["Tags"]) == {"a": 498, "b": 1, "c": 1}
    assert _left(moto) == []


def test_a_batch_refuses_another_fleets_instance_and_skips_gone_ones(moto: Moto) -> None:
    ours, theirs = _fleet(moto, 5), _fleet(moto, 1, fleet="other")
    provider = _provider(moto)
    provider.terminate(ours[0])  # gone already: terminate is idempotent
    ops: Counter[str] = Counter()
    provider.client.meta.events.register("before-call.ec2.*", lambda model, **_: ops.update([model.name]))
    names = {ours[0]: "pool-big-0", ours[1]: "pool-big-1", ours[2]: "pool-big-2", theirs[0]: "pool-big-3"}
    returned = provider.pool_return_many(names)
    assert set(returned) == set(theirs) and isinstance(returned[theirs[0]], PermanentError)
    assert ops == {"DescribeInstances": 1, "CreateTags": 2, "StopInstances": 1}  # a name each, one stop
    assert _states(moto, ours[1:3]) == Counter({"stopped": 2}) and _states(moto, theirs) == Counter({"running": 1})
    failed = terminate_many(provider, [*ours, *theirs, "i-0123456789abcdef0"])
    assert set(failed) == set(theirs) and isinstance(failed[theirs[0]], PermanentError)
    assert _states(moto, theirs) == Counter({"running": 1})
    assert set(_states(moto, ours)) <= {"shutting-down", "terminated"}


def test_an_id_that_vanished_between_describe_and_terminate_does_not_fail_the_others(moto: Moto) -> None:
    """TerminateInstances fails as a whole on one unknown id: an id the error names is left out
    and the rest sent again; one it does not name is found by halves."""
    ids = _fleet(moto, 4)
    provider = _provider(moto)
    gone = "i-0123456789abcdef0"
    sent: list[list[str]] = []
    stop = provider._ids_call("stop_instances")
    failed = each_id(lambda chunk: (sent.append(chunk), stop(chunk)), [*ids[:2], gone, *ids[2:]], classify)
    assert set(failed) == {gone} and isinstance(failed[gone], NotFoundError)
    assert sent == [[*ids[:2], gone, *ids[2:]], ids]  # named: sent again without it
    real = provider.client.terminate_instances

    def first_call_sees_a_gone_id(**kwargs: Any) -> Any:
        provider.client.terminate_instances = real
        return real(InstanceIds=[*kwargs["InstanceIds"], gone])

    provider.client.terminate_instances = first_call_sees_a_gone_id
    assert terminate_many(provider, ids) == {}
    assert set(_states(moto, ids)) <= {"shutting-down", "terminated"}


def test_warm_starts_go_in_one_start_request(moto: Moto) -> None:
    """Four claims of stopped members: found and owned in a describe each, a CreateTags per claim
    (its own slot), one StartInstances; a claim whose member is gone falls back to a launch (here
    refused: no launch template), and a repeated claim starts nothing. Before that, the members
    are stopped as a tick does it: list_instances' one DescribeInstances also holds the members
    and who owns them, so pool_members and the stop's ownership check are served from it, until a
    request that may change an instance (the stop) is made; then they are described again."""
    members = _fleet(moto, 5, **{TAG_POOL: POOL_MEMBER})
    provider = _provider(moto)
    ops: Counter[str] = Counter()
    provider.client.meta.events.register("before-call.ec2.*", lambda model, **_: ops.update([model.name]))
    provider.list_instances()
    assert set(members) <= {m.id for m in provider.pool_members()}
    assert provider.pool_stop_many(members) == {}
    assert ops == {"DescribeInstances": 1, "StopInstances": 1}  # members and ownership: the one listing
    assert {m.state for m in provider.pool_members() if m.id in members} == {"stopped"}
    assert ops["DescribeInstances"] == 2  # after the stop: asked again
    provider.terminate(members[4])
    ops.clear()
    claims = [Claim(m, f"s{k}", "p3.2xlarge", 3) for k, m in enumerate(members)]
    started = provider.start_pooled_many(claims)
    assert [getattr(i, "slot", None) for i in started[:4]] == ["s0", "s1", "s2", "s3"]
    assert all(isinstance(i, Instance) and i.tags[TAG_POOL] == POOL_CLAIMED for i in started[:4])
    assert isinstance(started[4], PermanentError)  # gone: a launch, and there is no template
    assert ops == {"DescribeInstances": 3, "CreateTags": 4, "StartInstances": 1}
    assert _states(moto, members[:4]) == Counter({"running": 4})
    ops.clear()
    again = provider.start_pooled_many(claims[:4])
    assert [i.id for i in again if isinstance(i, Instance)] == members[:4] and ops == {"DescribeInstances": 1}
