"""Advisory mode in-process (loop/tick/advisory.py): beside a leader that runs the fleet, an advisory
controller on the same provider, agents and gateway plans and publishes launches, assignments and
gateway changes, and makes no launch, termination, agent apply or gateway change itself. The
moto-server version, counting every AWS call at the server, is tests/loop/test_advisory_e2e.py."""

from __future__ import annotations

from pathlib import Path

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
    assert [a["action"] for a in advice.take()] == ["launch", "terminate", "assign"]
