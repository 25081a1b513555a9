"""New EC2 nodes' host keys, trusted through the cloud API: moto as EC2, the real sshd, a real agent.

GetConsoleOutput is answered the way EC2 answers it (base64 Output, decoded by boto3's own
after-call handler) through botocore's `before-call.ec2.GetConsoleOutput` hook, with the console
text a node's cloud-init prints, holding the sshd fixture's real host key. Instances have moto's
10.x addresses: those only label the pins; every SSH connection goes to `host_override` 127.0.0.1.
"""

from __future__ import annotations

import base64
import logging
import shlex
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ClientError
from botocore.handlers import decode_console_output

from autoscaler.config.policy import load_policy
from autoscaler.core.fleet.lifecycle import State
from autoscaler.fleet.base import Instance
from autoscaler.fleet.ec2 import Ec2Provider
from autoscaler.loop.service.wiring import build_controller
from autoscaler.loop.tick.controller import Controller
from autoscaler.transport.base import TransportError, TransportFault
from autoscaler.transport.pins import MARKER, PinnedHostKeys
from autoscaler.transport.ssh import SshTransport
from tests.fleet.test_console import keygen
from tests.kit.backends import Moto, Sshd, free_port, launch_image
from tests.kit.control import Clock, cloud_init_console, stub_planner, write_policy
from tests.transport.test_ssh import AGENT, running_agent

pytestmark = pytest.mark.e2e


TEMPLATES = {"p3.2xlarge": "gpu-p3", "p3.8xlarge": "gpu-p3-big"}


class Console:
    """GetConsoleOutput as EC2 would answer it, for the instances given an output; the others fall
    through to moto (whose sample console has no host keys: the node is still booting)."""

    def __init__(self, client: Any) -> None:
        self.outputs: dict[str, str] = {}
        self.requests: list[dict[str, Any]] = []
        self.refuse_latest = False
        client.meta.events.register("before-call.ec2.GetConsoleOutput", self)

    def __call__(self, params: dict[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]] | None:
        body = params["body"]
        self.requests.append(dict(body))
        if self.refuse_latest and str(body.get("Latest", "")).lower() == "true":
            raise ClientError(
                {
                    "Error": {
                        "Code": "UnsupportedOperation",
                        "Message": "The instance type does not support the latest console output.",
                    }
                },
                "GetConsoleOutput",
            )
        text = self.outputs.get(body["InstanceId"])
        if text is None:
            return None
        parsed = {
            "InstanceId": body["InstanceId"],
            "Timestamp": datetime.now(UTC),
            "Output": base64.b64encode(text.encode()).decode(),
            "ResponseMetadata": {"HTTPStatusCode": 200},
        }
        return AWSResponse(params["url"], 200, {}, None), parsed


class Spy:
    """The real SSH transport, with a record of which instances the controller contacted."""

    def __init__(self, inner: SshTransport) -> None:
        self.inner = inner
        self.calls: list[tuple[str, str]] = []

    def apply(self, instance: Instance, assignment: dict[str, Any]) -> None:
        self.calls.append(("apply", instance.id))
        self.inner.apply(instance, assignment)

    def status(self, instance: Instance) -> dict[str, Any]:
        self.calls.append(("status", instance.id))
        return self.inner.status(instance)

    def close(self) -> None:
        self.inner.close()


def ec2(moto: Moto) -> Any:
    return boto3.client("ec2", endpoint_url=moto.url, region_name="us-east-1")


def setup_templates(moto: Moto) -> None:
    client = ec2(moto)
    image = launch_image(client)
    for name in TEMPLATES.values():
        client.create_launch_template(LaunchTemplateName=name, LaunchTemplateData={"ImageId": image})


def host_key(sshd: Sshd) -> str:
    return " ".join((sshd.dir / "host_ed25519.pub").read_text().split()[:2])


def policy_path(tmp_path: Path, moto: Moto, sshd: Sshd, agent_state: Path, model_dir: Path, **agents: Any) -> Path:
    workload = {"name": "alex", "model": "alexnet", "slo_ms": 15, "rate_rps": 50, "model_dir": str(model_dir)}
    return write_policy(
        tmp_path / "policy.yaml",
        fleet="keys",
        workloads=[workload],
        provider={
            "kind": "ec2",
            "region": "us-east-1",
            "endpoint_url": moto.url,
            "launch_templates": TEMPLATES,
            "ready_timeout_s": 600,
        },
        agents={
            "transport": "ssh",
            "user": sshd.user,
            "key_file": str(sshd.key_file),
            "port": sshd.port,
            "host_override": "127.0.0.1",
            "connect_timeout_s": 5,
            "command_timeout_s": 60,
            "agent_command": shlex.join(AGENT),
            "state_dir": str(agent_state),
            "server_base_port": min(free_port(), 64000),
            **agents,
        },
        scaling={"interval_s": 30, "headroom": 0.0, "forecast": "last", "scale_down_delay_s": 0},
    )


