"""Spot in Terraform: the interruption queue and its EventBridge rules (fleet module), and what
the autoscaler's role may do with them and with spot launches (autoscaler module).

The rules' event patterns are also run through EventBridge itself (moto's server on 127.0.0.1):
the events EC2 and AWS Health publish reach the queue, others do not, and the autoscaler's parser
reads every one that arrives as the notice it should be.
"""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest

from autoscaler.fleet.interruptions import DETAIL_TYPES, GOING_STATES, parse_message
from tests.kit import events
from tests.kit.backends import Moto
from tests.terraform.test_terraform_iam import _conditions, _with_action, statements  # noqa: F401
from tests.terraform.tfhelpers import blocks, unwrap


@pytest.mark.unit
def test_the_rules_send_exactly_the_events_the_autoscaler_reads(fleet: dict[str, Any]) -> None:
    patterns = fleet["locals"]["interruption_events"]
    assert {p["detail-type"][0] for p in patterns.values()} == set(DETAIL_TYPES)
    assert all(len(p["detail-type"]) == 1 for p in patterns.values())
    assert set(patterns["state-change"]["detail"]["state"]) == GOING_STATES
    assert patterns["scheduled-change"] == {
        "source": ["aws.health"],
        "detail-type": ["AWS Health Event"],
        "detail": {"service": ["EC2"], "eventTypeCategory": ["scheduledChange"]},
    }
    rule = fleet["resource"]["aws_cloudwatch_event_rule"]["interruptions"]
    assert "local.interruption_events" in rule["for_each"] and "jsonencode(pattern)" in rule["for_each"]
    assert unwrap(rule["event_pattern"]) == "each.value"
    target = fleet["resource"]["aws_cloudwatch_event_target"]["interruptions"]
    assert unwrap(target["for_each"]) == "aws_cloudwatch_event_rule.interruptions"
    assert unwrap(target["arn"]) == "aws_sqs_queue.interruptions[0].arn"


@pytest.mark.unit
def test_the_queue_is_encrypted_short_lived_and_only_eventbridge_sends(fleet: dict[str, Any]) -> None:
    queue = fleet["resource"]["aws_sqs_queue"]["interruptions"]
    assert unwrap(queue["kms_master_key_id"]) == "aws_kms_key.interruptions[0].arn"
    assert queue["message_retention_seconds"] == 300  # a notice older than its 2 minutes is worth nothing
    assert fleet["resource"]["aws_kms_key"]["interruptions"]["enable_key_rotation"] is True
    policy = fleet["data"]["aws_iam_policy_document"]["interruptions_queue"]
    send, deny = blocks(policy["statement"])
    assert send["actions"] == ["sqs:SendMessage"] and send.get("effect", "Allow") == "Allow"
    assert blocks(send["principals"])[0]["identifiers"] == ["events.amazonaws.com"]
    (source,) = blocks(send["condition"])
    assert source["variable"] == "aws:SourceArn" and "aws_cloudwatch_event_rule.interruptions" in str(source["values"])
    assert deny["effect"] == "Deny" and blocks(deny["condition"])[0]["variable"] == "aws:SecureTransport"
    key = fleet["data"]["aws_iam_policy_document"]["interruptions_key"]
    events_stmt = next(s for s in blocks(key["statement"]) if s["sid"] == "EventBridgeSendsToTheQueue")
    assert set(events_stmt["actions"]) == {"kms:GenerateDataKey", "kms:Decrypt"}
    assert blocks(events_stmt["condition"])[0]["variable"] == "aws:SourceArn"


@pytest.mark.unit
def test_the_queue_url_is_the_policys_interruption_queue(fleet: dict[str, Any], example: dict[str, Any]) -> None:
    assert unwrap(fleet["output"]["interruption_queue_url"]["value"]) == "one(aws_sqs_queue.interruptions[*].url)"
    snippet = example["locals"]["policy_snippet"]
    assert unwrap(snippet["scaling"]["spot"]["interruption_queue"]) == "module.fleet.interruption_queue_url"
    autoscaler = example["module"]["autoscaler"]
    assert unwrap(autoscaler["interruption_queue_arn"]) == "module.fleet.interruption_queue_arn"
    assert unwrap(autoscaler["interruption_queue_kms_key_arn"]) == "module.fleet.interruption_queue_kms_key_arn"


