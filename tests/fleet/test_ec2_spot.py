"""Spot capacity on EC2 through boto3, against moto's server mode on 127.0.0.1.

Agents are never contacted (`agents.transport: none`): moto gives instances 10.x addresses.
Capacity errors are injected on the provider's real boto3 client (botocore's before-call hook),
since moto never answers with one.
"""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from autoscaler.config.policy import load_policy
from autoscaler.fleet.base import TAG_CAPACITY, TAG_FLEET, TAG_SLOT
from autoscaler.loop.service.wiring import default_planner
from tests.fleet.test_ec2 import WORKLOADS, controller, fleet_instances, setup_templates, tags
from tests.kit import events
from tests.kit.backends import Moto
from tests.kit.control import Clock, write_policy

pytestmark = pytest.mark.e2e


TYPES = [
    {"name": "p3.2xlarge", "gpu": "v100", "gpus": 1, "price_per_hour": 3.06, "spot_price_per_hour": 1.071},
    {"name": "p3.8xlarge", "gpu": "v100", "gpus": 4, "price_per_hour": 12.24, "spot_price_per_hour": 4.284},
]


def spot_policy(tmp_path: Path, moto: Moto, **spot: Any) -> Path:
    return write_policy(
        tmp_path / "policy.yaml",
        fleet="prod",
        instance_types=TYPES,
        workloads=WORKLOADS,
        provider={
            "kind": "ec2",
            "region": "us-east-1",
            "endpoint_url": moto.url,
            "launch_templates": {"p3.2xlarge": "gpu-p3", "p3.8xlarge": "gpu-p3-big"},
        },
        agents={"transport": "none"},
        scaling={
            "interval_s": 30,
            "headroom": 0.0,
            "forecast": "last",
            "scale_down_delay_s": 0,
            "spot": {"min_on_demand_fraction": 0.3, **spot},
        },
    )


class RunRequests:
    """The RunInstances parameters the provider's real client sends (after botocore's validation)."""

    def __init__(self, client: Any) -> None:
        self.params: list[dict[str, Any]] = []
        client.meta.events.register("before-call.ec2.RunInstances", self._record)

    def _record(self, params: dict[str, Any], **_: Any) -> None:
        self.params.append(params["body"])


def test_a_spot_launch_carries_the_market_options_and_tags(moto: Moto, tmp_path: Path) -> None:
    setup_templates(moto)
    ctl, _calls, _ = controller(spot_policy(tmp_path, moto), tmp_path / "state.sqlite", Clock())
    sent = RunRequests(ctl.deps.provider.client)  # type: ignore[attr-defined]
    report = ctl.tick()
    assert report.ok and report.layout is not None
    spot_slots = {s.slot for s in report.layout.slots if s.capacity_type == "spot"}
    od_slots = {s.slot for s in report.layout.slots if s.capacity_type == "on-demand"}
    assert spot_slots and od_slots and all("-spot-" in s for s in spot_slots)
    by_slot = {_tag(p, TAG_SLOT): p for p in sent.params}
    for slot in spot_slots:
        p = by_slot[slot]
        assert p["InstanceMarketOptions.MarketType"] == "spot"
        assert p["InstanceMarketOptions.SpotOptions.SpotInstanceType"] == "one-time"
        assert p["InstanceMarketOptions.SpotOptions.InstanceInterruptionBehavior"] == "terminate"
        assert _tag(p, TAG_CAPACITY) == "spot" and _tag(p, TAG_FLEET) == "prod"
    for slot in od_slots:
        assert not any(k.startswith("InstanceMarketOptions") for k in by_slot[slot])
        assert _tag(by_slot[slot], TAG_CAPACITY) == "on-demand"
    running = {tags(i)[TAG_SLOT]: i for i in fleet_instances(moto)}
    assert set(running) == spot_slots | od_slots
    assert {s for s, i in running.items() if i.get("InstanceLifecycle") == "spot"} == spot_slots
    assert {s for s, i in running.items() if tags(i)[TAG_CAPACITY] == "spot"} == spot_slots
    records = {r.slot: r.capacity_type for r in ctl.store.open_records()}
    assert {s for s, c in records.items() if c == "spot"} == spot_slots


def _tag(params: dict[str, Any], key: str) -> str | None:
    """A tag's value from RunInstances' flattened query parameters."""
    for k, v in params.items():
        if k.startswith("TagSpecification.1.Tag.") and k.endswith(".Key") and v == key:
            return params[k[: -len("Key")] + "Value"]
    return None


def test_an_injected_spot_capacity_error_replans_on_on_demand_in_the_same_tick(moto: Moto, tmp_path: Path) -> None:
    setup_templates(moto)
    path = spot_policy(tmp_path, moto)
    policy = load_policy(path)
    rates = {w.name: w.rate_rps for w in policy.workloads}
    first = default_planner(policy, rates, {}, {}, None)
    spot_types = Counter(i.instance_type for i in first.instances if i.capacity_type == "spot")
    assert spot_types
    ctl, _calls, _ = controller(path, tmp_path / "state.sqlite", Clock())
    refused: list[str] = []

    def no_spot(params: dict[str, Any], **_: Any) -> None:
        body = params["body"]
        if body.get("InstanceMarketOptions.MarketType") == "spot":
            refused.append(body["InstanceType"])
            code = "InsufficientInstanceCapacity" if len(refused) % 2 else "SpotMaxPriceTooLow"
            raise ClientError({"Error": {"Code": code, "Message": "no spot capacity (injected)"}}, "RunInstances")

    ctl.deps.provider.client.meta.events.register("before-call.ec2.RunInstances", no_spot)  # type: ignore[attr-defined]
    report = ctl.tick()
    assert report.ok and report.rounds >= 2 and report.layout is not None, report.outcome.failed
    assert refused and report.outcome.errors.get("capacity") == len(refused)
    assert all(s.capacity_type == "on-demand" for s in report.layout.slots)
    running = fleet_instances(moto)
    assert running and not any(i.get("InstanceLifecycle") == "spot" for i in running)
    assert Counter(i["InstanceType"] for i in running) == Counter(s.instance_type for s in report.layout.slots)
    unavailable = ctl.current_state().unavailable
    assert {f"{t}@spot" for t in refused} <= set(unavailable)
    assert not set(unavailable) & {t["name"] for t in TYPES}  # the on-demand offerings stay available
    assert sum(report.layout.capacity().values()) >= sum(rates.values()) * 0.999


