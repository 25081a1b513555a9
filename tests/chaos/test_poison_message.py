"""A poison message on the interruption queue (a body nested 5,000 deep: json raises
RecursionError) does not block its batch: the spot warning beside it is handled in the same tick,
and both are deleted. Real SQS and EC2 in moto's server mode."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chaos.report import record
from tests.fleet.test_ec2 import controller, fleet_instances, setup_templates, tags
from tests.fleet.test_ec2_spot import queue_depth, queue_with, running_spot, spot_policy, sqs
from tests.kit import events
from tests.kit.backends import Moto
from tests.kit.control import Clock

pytestmark = [pytest.mark.e2e, pytest.mark.chaos]
POISON = "[" * 5000 + "]" * 5000


def test_the_poison_parses_as_malformed() -> None:
    from autoscaler.fleet.interruptions import _isolated, parse_message

    assert parse_message(POISON, "h").kind == "malformed"
    assert _isolated({"Body": POISON, "ReceiptHandle": "h"}).token == "h"


def test_a_poison_message_beside_a_spot_warning_blocks_nothing(moto: Moto, tmp_path: Path) -> None:
    setup_templates(moto)
    url = queue_with(moto)
    ctl, calls, _ = controller(spot_policy(tmp_path, moto, interruption_queue=url), tmp_path / "s.sqlite", Clock())
    rec, _ = running_spot(ctl, moto)
    sqs(moto).send_message(QueueUrl=url, MessageBody=POISON)
    sqs(moto).send_message(QueueUrl=url, MessageBody=events.spot_warning(rec.instance_id))
    n = len(calls.ops)
    report = ctl.tick()  # the same tick
    assert report.ok, report.error
    going = next(r for r in ctl.store.all_records() if r.key == rec.key)
    assert going.state.value == "going_away"
    assert calls.ops[n:].count("RunInstances") == 1
    replacement = [i for i in fleet_instances(moto) if tags(i)["igniter:slot"] == rec.slot]
    assert len(replacement) == 2
    depth = queue_depth(moto, url)
    record("poison_message", warning_handled_same_tick=int(going.state.value == "going_away"), left_in_queue=depth)
    assert depth == 0  # both deleted: the poison one is not seen again
