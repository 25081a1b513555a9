"""Parsing the interruption queue's messages (fleet/interruptions.py): every event kind, SNS
envelopes, and malformed bodies (logged, deleted, nothing else)."""

from __future__ import annotations

import json
import logging

import pytest

from autoscaler.fleet.interruptions import parse_message
from tests.kit import events

pytestmark = pytest.mark.unit


T0 = 1796112000.0  # 2026-12-01T08:00:00Z


def test_a_spot_warning_gives_two_minutes():
    n = parse_message(events.spot_warning("i-0abc"), "rh-1")
    assert (n.kind, n.instance_ids, n.at, n.deadline, n.token) == ("interruption", ("i-0abc",), T0, T0 + 120, "rh-1")
    assert "terminate" in n.detail


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        (events.rebalance("i-0abc"), "rebalance"),
        (events.state_change("i-0abc", "stopping"), "state_change"),
        (events.state_change("i-0abc", "shutting-down"), "state_change"),
        (events.state_change("i-0abc", "terminated"), "state_change"),
    ],
)
def test_rebalance_and_state_changes_name_the_instance(body, kind):
    n = parse_message(body)
    assert n.kind == kind and n.instance_ids == ("i-0abc",) and n.deadline is None


def test_a_state_change_to_running_needs_nothing():
    n = parse_message(events.state_change("i-0abc", "running"))
    assert n.kind == "ignored" and n.instance_ids == ()


def test_a_scheduled_retirement_goes_at_its_start_time():
    n = parse_message(events.scheduled_change("i-0abc"))
    assert n.kind == "scheduled_change" and n.instance_ids == ("i-0abc",)
    assert n.deadline == pytest.approx(T0 + 86400 + 7 * 3600 + 10 * 60 + 9)


def test_other_health_events_and_other_events_are_ignored():
    other = json.loads(events.scheduled_change("i-0abc"))
    other["detail"]["eventTypeCategory"] = "issue"
    assert parse_message(json.dumps(other)).kind == "ignored"
    unrelated = json.loads(events.rebalance("i-0abc"))
    unrelated["detail-type"] = "EC2 AMI State Change"
    assert parse_message(json.dumps(unrelated)).kind == "ignored"


def test_sns_envelopes_are_unwrapped():
    assert parse_message(events.via_sns(events.spot_warning("i-0abc"))).instance_ids == ("i-0abc",)


@pytest.mark.parametrize(
    "body",
    [
        "not json at all",
        "[1, 2]",
        json.dumps({"detail": {}}),
        json.dumps({"detail-type": "EC2 Spot Instance Interruption Warning", "detail": "i-0abc"}),
        json.dumps({"detail-type": "EC2 Spot Instance Interruption Warning", "detail": {"instance-action": "stop"}}),
        json.dumps({"detail-type": "EC2 Instance Rebalance Recommendation", "detail": {"instance-id": 42}}),
        events.spot_warning("i-0abc", time="yesterday"),
        json.dumps(
            {"detail-type": "AWS Health Event", "detail": {"service": "EC2", "eventTypeCategory": "scheduledChange"}}
        ),
    ],
)
def test_malformed_messages_are_logged_and_name_nothing(body, caplog):
    with caplog.at_level(logging.WARNING, "autoscaler.fleet.interruptions"):
        n = parse_message(body, "rh-9")
    assert n.kind == "malformed" and n.instance_ids == () and n.token == "rh-9"
    assert "malformed" in caplog.text
