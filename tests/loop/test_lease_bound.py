"""The lease check every mutating AWS request passes as it is sent (loop/service/fence.py's bind_aws),
on real botocore clients whose wire is a before-send handler that records what reached it and
answers in place of AWS: nothing leaves this process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from botocore.config import Config
from botocore.exceptions import EndpointConnectionError

from autoscaler.config.policy import load_policy
from autoscaler.leader.base import Fence, LeaseLost, NotLeader, Term
from autoscaler.loop.service.fence import LEASE_HOOK, bind_aws
from autoscaler.loop.service.wiring import build_controller
from tests.kit.control import write_policy
from tests.leader.test_fence import Monotonic

pytestmark = pytest.mark.unit


class Raw:
    def __init__(self, body: bytes) -> None:
        self.body = body

    def stream(self, **_: Any) -> Any:
        yield self.body


class Wire:
    """Stands for the socket: records each request that got this far, and answers it. `fail`
    first attempts end in a connection error (botocore retries those)."""

    def __init__(self, fail: int = 0, on_fail: Any = None) -> None:
        self.sent: list[str] = []
        self.fail, self.on_fail = fail, on_fail

    def __call__(self, request: Any, event_name: str, **_: Any) -> AWSResponse:
        self.sent.append(event_name.rsplit(".", 1)[-1])
        if self.fail:
            self.fail -= 1
            if self.on_fail is not None:
                self.on_fail()
            raise EndpointConnectionError(endpoint_url=request.url)
        body = b"{}" if ".sqs." in event_name else b"<Response></Response>"
        return AWSResponse(request.url, 200, {}, Raw(body))


class Part:
    def __init__(self, client: Any) -> None:
        self.client = client


def bound(service: str, fence: Fence, wire: Wire) -> Any:
    config = Config(retries={"mode": "standard", "total_max_attempts": 3})
    made = boto3.client(service, region_name="us-east-1", endpoint_url="http://127.0.0.1:9", config=config)
    assert bind_aws(fence, [Part(made), object()]) == 1  # a part without a client is skipped
    made.meta.events.register("before-send", wire)  # after the lease check, as the socket is
    return made


def leading(clock: Monotonic, until: float) -> Fence:
    fence = Fence(clock)
    fence.grant(Term(leader=True, token=3, holder="me", valid_until=until))
    return fence


def test_mutating_requests_go_while_the_term_holds_and_none_after() -> None:
    clock, wire = Monotonic(), Wire()
    ec2 = bound("ec2", leading(clock, 10.0), wire)
    ec2.terminate_instances(InstanceIds=["i-1"])
    ec2.describe_instances()
    assert wire.sent == ["TerminateInstances", "DescribeInstances"]
    clock.t = 10.0  # the term ran out: e.g. the process was stopped after the tick's own check
    with pytest.raises(LeaseLost, match=r"lease lost: ec2 RunInstances refused: not the leader \(the term of token 3"):
        ec2.run_instances(MinCount=1, MaxCount=1, ImageId="ami-1", ClientToken="t")
    with pytest.raises(NotLeader):
        ec2.terminate_instances(InstanceIds=["i-1"])
    ec2.describe_instances()  # reads still go: a standby may look
    ec2.get_console_output(InstanceId="i-1")
    assert wire.sent == ["TerminateInstances", "DescribeInstances", "DescribeInstances", "GetConsoleOutput"]


def test_a_retry_is_checked_again_and_refused_once_the_term_ran_out() -> None:
    clock = Monotonic()
    wire = Wire(fail=1, on_fail=lambda: setattr(clock, "t", 20.0))  # the term ends during the first try
    ec2 = bound("ec2", leading(clock, 10.0), wire)
    with pytest.raises(LeaseLost):
        ec2.terminate_instances(InstanceIds=["i-1"])
    assert wire.sent == ["TerminateInstances"]  # the first attempt only: its retry was not sent


def test_sqs_deletes_and_receives_need_the_term() -> None:
    clock, wire = Monotonic(), Wire()
    sqs = bound("sqs", leading(clock, 1.0), wire)
    url = "http://127.0.0.1:9/123456789012/q"
    sqs.delete_message_batch(QueueUrl=url, Entries=[{"Id": "0", "ReceiptHandle": "h"}])
    clock.t = 1.0
    with pytest.raises(LeaseLost):  # a receive hides messages from everyone else: not a read
        sqs.receive_message(QueueUrl=url)
    with pytest.raises(LeaseLost):
        sqs.delete_message_batch(QueueUrl=url, Entries=[{"Id": "0", "ReceiptHandle": "h"}])
    sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])
    assert wire.sent == ["DeleteMessageBatch", "GetQueueAttributes"]


QUEUE = "https://sqs.us-east-1.amazonaws.com/123456789012/q"


def mutate(made: Any) -> None:
    if made.meta.service_model.service_name == "ec2":
        made.terminate_instances(InstanceIds=["i-1"])
    else:
        made.delete_message(QueueUrl=QUEUE, ReceiptHandle="h")


def test_the_controller_of_igniter_run_binds_its_ec2_and_sqs_clients(tmp_path: Path) -> None:
    policy = load_policy(
        write_policy(
            tmp_path / "policy.yaml",
            fleet="prod",
            provider={"kind": "ec2", "region": "us-east-1", "launch_templates": {"*": "gpu"}},
            agents={"transport": "none"},
            scaling={"spot": {"interruption_queue": QUEUE}},
        )
    )
    ctl = build_controller(policy, tmp_path / "state.sqlite", fence=Fence(Monotonic()))  # never granted
    library = build_controller(policy, tmp_path / "other.sqlite")  # no fence: nothing bound
    try:
        ec2, sqs = ctl.deps.provider.inner.client, ctl.deps.interruptions._target.client  # type: ignore[attr-defined]
        for made in (ec2, sqs):
            wire = Wire()
            made.meta.events.register("before-send", wire)
            with pytest.raises(LeaseLost):
                mutate(made)
            assert wire.sent == []
            made.meta.events.unregister("before-send", unique_id=LEASE_HOOK)  # the fault: no check at send
            mutate(made)
            assert len(wire.sent) == 1
        wire = Wire()
        library.deps.provider.client.meta.events.register("before-send", wire)  # type: ignore[attr-defined]
        mutate(library.deps.provider.client)  # type: ignore[attr-defined]
        assert wire.sent == ["TerminateInstances"]
    finally:
        ctl.store.close()
        library.store.close()
