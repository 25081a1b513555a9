"""Advisory mode in-process (loop/tick/advisory.py): beside a leader that runs the fleet, an advisory
controller on the same provider, agents and gateway plans and publishes launches, assignments and
gateway changes, and makes no launch, termination, agent apply or gateway change itself. The
moto-server version, counting every AWS call at the server, is tests/loop/test_advisory_e2e.py."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from autoscaler.gateway.fake import FakeGateway
from autoscaler.loop.state.store import Store
from autoscaler.loop.steps.gateway_step import GatewayStep
from autoscaler.loop.tick.advisory import (
    Advice,
    AdvisoryController,
    AdvisoryRefusal,
    ReadOnlyGateway,
    ReadOnlyProvider,
    ReadOnlyTransport,
    snapshot,
)
from autoscaler.loop.tick.controller import Deps
from autoscaler.rates.reader import RateReader
from autoscaler.rates.static import ManualRates
from tests.kit.control import Clock, make_controller, make_policy, stub_planner

pytestmark = pytest.mark.unit


def test_advice_is_published_and_nothing_is_changed(tmp_path: Path) -> None:
    policy = make_policy(tmp_path, gateway={"kind": "haproxy", "listen": "127.0.0.1:1"})
    clock = Clock()
    leader, prov, transport, _ = make_controller(policy, clock)
    gateway = FakeGateway()
    leader.deps.gateway = gateway
    leader.routing = GatewayStep(gateway)
    for _ in range(4):
        leader.tick()
        clock.advance(30)
    launched = [c for c in prov.calls if c[0] == "launch"]
    assert len(launched) == 3 and gateway.ops, "the leader ran the fleet"
    before = (list(prov.calls), list(transport.calls), list(gateway.ops), gateway.ensures, gateway.clears)

    advice = Advice()
    rates = ManualRates({"alex": 450.0, "res": 50.0})  # more than the fleet carries: launches advised
    deps = Deps(
        ReadOnlyProvider(prov, advice),
        ReadOnlyTransport(transport, advice),
        RateReader(rates, 300),
        Store(":memory:"),  # its own state: it adopts the instances by their tags
        stub_planner,
        clock,
        True,
        gateway=ReadOnlyGateway(gateway, advice),
    )
    adv = AdvisoryController(policy, deps, advice)
    published = []
    for _ in range(3):
        report = adv.tick()
        published.append(snapshot(advice.take(), report))
        clock.advance(30)
    last = published[-1]
    assert last["mode"] == "advisory" and last["ok"], last
    launches = [a for a in last["actions"] if a["action"] == "launch"]
    assert len(launches) == 3 and {a["instance_type"] for a in launches} == {"p3.2xlarge"}
    assert last["counts"]["assign"] >= 3 and last["counts"]["gateway"] >= 1, last["counts"]
    assert all(p["counts"]["launch"] == 3 for p in published), "advised again every tick: nothing was done"
    assign = next(a for a in last["actions"] if a["action"] == "assign")
    assert assign["instance_id"].startswith("i-") and assign["servers"][0]["workload"] in ("alex", "res")
    reads = prov.calls[len(before[0]) :]
    assert reads and {c[0] for c in reads} == {"list"}, reads  # the provider was only read
    assert {c[0] for c in transport.calls[len(before[1]) :]} == {"status"}  # agents only asked
    assert gateway.ops == before[2] and (gateway.ensures, gateway.clears) == before[3:]


def test_the_adapters_refuse_every_mutating_call_and_record_it() -> None:
    from autoscaler.fleet.fake import FakeProvider
    from autoscaler.transport.fake import FakeTransport

    advice = Advice()
    prov = FakeProvider("f", Clock())
    inst = prov.launch("f-p3-0", "p3.2xlarge", 1)
    ro_prov, ro_tr, gw = ReadOnlyProvider(prov, advice), ReadOnlyTransport(FakeTransport(), advice), FakeGateway()
    ro_gw = ReadOnlyGateway(gw, advice)
    with pytest.raises(AdvisoryRefusal):
        ro_prov.launch("f-p3-1", "p3.2xlarge", 1)
    with pytest.raises(AdvisoryRefusal):
        ro_prov.terminate(inst.id)
    with pytest.raises(AdvisoryRefusal):
        ro_tr.apply(inst, {"generation": 1, "servers": []})
    with pytest.raises(AdvisoryRefusal):
        ro_gw.stop()
    assert ro_gw.ensure(None) is False and ro_gw.clear_maxima() is None and gw.ensures == 0 and gw.clears == 0
    assert [c[0] for c in prov.calls] == ["launch"]  # the one made before, directly
    assert [a["action"] for a in advice.take()] == ["launch", "terminate", "assign", "gateway"]


class Spy:
    """Every public method records its call: what reaches the inner part is what the adapter let through."""

    def __init__(self, names: Sequence[str]) -> None:
        self.calls: list[str] = []
        for name in names:
            setattr(self, name, lambda *a, _n=name, **k: self.calls.append(_n))


def _public_methods(cls: type) -> set[str]:
    return {n for n in dir(cls) if not n.startswith("_") and callable(getattr(cls, n))}


def test_only_the_listed_reads_reach_the_inner_part_every_other_call_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The adapters are allow-lists: every public method of the real EC2 provider (its warm pool's
    too), of the SSH transport and of both gateways that is not a listed read is refused, recorded
    and never reaches the inner object, including methods the adapters do not name."""
    from autoscaler.fleet.ec2 import Ec2Provider
    from autoscaler.gateway.local import LocalHaproxy
    from autoscaler.gateway.remote import RemoteGateway
    from autoscaler.transport.ssh import SshTransport

    cases = [
        (ReadOnlyProvider, _public_methods(Ec2Provider), {"list_instances", "pool_members", "host_keys", "close"}),
        (ReadOnlyTransport, _public_methods(SshTransport), {"status", "close"}),
        (ReadOnlyGateway, _public_methods(LocalHaproxy) | _public_methods(RemoteGateway), {"observe", "close"}),
    ]
    for adapter, names, reads in cases:
        assert {
            "pool_launch",
            "pool_stop",
            "start_pooled",
            "pool_return",
            "terminate",
        } <= names or adapter is not ReadOnlyProvider
        names |= {"something_added_later"}
        advice = Advice()
        spy = Spy(sorted(names))
        ro = adapter(spy, advice)  # type: ignore[operator]
        local = {"ensure", "route", "apply", "clear_maxima"} if adapter is ReadOnlyGateway else set()
        for name in sorted(names - reads - local):
            with pytest.raises(AdvisoryRefusal, match="advisory mode"):
                getattr(ro, name)("i-0123", "p3.2xlarge")
        assert spy.calls == [], (adapter.__name__, spy.calls)  # nothing passed through
        refused = advice.take()
        assert sorted(r["call"] for r in refused) == sorted(names - reads - local) and all(
            r["refused"] for r in refused
        )
        for name in sorted(reads):
            getattr(ro, name)(*(["i-0123"] if name in ("status", "host_keys") else []))
        assert sorted(spy.calls) == sorted(reads)  # the listed reads, and only those, reach it
        with pytest.raises(AttributeError):
            ro.not_a_method_of_the_inner_part  # noqa: B018
        with pytest.raises(AttributeError):
            ro._private  # noqa: B018


