"""Advisory mode with a warm pool, spot and the fast path on, against moto's server on 127.0.0.1
(issue 51, item 2): the advisory controller as `igniter run --advisory` builds it
(wiring.build_advisory_controller) ticks beside an empty region and then beside a leader's fleet
and pool. Every AWS request the server receives is attributed to the key that signed it
(tests/kit/awscalls.py): the advisory's key makes reads only (no RunInstances, StopInstances,
StartInstances, TerminateInstances, CreateTags; no SQS call at all), nothing is even tried and
refused, and the advice lists the pool members it would launch and stop and the (spot) instances
it would launch."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml

from autoscaler.config.policy import load_policy
from autoscaler.fleet.base import POOL_MEMBER, TAG_POOL
from autoscaler.loop.service.wiring import build_advisory_controller, build_controller
from autoscaler.loop.tick.advisory import AdvisoryController, snapshot
from autoscaler.rates.reader import RateReader
from autoscaler.rates.static import ManualRates
from tests.fleet.test_ec2 import WORKLOADS, fleet_instances, tags
from tests.fleet.test_ec2_spot import spot_policy
from tests.kit.awscalls import AwsCalls
from tests.kit.backends import Moto
from tests.kit.control import Clock
from tests.loop.test_leader_e2e import aws  # noqa: F401  (the fixture: templates, and the server's recorder)

pytestmark = pytest.mark.e2e
KEY = "AKIDADVISORYPOOL"
BASE = {w["name"]: float(w["rate_rps"]) for w in WORKLOADS}  # the policy's rates: spot and on-demand planned
HIGH = {name: 3 * rate for name, rate in BASE.items()}
FORBIDDEN = {"RunInstances", "StopInstances", "StartInstances", "TerminateInstances", "CreateTags"}


def policy(tmp_path: Path, moto: Moto) -> Path:
    queue = boto3.client("sqs", endpoint_url=moto.url, region_name="us-east-1").create_queue(QueueName="notices")
    path = spot_policy(tmp_path, moto, interruption_queue=queue["QueueUrl"])
    data = yaml.safe_load(path.read_text())
    data["scaling"]["warm_pool"] = {"size": 1, "refill_delay_s": 0}
    data["scaling"]["fast_path"] = {"enabled": True}
    path.write_text(yaml.safe_dump(data))
    return path


def advisor(path: Path, state: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch) -> tuple[AdvisoryController, Any]:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY)  # its clients sign with their own key:
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)  # a session of its own, which reads it
    ctl = build_advisory_controller(load_policy(path), state, clock)
    monkeypatch.undo()
    assert isinstance(ctl, AdvisoryController)
    rates = ManualRates(dict(BASE))
    ctl.deps.rates = RateReader(rates, 300)
    return ctl, rates


def ticks(ctl: AdvisoryController, clock: Clock, fast: bool = False) -> dict[str, Any]:
    report = ctl.tick(fast=fast)
    clock.advance(30)
    advice = snapshot(ctl.advice.take(), report)
    assert report.ok, advice
    assert advice["counts"]["refused"] == 0, advice  # nothing was even tried
    return advice


def pool_changes(advice: dict[str, Any]) -> Counter[str]:
    return Counter(a["change"] for a in advice["actions"] if a["action"] == "pool")


def test_advisory_with_a_warm_pool_spot_and_the_fast_path_calls_nothing_that_changes_anything(
    moto: Moto,
    aws: AwsCalls,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path, clock = policy(tmp_path, moto), Clock()
    adv, rates = advisor(path, tmp_path / "advisory.sqlite", clock, monkeypatch)

    alone = [ticks(adv, clock), ticks(adv, clock, fast=True), ticks(adv, clock)]  # an empty region
    for advice in (alone[0], alone[2]):
        assert pool_changes(advice) == {"launch": 2}, advice  # one member per type, advised each tick
        launches = [a for a in advice["actions"] if a["action"] == "launch"]
        assert launches and {a["capacity_type"] for a in launches} == {"spot", "on-demand"}, launches
    assert alone[1]["counts"]["launch"] > 0 and pool_changes(alone[1]) == {}  # a fast tick refills nothing
    assert fleet_instances(moto, states=("pending", "running", "stopping", "stopped")) == []

    leader = build_controller(load_policy(path), tmp_path / "leader.sqlite", clock)  # the default key
    leader.deps.rates = RateReader(ManualRates(dict(BASE)), 300)
    assert leader.tick().ok
    members = [i for i in fleet_instances(moto) if tags(i).get(TAG_POOL) == POOL_MEMBER]
    assert len(members) == 2 and all(i["State"]["Name"] in ("pending", "running") for i in members)
    before = sorted(
        (i["InstanceId"], i["State"]["Name"])
        for i in fleet_instances(moto, states=("pending", "running", "stopping", "stopped"))
    )

    beside = ticks(adv, clock)
    stops = {a["instance_id"] for a in beside["actions"] if a["action"] == "pool" and a["change"] == "stop"}
    assert stops == {i["InstanceId"] for i in members}, beside  # initialised members: it would stop them
    assert pool_changes(beside)["launch"] == 0 and beside["counts"]["launch"] == 0, beside  # it agrees
    rates.set(**HIGH)
    fast = ticks(adv, clock, fast=True)
    assert fast["counts"]["launch"] > 0, fast  # a burst: launches advised, none made
    ticks(adv, clock)
    after = sorted(
        (i["InstanceId"], i["State"]["Name"])
        for i in fleet_instances(moto, states=("pending", "running", "stopping", "stopped"))
    )
    assert after == before

    mine = [c for c in aws.calls() if c.key == KEY]
    assert mine and {c.service for c in mine} == {"ec2"}, {c.service for c in mine}  # not even the queue
    assert [c.action for c in mine if c.mutating or c.action in FORBIDDEN] == []
    assert {"DescribeInstances"} <= {c.action for c in mine}
    leader_ops = Counter(c.action for c in aws.calls() if c.key != KEY)
    assert leader_ops["RunInstances"] >= 2  # the recorder counts mutations: the leader's are there