@pytest.fixture()
def fleet(
    moto: Moto, sshd: Sshd, tiny_model_dir: Path, tmp_path: Path
) -> Iterator[tuple[Controller, Console, Spy, Clock]]:
    """A controller for one p3.2xlarge node, built by wiring as `igniter run` builds it."""
    setup_templates(moto)
    agent_state = tmp_path / "agent"
    agent_state.mkdir()
    clock = Clock()
    ctl = build_controller(
        load_policy(policy_path(tmp_path, moto, sshd, agent_state, tiny_model_dir)), tmp_path / "state.sqlite", clock
    )
    ctl.deps.planner = stub_planner
    spy = Spy(ctl.deps.transport)  # type: ignore[arg-type]
    ctl.deps.transport = spy
    console = Console(ctl.deps.provider.client)  # type: ignore[attr-defined]
    with running_agent(agent_state):
        yield ctl, console, spy, clock
    spy.close()
    ctl.store.close()


def only_instance(ctl: Controller) -> Instance:
    (inst,) = ctl.deps.provider.list_instances()
    return inst


def record_state(ctl: Controller, instance_id: str) -> State:
    return next(r.state for r in ctl.store.all_records() if r.instance_id == instance_id)


def pinned_lines(path: Path) -> list[str]:
    text = path.read_text() if path.exists() else ""
    return [line for line in text.splitlines() if MARKER in line and not line.startswith("#")]


