"""EventBridge events as EC2 and AWS Health put them on the interruption queue (the shapes in the
EC2 and AWS Health user guides), for the interruption tests."""

from __future__ import annotations

import json
from typing import Any

TIME = "2026-12-01T08:00:00Z"


def _event(detail_type: str, source: str, detail: dict[str, Any], resources: list[str], time: str) -> str:
    return json.dumps(
        {
            "version": "0",
            "id": "7bf73129-1428-4cd3-a780-95db273d1602",
            "detail-type": detail_type,
            "source": source,
            "account": "123456789012",
            "time": time,
            "region": "us-east-1",
            "resources": resources,
            "detail": detail,
        }
    )


def spot_warning(instance_id: str, time: str = TIME, action: str = "terminate") -> str:
    return _event(
        "EC2 Spot Instance Interruption Warning",
        "aws.ec2",
        {"instance-id": instance_id, "instance-action": action},
        [f"arn:aws:ec2:us-east-1a:instance/{instance_id}"],
        time,
    )


def rebalance(instance_id: str, time: str = TIME) -> str:
    return _event(
        "EC2 Instance Rebalance Recommendation",
        "aws.ec2",
        {"instance-id": instance_id},
        [f"arn:aws:ec2:us-east-1a:instance/{instance_id}"],
        time,
    )


def state_change(instance_id: str, state: str, time: str = TIME) -> str:
    return _event(
        "EC2 Instance State-change Notification",
        "aws.ec2",
        {"instance-id": instance_id, "state": state},
        [f"arn:aws:ec2:us-east-1:123456789012:instance/{instance_id}"],
        time,
    )


def scheduled_change(instance_id: str, time: str = TIME, start: str = "Wed, 02 Dec 2026 15:10:09 GMT") -> str:
    return _event(
        "AWS Health Event",
        "aws.health",
        {
            "eventArn": "arn:aws:health:us-east-1::event/EC2/AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED/x",
            "service": "EC2",
            "eventTypeCode": "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
            "eventTypeCategory": "scheduledChange",
            "startTime": start,
            "eventDescription": [{"language": "en_US", "latestDescription": "retirement"}],
            "affectedEntities": [{"entityValue": instance_id}],
        },
        [instance_id],
        time,
    )


def via_sns(body: str) -> str:
    return json.dumps({"Type": "Notification", "MessageId": "m", "TopicArn": "arn:aws:sns:x", "Message": body})