def sqs(moto: Moto) -> Any:
    return boto3.client("sqs", endpoint_url=moto.url, region_name="us-east-1")


def queue_with(moto: Moto, *bodies: str) -> str:
    client = sqs(moto)
    url = client.create_queue(QueueName="igniter-interruptions")["QueueUrl"]
    for body in bodies:
        client.send_message(QueueUrl=url, MessageBody=body)
    return str(url)


def queue_depth(moto: Moto, url: str) -> int:
    attrs = sqs(moto).get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    )["Attributes"]
    return int(attrs["ApproximateNumberOfMessages"]) + int(attrs["ApproximateNumberOfMessagesNotVisible"])


def running_spot(ctl: Any, moto: Moto) -> tuple[Any, dict[str, Any]]:
    """A ready spot record and its instance in moto, after two ticks (launch, boot)."""
    clock = ctl.deps.clock
    for _ in range(2):
        assert ctl.tick().ok
        clock.advance(30)
    rec = next(r for r in ctl.store.open_records() if r.capacity_type == "spot" and r.state.value == "ready")
    inst = next(i for i in fleet_instances(moto) if i["InstanceId"] == rec.instance_id)
    return rec, inst


def test_an_interruption_warning_replaces_the_instance_in_the_same_tick(moto: Moto, tmp_path: Path) -> None:
    setup_templates(moto)
    url = queue_with(moto)
    path = spot_policy(tmp_path, moto, interruption_queue=url)
    ctl, calls, _ = controller(path, tmp_path / "state.sqlite", Clock())
    rec, inst = running_spot(ctl, moto)
    assert inst.get("InstanceLifecycle") == "spot"
    sqs(moto).send_message(QueueUrl=url, MessageBody=events.spot_warning(rec.instance_id))
    n = len(calls.ops)
    report = ctl.tick()
    assert report.ok, report.error
    assert calls.mutating()[-1:] == ["RunInstances"] and calls.ops[n:].count("RunInstances") == 1
    going = next(r for r in ctl.store.all_records() if r.key == rec.key)
    assert going.state.value == "going_away"
    assert [h["reason"] for h in ctl.store.history(rec.slot) if h["attempt"] == rec.attempt][-1] == "interruption"
    replacement = [
        i for i in fleet_instances(moto) if tags(i)[TAG_SLOT] == rec.slot and i["InstanceId"] != rec.instance_id
    ]
    assert len(replacement) == 1 and tags(replacement[0])["igniter:attempt"] == str(rec.attempt + 1)
    assert replacement[0].get("InstanceLifecycle") == "spot"
    assert queue_depth(moto, url) == 0  # deleted once handled
    assert "TerminateInstances" not in calls.ops[n:]  # it serves until its replacement does


def test_a_malformed_message_is_logged_and_deleted_and_nothing_else_changes(
    moto: Moto, tmp_path: Path, caplog: Any
) -> None:
    setup_templates(moto)
    url = queue_with(moto)
    ctl, calls, _ = controller(spot_policy(tmp_path, moto, interruption_queue=url), tmp_path / "s.sqlite", Clock())
    running_spot(ctl, moto)
    history, instances = len(ctl.store.history()), sorted(i["InstanceId"] for i in fleet_instances(moto))
    sqs(moto).send_message(QueueUrl=url, MessageBody='{"detail-type": "EC2 Spot Instance Interruption Warning"')
    n = len(calls.ops)
    with caplog.at_level(logging.WARNING):
        report = ctl.tick()
    assert report.ok and "malformed" in caplog.text
    assert report.outcome.errors.get("interruptions") == 1
    assert [op for op in calls.ops[n:] if not op.startswith(("Describe", "Get"))] == []
    assert len(ctl.store.history()) == history
    assert sorted(i["InstanceId"] for i in fleet_instances(moto)) == instances
    assert queue_depth(moto, url) == 0


def test_the_poll_between_ticks_keeps_what_it_saw_for_the_tick(moto: Moto) -> None:
    from autoscaler.fleet.interruptions import SqsInterruptions

    url = queue_with(moto, "not an event")
    source = SqsInterruptions(url, sqs(moto))
    assert source.poll() is False  # a malformed message names no instance: no early tick
    sqs(moto).send_message(QueueUrl=url, MessageBody=events.spot_warning("i-0abc"))
    assert source.poll() is True and source.poll() is True  # still kept, not yet received by a tick
    notices = source.receive()
    assert sorted(n.kind for n in notices) == ["interruption", "malformed"]
    assert source.receive() == [] and queue_depth(moto, url) == 2  # handed over once; deleted by done
    source.done(notices)
    assert queue_depth(moto, url) == 0 and source.poll() is False