def test_the_providers_aws_client_refuses_every_write_as_it_is_sent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under the adapter: code that holds the inner EC2 provider (or its client) and calls
    RunInstances, StopInstances or CreateTags directly is refused before anything is sent (the
    endpoint here is a closed port: a request sent would be a connection error, not a refusal)."""
    from autoscaler.fleet.ec2 import Ec2Provider

    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(var, "testing")
    policy = make_policy(
        tmp_path,
        provider={
            "kind": "ec2",
            "region": "us-east-1",
            "endpoint_url": "http://127.0.0.1:9",
            "launch_templates": {"*": "t"},
        },
        agents={"transport": "none"},
    )
    inner = Ec2Provider(policy.fleet, policy.provider, make_client_once(policy))
    advice = Advice()
    ReadOnlyProvider(inner, advice)
    with pytest.raises(AdvisoryRefusal, match="ec2 RunInstances refused"):
        inner.client.run_instances(MinCount=1, MaxCount=1, LaunchTemplate={"LaunchTemplateName": "t"})
    with pytest.raises(AdvisoryRefusal, match="ec2 StopInstances refused"):
        inner.client.stop_instances(InstanceIds=["i-0123"])
    with pytest.raises(AdvisoryRefusal, match="ec2 CreateTags refused"):
        inner.client.create_tags(Resources=["i-0123"], Tags=[{"Key": "a", "Value": "b"}])
    assert [r["call"] for r in advice.take()] == ["ec2 RunInstances", "ec2 StopInstances", "ec2 CreateTags"]
    from botocore.exceptions import EndpointConnectionError

    with pytest.raises(EndpointConnectionError):  # a read is sent (and finds the closed port)
        inner.client.describe_instances()


def make_client_once(policy: Any) -> Any:
    """The provider's own client, with one attempt (the read above fails at once)."""
    from autoscaler.fleet.ec2 import make_client

    return make_client(policy.provider, max_attempts=1)


def test_an_advisory_controller_takes_no_interruption_queue(tmp_path: Path) -> None:
    from autoscaler.fleet.fake import FakeInterruptions

    policy = make_policy(tmp_path)
    _, prov, transport, _ = make_controller(policy, Clock())
    advice = Advice()
    deps = Deps(
        ReadOnlyProvider(prov, advice),
        ReadOnlyTransport(transport, advice),
        RateReader(ManualRates({"alex": 1.0}), 300),
        Store(":memory:"),
        stub_planner,
        Clock(),
        True,
        interruptions=FakeInterruptions(),
    )
    with pytest.raises(ValueError, match="no interruption queue"):
        AdvisoryController(policy, deps, advice)