def test_a_new_node_is_reached_once_its_console_shows_its_host_key(
    fleet: tuple[Controller, Console, Spy, Clock],
    moto: Moto,
    sshd: Sshd,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    ctl, console, spy, clock = fleet
    pins = tmp_path / "state.known_hosts"  # agents.known_hosts unset: next to the state
    assert ctl.tick().ok
    inst = only_instance(ctl)
    assert inst.address and inst.address.startswith("10.")

    with caplog.at_level(logging.INFO, "autoscaler"):
        for _ in range(2):  # booting: the console has no keys yet
            clock.advance(30)
            report = ctl.tick()
            assert report.ok and not report.outcome.failed
    assert spy.calls == [] and record_state(ctl, inst.id) is State.RUNNING
    assert pinned_lines(pins) == [] and console.requests and console.requests[-1].get("Latest") in ("true", True)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    assert "did not answer" not in caplog.text

    console.outputs[inst.id] = cloud_init_console([host_key(sshd)])
    clock.advance(30)
    report = ctl.tick()
    assert report.ok and not report.outcome.failed, report.outcome.failed
    assert pinned_lines(pins) == [f"[{inst.address}]:{sshd.port} {host_key(sshd)} {MARKER}{inst.id}"]
    assert ("status", inst.id) in spy.calls and ("apply", inst.id) in spy.calls
    assert record_state(ctl, inst.id) is State.READY
    assert any(d.startswith("configure") for d in report.outcome.done)

    ec2(moto).terminate_instances(InstanceIds=[inst.id])
    spy.calls.clear()
    clock.advance(30)
    assert ctl.tick().ok
    assert pinned_lines(pins) == []  # the terminated node's pin is gone
    replacement = only_instance(ctl)
    assert replacement.id != inst.id and spy.calls == []  # its console has no keys yet: not contacted


def test_a_host_key_other_than_the_published_one_is_refused(
    fleet: tuple[Controller, Console, Spy, Clock], sshd: Sshd, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ctl, console, spy, clock = fleet
    assert ctl.tick().ok
    inst = only_instance(ctl)
    impostor = keygen(tmp_path, "ed25519", name="impostor")  # what the console says; sshd has another key
    console.outputs[inst.id] = cloud_init_console([impostor])
    with caplog.at_level(logging.INFO, "autoscaler"):
        clock.advance(30)
        assert ctl.tick().ok
    assert ("status", inst.id) in spy.calls and ("apply", inst.id) not in spy.calls
    assert record_state(ctl, inst.id) is State.RUNNING  # never ready; the ready timeout replaces it
    assert any(r.levelno == logging.ERROR and "HOST KEY MISMATCH" in r.message for r in caplog.records)
    pins = PinnedHostKeys(tmp_path / "state.known_hosts")
    assert [k.get_base64() for k in pins.keys_for(inst.id)] == [impostor.split()[1]]
    transport = spy.inner
    with pytest.raises(TransportError) as refused:
        transport.status(inst)
    assert refused.value.retryable is False and "mismatch" in str(refused.value)
    assert refused.value.kind is TransportFault.AUTH and "mismatch" in ctl.current_state().quarantined[inst.id].reason
    spy.calls.clear()
    clock.advance(30)
    assert ctl.tick().ok and ("status", inst.id) not in spy.calls  # quarantined: never retried blindly


def test_without_keys_the_ready_timeout_still_replaces_the_node(fleet: tuple[Controller, Console, Spy, Clock]) -> None:
    ctl, _, spy, clock = fleet
    assert ctl.tick().ok
    inst = only_instance(ctl)
    clock.advance(ctl.policy.provider.ready_timeout_s + 30)
    report = ctl.tick()
    assert report.ok and spy.calls == []
    assert record_state(ctl, inst.id) in (State.TERMINATING, State.TERMINATED)
    assert any(h["reason"] == "ready_timeout" for h in ctl.store.history())


def test_transport_trusts_only_the_instance_pins(sshd: Sshd, tmp_path: Path) -> None:
    pins = PinnedHostKeys(tmp_path / "known_hosts")
    cfg = load_policy(
        write_policy(
            tmp_path / "p.yaml",
            agents={
                "transport": "ssh",
                "user": sshd.user,
                "key_file": str(sshd.key_file),
                "port": sshd.port,
                "host_override": "127.0.0.1",
                "connect_timeout_s": 5,
                "agent_command": shlex.join(AGENT),
                "state_dir": str(tmp_path / "agent"),
                "known_hosts": str(sshd.known_hosts),
            },
        )
    ).agents
    transport = SshTransport(cfg, pins)
    first = Instance(
        id="i-first", instance_type="p3.2xlarge", slot="s-0", state="running", launched_at=0.0, address="10.0.0.5"
    )
    second = Instance(
        id="i-second", instance_type="p3.2xlarge", slot="s-1", state="running", launched_at=0.0, address="10.0.0.6"
    )
    with pytest.raises(TransportError) as unpinned:
        transport.status(first)  # sshd.known_hosts does list 127.0.0.1: pins alone count
    assert unpinned.value.retryable is True and "no host key pinned" in str(unpinned.value) and not transport._pool
    pins.pin("i-first", "10.0.0.5", sshd.port, [host_key(sshd)])
    with pytest.raises(TransportError) as none_yet:  # reached the node: its agent wrote no status there
        transport.status(first)
    assert none_yet.value.kind is TransportFault.NOT_READY and "no agent status yet" in str(none_yet.value)
    with pytest.raises(TransportError):
        transport.status(second)  # same host through the override, but nothing pinned for it
    assert list(transport._pool) == [("i-first", "127.0.0.1", sshd.port)]
    transport.close()


def test_ec2_provider_reads_host_keys_from_the_console(
    moto: Moto, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    setup_templates(moto)
    cfg = load_policy(
        write_policy(
            tmp_path / "p.yaml",
            provider={"kind": "ec2", "region": "us-east-1", "endpoint_url": moto.url, "launch_templates": TEMPLATES},
        )
    ).provider
    provider = Ec2Provider("keys", cfg)
    console = Console(provider.client)
    inst = provider.launch("keys-p3.2xlarge-0", "p3.2xlarge", 1)
    assert provider.host_keys(inst) is None  # moto's own console: still booting
    ed = keygen(tmp_path, "ed25519")
    ecdsa = keygen(tmp_path, "ecdsa", "-b", "256")
    console.outputs[inst.id] = cloud_init_console([ecdsa, "ssh-ed25519 AAAAC3Nz-garbage", ed])
    with caplog.at_level(logging.WARNING, "autoscaler.fleet.ec2"):
        assert provider.host_keys(inst) == [ecdsa, ed]
    assert "not a valid key" in caplog.text

    console.refuse_latest = True  # a Xen type (p3): no Latest=True
    console.requests.clear()
    assert provider.host_keys(inst) == [ecdsa, ed] and provider.host_keys(inst) == [ecdsa, ed]
    assert [r.get("Latest") for r in console.requests] == ["true", None, None]  # asked once, then remembered

    provider.client.meta.events.unregister("after-call.ec2.GetConsoleOutput", decode_console_output)
    assert provider.host_keys(inst) == [ecdsa, ed]  # undecoded base64 is handled too
    provider.terminate(inst.id)
    assert (
        provider.host_keys(
            Instance(id="i-0000000000000dead", instance_type="p3.2xlarge", slot="x", state="running", launched_at=0.0)
        )
        is None
    )
