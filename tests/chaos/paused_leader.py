"""One forced trial of a paused DynamoDB leader (tests/chaos and benchmarks/chaos.py share it).

Leader A ticks with a delay hook between its fence check and RunInstances (Ec2Provider.before_run,
just after the slot's own lookup): the hook holds A there until its lease has run out, B (a
second controller with its own state file) has taken the lease over and launched, and then lets
A's call go. Both lease through DynamoDB and launch into EC2, in moto's server mode. What counts
is what A's late calls did to the fleet: every instance of it is B's (one per slot), whatever A
sent after its term ended.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import yaml

from autoscaler.config.policy import load_policy
from autoscaler.fleet.base import TAG_FLEET, TAG_SLOT
from autoscaler.leader.base import Fence
from autoscaler.loop.controller import Controller
from autoscaler.loop.leadership import Leadership
from autoscaler.loop.wiring import build_controller, make_leadership
from autoscaler.rates.reader import RateReader
from autoscaler.rates.static import ManualRates
from tests.fleet.test_ec2 import LOW, policy_file, setup_templates
from tests.kit.backends import Moto

TABLE = "igniter-leases"
LEASE_S = 2.0


@dataclass
class Outcome:
    late_calls: int  # RunInstances A sent after its term ran out (the hook makes it 1 or more)
    late_new: int  # of those, the ones that started an instance B had not launched
    duplicates: int  # instances beyond one per slot
    instances: int


def _policy(tmp_path: Path, moto: Moto) -> Path:
    path = policy_file(tmp_path, moto, interval_s=2, settle_s=0)
    data = yaml.safe_load(path.read_text())
    data["leader"] = {"kind": "dynamodb", "table": TABLE, "lease_s": LEASE_S}
    path.write_text(yaml.safe_dump(data))
    boto3.client("dynamodb", endpoint_url=moto.url, region_name="us-east-1").create_table(
        TableName=TABLE,
        KeySchema=[{"AttributeName": "fleet", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "fleet", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    return path


def _node(path: Path, state: Path) -> tuple[Controller, Fence, Leadership]:
    policy = load_policy(path)
    fence = Fence(time.monotonic)
    ctl = build_controller(policy, state, fence=fence)
    ctl.deps.rates = RateReader(ManualRates(dict(LOW)), 300)
    return ctl, fence, make_leadership(policy, fence)


def _instances(moto: Moto) -> list[dict[str, Any]]:
    ec2 = boto3.client("ec2", endpoint_url=moto.url, region_name="us-east-1")
    filters = [
        {"Name": f"tag:{TAG_FLEET}", "Values": ["prod"]},
        {"Name": "instance-state-name", "Values": ["pending", "running"]},
    ]
    return [i for r in ec2.describe_instances(Filters=filters)["Reservations"] for i in r["Instances"]]


def _slot(instance: dict[str, Any]) -> str:
    return next(t["Value"] for t in instance.get("Tags", []) if t["Key"] == TAG_SLOT)


def trial(moto: Moto, tmp_path: Path, timeout_s: float = 60.0) -> Outcome:
    moto.reset()
    setup_templates(moto)
    path = _policy(tmp_path, moto)
    a, fence_a, lead_a = _node(path, tmp_path / "a.sqlite")
    b, fence_b, lead_b = _node(path, tmp_path / "b.sqlite")
    at_call, go = threading.Event(), threading.Event()
    late: list[float] = []

    def pause(_slot: str) -> None:  # between A's fence check and its RunInstances
        if not at_call.is_set():
            at_call.set()
            go.wait(timeout_s)
        if not fence_a.held:
            late.append(time.monotonic())

    a.deps.provider.inner.before_run = pause  # type: ignore[attr-defined]
    try:
        lead_a.attempt(strict=True)
        assert fence_a.held
        lead_b.attempt(strict=True)
        assert not fence_b.held
        ticking = threading.Thread(target=a.tick, daemon=True)
        ticking.start()
        assert at_call.wait(timeout_s), "A never reached a launch"
        deadline = time.monotonic() + timeout_s
        while not fence_b.held and time.monotonic() < deadline:  # A's lease runs out; B takes over
            time.sleep(0.2)
            lead_b.attempt()
        assert fence_b.held and not fence_a.held
        report = b.tick()
        assert report.ok, report.error
        launched_by_b = {i["InstanceId"] for i in _instances(moto)}
        go.set()
        ticking.join(timeout_s)
        assert not ticking.is_alive(), "A's tick did not finish"
        seen = _instances(moto)
    finally:
        go.set()
        for ctl in (a, b):
            ctl.store.close()
    slots = Counter(_slot(i) for i in seen)
    return Outcome(
        late_calls=len(late),
        late_new=len({i["InstanceId"] for i in seen} - launched_by_b),
        duplicates=sum(n - 1 for n in slots.values()),
        instances=len(seen),
    )
