"""The control loop on EC2 through boto3, against moto's server mode on 127.0.0.1.

Agents are never contacted (`agents.transport: none`): moto gives instances 10.x addresses.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from autoscaler.config.policy import load_policy
from autoscaler.fleet.base import TAG_FLEET, TAG_PLAN_GENERATION, TAG_SLOT
from autoscaler.loop.service.wiring import build_controller, default_planner
from autoscaler.loop.state.store import Store
from autoscaler.loop.tick.controller import Controller
from autoscaler.rates.reader import RateReader
from autoscaler.rates.static import ManualRates
from tests.kit.backends import Moto, launch_image
from tests.kit.control import REPO, Clock, write_policy

pytestmark = pytest.mark.e2e


MUTATING_PREFIXES = ("Describe", "Get")
WORKLOADS = [
    {"name": "alex", "model": "alexnet", "slo_ms": 15, "rate_rps": 1500},
    {"name": "res", "model": "resnet50", "slo_ms": 40, "rate_rps": 800},
    {"name": "vgg", "model": "vgg19", "slo_ms": 60, "rate_rps": 400},
]
LOW = {"alex": 300.0, "res": 100.0, "vgg": 50.0}


def ec2(moto: Moto) -> Any:
    return boto3.client("ec2", endpoint_url=moto.url, region_name="us-east-1")


def setup_templates(moto: Moto) -> str:
    client = ec2(moto)
    image = launch_image(client)
    for name in ("gpu-p3", "gpu-p3-big"):
        client.create_launch_template(LaunchTemplateName=name, LaunchTemplateData={"ImageId": image})
    return image


def policy_file(tmp_path: Path, moto: Moto, **scaling: Any) -> Path:
    return write_policy(
        tmp_path / "policy.yaml",
        fleet="prod",
        workloads=WORKLOADS,
        provider={
            "kind": "ec2",
            "region": "us-east-1",
            "endpoint_url": moto.url,
            "launch_templates": {"p3.2xlarge": "gpu-p3", "p3.8xlarge": "gpu-p3-big"},
        },
        agents={"transport": "none"},
        scaling={"interval_s": 30, "headroom": 0.0, "forecast": "last", "scale_down_delay_s": 0, **scaling},
    )


class Calls:
    """Records every EC2 operation the provider's real boto3 client makes."""

    def __init__(self, client: Any) -> None:
        self.ops: list[str] = []
        client.meta.events.register("before-call.ec2.*", self._record)

    def _record(self, model: Any, **_: Any) -> None:
        self.ops.append(model.name)

    def mutating(self) -> list[str]:
        return [op for op in self.ops if not op.startswith(MUTATING_PREFIXES)]


def controller(path: Path, state: Path, clock: Clock) -> tuple[Controller, Calls, ManualRates]:
    policy = load_policy(path)
    ctl = build_controller(policy, state, clock)
    manual = ManualRates({w.name: w.rate_rps for w in policy.workloads})
    ctl.deps.rates = RateReader(manual, 300)
    return ctl, Calls(ctl.deps.provider.client), manual  # type: ignore[attr-defined]


def fleet_instances(
    moto: Moto, fleet: str = "prod", states: tuple[str, ...] = ("pending", "running")
) -> list[dict[str, Any]]:
    pages = (
        ec2(moto)
        .get_paginator("describe_instances")
        .paginate(
            Filters=[
                {"Name": f"tag:{TAG_FLEET}", "Values": [fleet]},
                {"Name": "instance-state-name", "Values": list(states)},
            ]
        )
    )
    return [i for p in pages for r in p["Reservations"] for i in r["Instances"]]


def tags(inst: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in inst.get("Tags", [])}


def planned_types(report: Any) -> Counter[str]:
    return Counter(s.instance_type for s in report.layout.slots)


def test_launch_idle_scale_in_and_rediscovery(moto: Moto, tmp_path: Path) -> None:
    setup_templates(moto)
    path = policy_file(tmp_path, moto)
    clock = Clock()
    ctl, calls, rates = controller(path, tmp_path / "state.sqlite", clock)

    first = ctl.tick()
    assert first.ok and first.layout is not None and first.layout.slots
    assert Counter(calls.mutating()) == {"RunInstances": len(first.layout.slots)}
    running = fleet_instances(moto)
    assert Counter(i["InstanceType"] for i in running) == planned_types(first)
    assert {tags(i)[TAG_SLOT] for i in running} == {s.slot for s in first.layout.slots}
    assert all(tags(i)[TAG_PLAN_GENERATION] == "1" for i in running)

    clock.advance(30)
    assert ctl.tick().ok
    n = len(calls.ops)
    clock.advance(30)
    second = ctl.tick()
    assert second.ok and calls.mutating() == ["RunInstances"] * len(first.layout.slots)
    assert calls.ops[n:] == ["DescribeInstances"]  # a steady tick: the one listing (paginated), nothing else

    client = ec2(moto)
    image = launch_image(client)
    stranger = client.run_instances(ImageId=image, MinCount=1, MaxCount=1, InstanceType="p3.2xlarge")["Instances"][0]
    rates.set(**LOW)
    clock.advance(30)
    third = ctl.tick()
    assert third.ok and third.layout is not None
    assert len(third.layout.slots) < len(first.layout.slots)
    clock.advance(30)  # make-before-break: surplus goes once the new servers are up
    assert ctl.tick().ok and ctl.tick().ok
    assert calls.mutating().count("TerminateInstances") == len(first.layout.slots) - len(third.layout.slots)
    assert {tags(i)[TAG_SLOT] for i in fleet_instances(moto)} == {s.slot for s in third.layout.slots}
    status = client.describe_instances(InstanceIds=[stranger["InstanceId"]])["Reservations"][0]["Instances"][0]
    assert status["State"]["Name"] == "running"  # untagged: never ours
    ctl.store.close()

    # the state file is lost: the next tick rediscovers the fleet by tag and launches nothing
    (tmp_path / "state.sqlite").unlink()
    fresh, calls2, rates2 = controller(path, tmp_path / "state.sqlite", clock)
    rates2.set(**LOW)
    clock.advance(30)
    report = fresh.tick()
    assert report.ok and "RunInstances" not in calls2.mutating() and "TerminateInstances" not in calls2.mutating()
    assert len(fleet_instances(moto)) == len(third.layout.slots)
    assert any(h["reason"] == "discovered" for h in fresh.store.history())