@pytest.mark.unit
def test_the_role_reads_and_deletes_on_that_queue_only(statements: list[dict[str, Any]]) -> None:  # noqa: F811
    sqs = [s for s in statements if any(a.startswith("sqs:") for a in s["actions"])]
    (statement,) = sqs
    assert sorted(statement["actions"]) == ["sqs:DeleteMessage", "sqs:ReceiveMessage"]
    assert statement["resources"] == ["${statement.value}"]
    (decrypt,) = [s for s in _with_action(statements, "kms:Decrypt") if "sqs" in str(_conditions(s))]
    assert _conditions(decrypt)["kms:ViaService"] == ("StringEquals", ["sqs.${local.region}.amazonaws.com"])
    assert decrypt["resources"] == ["${statement.value}"]


@pytest.mark.unit
def test_the_queue_statements_follow_their_variables(autoscaler: dict[str, Any]) -> None:
    document = autoscaler["data"]["aws_iam_policy_document"]["autoscaler"]
    by_sid = {blocks(d["statement"]["content"])[0]["sid"]: d["statement"] for d in blocks(document["dynamic"])}
    assert "var.interruption_queue_arn == null" in by_sid["ReadAndDeleteInterruptionNotices"]["for_each"]
    assert "var.interruption_queue_kms_key_arn == null" in by_sid["DecryptInterruptionNoticesThroughSqs"]["for_each"]


@pytest.mark.unit
def test_spot_launches_come_from_the_fleet_templates_and_tag_the_instance(
    statements: list[dict[str, Any]],  # noqa: F811
) -> None:
    runs = _with_action(statements, "ec2:RunInstances")
    (spot,) = [s for s in runs if "spot-instances-request/*" in str(s["resources"])]
    assert _conditions(spot)["ec2:LaunchTemplate"] == ("ArnEquals", "${var.launch_template_arns}")
    (instances,) = [s for s in runs if s["resources"] == ["${local.ec2_arn}:instance/*"]]
    assert _conditions(instances)["aws:RequestTag/igniter:fleet"] == ("StringEquals", ["${var.name}"])


def _eventbridge_rules(moto: Moto, patterns: dict[str, Any]) -> str:
    sqs = boto3.client("sqs", endpoint_url=moto.url, region_name="us-east-1")
    url = sqs.create_queue(QueueName="igniter-interruptions")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    bus = boto3.client("events", endpoint_url=moto.url, region_name="us-east-1")
    for name, pattern in patterns.items():
        bus.put_rule(Name=f"igniter-{name}", EventPattern=json.dumps(pattern))
        bus.put_targets(Rule=f"igniter-{name}", Targets=[{"Id": "interruption-queue", "Arn": arn}])
    return str(url)


def _publish(moto: Moto, body: str) -> None:
    event = json.loads(body)
    bus = boto3.client("events", endpoint_url=moto.url, region_name="us-east-1")
    entry = {
        "Source": event["source"],
        "DetailType": event["detail-type"],
        "Detail": json.dumps(event["detail"]),
        "Resources": event["resources"],
    }
    assert bus.put_events(Entries=[entry])["FailedEntryCount"] == 0


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("body", "kind"),
    [
        (events.spot_warning("i-0aaa"), "interruption"),
        (events.rebalance("i-0aaa"), "rebalance"),
        (events.state_change("i-0aaa", "shutting-down"), "state_change"),
        (events.scheduled_change("i-0aaa"), "scheduled_change"),
        (events.state_change("i-0aaa", "running"), None),
        (events.state_change("i-0aaa", "pending"), None),
    ],
)
def test_eventbridge_delivers_what_the_rules_match_and_the_autoscaler_reads_it(
    moto: Moto, fleet: dict[str, Any], body: str, kind: str | None
) -> None:
    url = _eventbridge_rules(moto, fleet["locals"]["interruption_events"])
    _publish(moto, body)
    sqs = boto3.client("sqs", endpoint_url=moto.url, region_name="us-east-1")
    messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
    if kind is None:
        assert messages == []
        return
    (message,) = messages
    notice = parse_message(message["Body"], message["ReceiptHandle"])
    assert notice.kind == kind and notice.instance_ids == ("i-0aaa",)
