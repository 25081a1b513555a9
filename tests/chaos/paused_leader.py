"""One forced trial of a paused DynamoDB leader (tests/chaos/test_paused_leader.py repeats it).

Leader A ticks until its tick sends the mutating EC2 request under test (RunInstances: the first
tick's launch; TerminateInstances: a tick that retires an instance after the rates fell). A
test-only delay, a botocore `before-send` handler put first on A's EC2 client, holds that request
after A's own fence check passed (FencedProvider) and after the request was built and signed,
just before the lease check that `bind_aws` (loop/service/fence.py) makes as a request leaves. A's lease
thread is held too (it renews until then, as a paused process's would not after). The delay lets
the request go only once A's term ran out, B (a second controller with its own state file) has
taken the lease over and ticked. Both lease through DynamoDB and act on EC2 in moto's server mode.

What counts is measured at the server, not by A: A and B sign with their own access keys, and
moto's request recorder (tests/kit/awscalls.py) lists every request the server received. A late
call is a mutating request (not Describe/Get/List, any service) signed by A that the server
received after A's term ran out. `unbound=True` removes the send-time check from A's client: the
fault the probe must see (its late request reaches the server).
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import yaml

from autoscaler.config.policy import load_policy
from autoscaler.fleet.base import TAG_FLEET, TAG_SLOT
from autoscaler.leader.base import Fence
from autoscaler.loop.service.fence import LEASE_HOOK
from autoscaler.loop.service.leadership import Leadership
from autoscaler.loop.service.wiring import build_controller, make_leadership
from autoscaler.loop.tick.controller import Controller
from autoscaler.rates.reader import RateReader
from autoscaler.rates.static import ManualRates
from tests.fleet.test_ec2 import LOW, WORKLOADS, policy_file, setup_templates
from tests.kit.awscalls import AwsCalls
from tests.kit.backends import Moto

TABLE = "igniter-leases"
LEASE_S = 4.0  # a term of 3 s: A's renewals keep it through its ticks on a loaded 2-core machine
KEYS = {"a": "AKIDPAUSEDA", "b": "AKIDLEADERB"}
HIGH = {w["name"]: float(w["rate_rps"]) for w in WORKLOADS}
OPERATIONS = ("RunInstances", "TerminateInstances")


@dataclass
class Outcome:
    operation: str  # the request A was held at
    held_at_pause: bool  # A's fence held when the delay began (the tick's own check had passed)
    late_calls: int  # A's mutating requests the server received after A's term ran out
    late_kinds: tuple[str, ...]  # their operations
    a_error: str  # how A's tick ended
    late_new: int  # instances that are not B's after A resumed
    duplicates: int  # instances beyond one per slot
    instances: int


@dataclass
class Node:
    ctl: Controller
    fence: Fence
    lead: Leadership
    rates: ManualRates


@contextmanager
def signed_as(key: str) -> Iterator[None]:
    """Clients made inside sign with `key` (boto3's default session reads the environment anew)."""
    saved_key, saved_session = os.environ.get("AWS_ACCESS_KEY_ID"), boto3.DEFAULT_SESSION
    os.environ["AWS_ACCESS_KEY_ID"], boto3.DEFAULT_SESSION = key, None
    try:
        yield
    finally:
        boto3.DEFAULT_SESSION = saved_session
        if saved_key is None:
            os.environ.pop("AWS_ACCESS_KEY_ID", None)
        else:
            os.environ["AWS_ACCESS_KEY_ID"] = saved_key


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


def _node(path: Path, state: Path, name: str, rates: dict[str, float]) -> Node:
    policy = load_policy(path)
    fence = Fence(time.monotonic)
    with signed_as(KEYS[name]):
        ctl = build_controller(policy, state, fence=fence)
        lead = make_leadership(policy, fence)
    manual = ManualRates(dict(rates))
    ctl.deps.rates = RateReader(manual, 300)
    return Node(ctl, fence, lead, manual)


def _instances(moto: Moto) -> list[dict[str, Any]]:
    ec2 = boto3.client("ec2", endpoint_url=moto.url, region_name="us-east-1")
    filters = [
        {"Name": f"tag:{TAG_FLEET}", "Values": ["prod"]},
        {"Name": "instance-state-name", "Values": ["pending", "running"]},
    ]
    return [i for r in ec2.describe_instances(Filters=filters)["Reservations"] for i in r["Instances"]]


def _slot(instance: dict[str, Any]) -> str:
    return next(t["Value"] for t in instance.get("Tags", []) if t["Key"] == TAG_SLOT)


class Delay:
    """The test-only delay: holds A's first request of `operation` until `go`, noting whether A's
    fence still held when it arrived (the tick's own check had just passed)."""

    def __init__(self, fence: Fence, operation: str, timeout_s: float) -> None:
        self.fence, self.operation, self.timeout_s = fence, operation, timeout_s
        self.at_call, self.go = threading.Event(), threading.Event()
        self.held_at_pause = False

    def __call__(self, event_name: str, **_: Any) -> None:
        if event_name.rsplit(".", 1)[-1] != self.operation or self.at_call.is_set():
            return None
        self.held_at_pause = self.fence.held
        self.at_call.set()
        self.go.wait(self.timeout_s)
        return None


def _ticks_until(node: Node, delay: Delay, reports: list[Any], ticks: int) -> None:
    """A's tick thread: tick until the delay has caught one; the rates fall after the first tick
    that went through (a tick whose term ran out under load before the delay is simply retried:
    A's renewals go on until the delay catches a request)."""
    fallen = False
    for _ in range(ticks):
        reports.append(node.ctl.tick())
        if delay.at_call.is_set():
            return
        if reports[-1].ok and not fallen:
            node.rates.set(**LOW)
            fallen = True


def _renew_until(node: Node, stop: threading.Event) -> None:
    """A's lease thread, until the process is held (a paused process renews nothing)."""
    while not stop.is_set():
        node.lead.attempt()
        stop.wait(LEASE_S / 6)


def _wait(check: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def trial(
    moto: Moto, tmp_path: Path, operation: str = "RunInstances", *, unbound: bool = False, timeout_s: float = 60.0
) -> Outcome:
    assert operation in OPERATIONS
    moto.reset()
    setup_templates(moto)
    path = _policy(tmp_path, moto)
    aws = AwsCalls(tmp_path / "moto-recording.jsonl")
    # a launch is held in A's first tick; a termination once the rates fell from HIGH to LOW
    a = _node(path, tmp_path / "a.sqlite", "a", LOW if operation == "RunInstances" else HIGH)
    b = _node(path, tmp_path / "b.sqlite", "b", LOW)
    client = a.ctl.deps.provider.inner.client  # type: ignore[attr-defined]
    delay = Delay(a.fence, operation, timeout_s)
    client.meta.events.register_first("before-send", delay, unique_id="chaos-delay")
    if unbound:
        client.meta.events.unregister("before-send", unique_id=LEASE_HOOK)
    renewing = threading.Thread(target=_renew_until, args=(a, delay.at_call), daemon=True)
    reports: list[Any] = []
    ticking = threading.Thread(target=_ticks_until, args=(a, delay, reports, 10), daemon=True)
    try:
        a.lead.attempt(strict=True)
        assert a.fence.held
        b.lead.attempt(strict=True)
        assert not b.fence.held
        renewing.start()
        ticking.start()
        assert delay.at_call.wait(timeout_s), f"A never sent {operation}"
        renewing.join(timeout_s)
        _wait(lambda: not a.fence.held, timeout_s, "A's term to run out")
        mark = len(aws.calls())  # A is held: everything after this of A's is late
        _wait(lambda: b.lead.attempt() is not None and b.fence.held, timeout_s, "B to take the lease over")
        assert b.ctl.tick().ok
        launched_by_b = {i["InstanceId"] for i in _instances(moto)}
        delay.go.set()
        ticking.join(timeout_s)
        assert not ticking.is_alive(), "A's tick did not finish"
        seen = _instances(moto)
        late = [c for c in aws.calls()[mark:] if c.key == KEYS["a"] and c.mutating]
    finally:
        delay.go.set()
        aws.close()
        for node in (a, b):
            node.ctl.store.close()
    slots = Counter(_slot(i) for i in seen)
    return Outcome(
        operation=operation,
        held_at_pause=delay.held_at_pause,
        late_calls=len(late),
        late_kinds=tuple(c.action for c in late),
        a_error=str(reports[-1].error),
        late_new=len({i["InstanceId"] for i in seen} - launched_by_b),
        duplicates=sum(n - 1 for n in slots.values()),
        instances=len(seen),
    )