def test_capacity_error_replans_on_another_type_in_the_same_tick(moto: Moto, tmp_path: Path) -> None:
    setup_templates(moto)
    path = policy_file(tmp_path, moto)
    policy = load_policy(path)
    preferred = Counter(
        i.instance_type
        for i in default_planner(policy, {w.name: w.rate_rps for w in policy.workloads}, {}, {}, None).instances
    ).most_common(1)[0][0]
    ctl, _calls, _ = controller(path, tmp_path / "state.sqlite", Clock())

    def no_capacity(params: dict[str, Any], **_: Any) -> None:
        if params["body"].get("InstanceType") == preferred:
            raise ClientError(
                {
                    "Error": {
                        "Code": "InsufficientInstanceCapacity",
                        "Message": f"We currently do not have sufficient {preferred} capacity",
                    }
                },
                "RunInstances",
            )

    ctl.deps.provider.client.meta.events.register("before-call.ec2.RunInstances", no_capacity)  # type: ignore[attr-defined]
    report = ctl.tick()
    assert report.ok and report.rounds >= 2 and report.layout is not None
    assert preferred not in planned_types(report) and report.layout.slots
    running = fleet_instances(moto)
    assert running and all(i["InstanceType"] != preferred for i in running)
    assert Counter(i["InstanceType"] for i in running) == planned_types(report)
    assert preferred in ctl.current_state().unavailable
    assert report.outcome.errors.get("capacity") == 1


def test_kill_9_between_launch_and_record_duplicates_nothing(moto: Moto, tmp_path: Path) -> None:
    setup_templates(moto)
    path = policy_file(tmp_path, moto)
    state = tmp_path / "state.sqlite"
    env = {**os.environ, "IGNITER_FAULT": "after_launch"}
    cmd = [sys.executable, "-m", "autoscaler", "run", str(path), "--once", "--state", str(state)]
    crashed = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, cwd=REPO)
    assert crashed.returncode == -9, crashed.stderr
    assert len(fleet_instances(moto)) == 1  # launched, never recorded
    store = Store(state)
    assert [r.state.value for r in store.open_records()] == ["requested"]
    store.close()
    for _ in range(2):
        again = subprocess.run(
            cmd[:-2] + ["--state", str(state)], capture_output=True, text=True, timeout=120, cwd=REPO
        )
        assert again.returncode == 0, again.stderr
    running = fleet_instances(moto)
    slots = Counter(tags(i)[TAG_SLOT] for i in running)
    assert slots and max(slots.values()) == 1  # one instance per slot
    store = Store(state)
    assert len(running) == len(store.current_layout().slots)  # type: ignore[union-attr]
    assert any(h["reason"] == "adopted" for h in store.history())
    store.close()


def test_terminate_refuses_instances_of_other_fleets(moto: Moto, tmp_path: Path) -> None:
    from autoscaler.fleet.base import PermanentError
    from autoscaler.fleet.ec2 import Ec2Provider

    setup_templates(moto)
    policy = load_policy(policy_file(tmp_path, moto))
    mine = Ec2Provider("prod", policy.provider)
    theirs = Ec2Provider("other", policy.provider)
    inst = theirs.launch("other-p3.2xlarge-0", "p3.2xlarge", 1)
    with pytest.raises(PermanentError):
        mine.terminate(inst.id)
    assert [i.id for i in theirs.list_instances()] == [inst.id] and mine.list_instances() == []
    mine.terminate("i-0000000000000dead")  # unknown id: not an error
    again = theirs.launch("other-p3.2xlarge-0", "p3.2xlarge", 1)
    assert again.id == inst.id  # idempotent per slot


def test_throttling_is_retried_by_botocore_standard_mode(moto: Moto, tmp_path: Path) -> None:
    from botocore.awsrequest import AWSResponse

    from autoscaler.fleet.base import ThrottledError
    from autoscaler.fleet.ec2 import Ec2Provider

    class Raw:
        def __init__(self, body: bytes) -> None:
            self.body = body

        def stream(self, **_: Any) -> Any:
            yield self.body

    throttle = (
        b"<Response><Errors><Error><Code>RequestLimitExceeded</Code><Message>Request limit exceeded."
        b"</Message></Error></Errors><RequestID>r</RequestID></Response>"
    )
    from autoscaler.fleet.ec2 import make_client

    policy = load_policy(policy_file(tmp_path, moto))
    client = make_client(policy.provider, max_attempts=3)
    assert client.meta.config.retries["mode"] == "standard"
    provider = Ec2Provider("prod", policy.provider, client)
    sent: list[int] = []

    def flaky(request: Any, **_: Any) -> Any:
        sent.append(1)
        return AWSResponse(request.url, 503, {}, Raw(throttle)) if len(sent) <= budget[0] else None

    provider.client.meta.events.register("before-send.ec2.DescribeInstances", flaky)
    budget = [2]
    assert provider.list_instances() == [] and len(sent) == 3  # two throttled attempts, then success
    sent.clear()
    budget[0] = 99
    with pytest.raises(ThrottledError):
        provider.list_instances()
    assert len(sent) == 3  # max_attempts in all, then the error
