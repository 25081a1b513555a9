"""A going instance behind the gateway, through the real tick (fake provider, transport, gateway and
interruption source, injected clock): the same tick launches its replacement; its servers keep
serving until the replacement's serve, or drain at once when the cloud is about to take it; it is
let go only once the gateway has drained them; the replacement's servers have names of their own."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoscaler.core.fleet.lifecycle import Record, State
from autoscaler.core.routing.routes import DelServer, SetState
from autoscaler.fleet.base import Notice
from autoscaler.fleet.fake import FakeInterruptions, FakeProvider
from autoscaler.gateway.fake import FakeGateway
from autoscaler.loop.steps.gateway_step import GatewayStep
from autoscaler.loop.tick.controller import Controller
from tests.kit.control import Clock, make_controller, make_policy

pytestmark = pytest.mark.unit


Rig = tuple[Controller, FakeProvider, FakeGateway, FakeInterruptions, Clock]


def setup(tmp_path: Path, drain_timeout_s: float = 30.0) -> Rig:
    policy = make_policy(
        tmp_path,
        gateway={"kind": "haproxy", "drain_timeout_s": drain_timeout_s},
        rates={"source": "static"},
        # burst off: these tests follow where a going instance's capacity comes from (its replacement);
        # stand-ins in free share while it boots are tests/loop/test_fast_path.py's subject
        scaling={"interval_s": 30, "scale_down_delay_s": 0, "headroom": 0.0, "forecast": "last", "burst": False},
    )
    clock = Clock()
    ctl, prov, _tr, _rates = make_controller(policy, clock)
    gw, source = FakeGateway(), FakeInterruptions()
    ctl.deps.gateway, ctl.routing, ctl.deps.interruptions = gw, GatewayStep(gw), source
    for _ in range(3):
        clock.advance(5)
        assert ctl.tick().ok
    assert gw.weights("res") == {"res-0": 256} and gw.weights("alex") == {"alex-0": 256, "alex-1": 256}
    prov.boot_s = 60.0  # replacements take a minute to boot
    return ctl, prov, gw, source, clock


def serving(ctl: Controller, workload: str) -> Record:
    applied = ctl.store.applied()
    return next(
        r for r in ctl.store.open_records() if any(s.workload == workload for s in applied.get(r.key, (0, ()))[1])
    )


def warn(source: FakeInterruptions, rec: Record, kind: str, deadline: float | None, now: float) -> None:
    n = Notice(kind=kind, instance_ids=(rec.instance_id or "",), at=now, deadline=deadline, token="m-1")  # type: ignore[arg-type]
    source.push(n)


def state_of(ctl: Controller, rec: Record) -> State:
    return next(r for r in ctl.store.all_records() if r.key == rec.key).state


def drains(gw: FakeGateway, name: str) -> int:
    return sum(1 for op in gw.ops if isinstance(op, SetState) and op.name == name and op.state == "drain")


def test_it_serves_until_its_replacement_serves_then_drains_then_goes(tmp_path: Path) -> None:
    ctl, prov, gw, source, clock = setup(tmp_path)
    victim = serving(ctl, "res")  # res-0: the workload's only server
    warn(source, victim, "rebalance", None, clock())  # no deadline: nothing hurries
    gw.sessions["res-0"] = 3  # requests in flight on it
    report = ctl.tick()
    assert report.ok and state_of(ctl, victim) is State.GOING_AWAY
    assert ("launch", victim.slot, victim.instance_type, "1") in prov.calls  # the same tick
    for _ in range(3):  # the replacement boots: the going server keeps serving at its weight
        clock.advance(15)
        assert ctl.tick().ok
        assert gw.weights("res") == {"res-0": 256} and drains(gw, "res-0") == 0
    clock.advance(15)  # booted: the replacement's server joins under a name of its own
    for _ in range(2):  # added (weight 0 until checked), then weighted
        assert ctl.tick().ok
        clock.advance(5)
    assert gw.servers[("res", "res-0.a1")].weight == 256 and gw.servers[("res", "res-0.a1")].address
    assert drains(gw, "res-0") == 0
    report = ctl.tick()  # it serves, so the going one drains
    assert report.ok and drains(gw, "res-0") == 1 and report.settling
    assert report.gateway is not None and report.gateway.draining == ["res-0"]
    assert state_of(ctl, victim) is State.GOING_AWAY  # 3 requests still on it
    assert ("terminate", victim.instance_id) not in prov.calls
    gw.sessions["res-0"] = 0  # they are done: drained
    for _ in range(2):
        clock.advance(5)
        assert ctl.tick().ok
    assert ("terminate", victim.instance_id) in prov.calls
    assert DelServer("res", "res-0") in gw.ops and set(gw.weights("res")) == {"res-0.a1"}
    reasons = [h["reason"] for h in ctl.store.history(victim.slot) if h["attempt"] == victim.attempt]
    assert reasons[-3:] == ["rebalance", "let_go", "gone"]
    assert ctl.store.get("controller_state")["gateway_drains"] == {}  # the drain book forgets it


def test_an_instance_about_to_be_taken_drains_at_once(tmp_path: Path) -> None:
    """A spot warning leaves 120 s; with drain_timeout_s 120 the drain must begin now, though the
    replacement has not booted: the other alex server takes the requests meanwhile."""
    ctl, prov, gw, source, clock = setup(tmp_path, drain_timeout_s=120.0)
    victim = next(r for r in ctl.store.open_records() if ctl.store.applied()[r.key][1][0].name == "alex-0")
    warn(source, victim, "interruption", clock() + 120, clock())
    gw.sessions["alex-0"] = 1
    assert ctl.tick().ok
    assert drains(gw, "alex-0") == 1 and gw.weights("alex") == {"alex-1": 256}  # the same tick
    assert (
        state_of(ctl, victim) is State.GOING_AWAY and ("launch", victim.slot, victim.instance_type, "1") in prov.calls
    )
    gw.sessions["alex-0"] = 0
    clock.advance(5)
    assert ctl.tick().ok
    assert ("terminate", victim.instance_id) in prov.calls  # drained: let go before the replacement serves
    reasons = [h["reason"] for h in ctl.store.history(victim.slot) if h["attempt"] == victim.attempt]
    assert reasons[-2:] == ["interruption", "let_go"] or reasons[-3:] == ["interruption", "let_go", "gone"]


def test_a_spot_warning_serves_then_drains_drain_timeout_s_before_it_is_taken(tmp_path: Path) -> None:
    """drain_timeout_s 30: the going server serves 90 s more, the tick wakes when its drain must
    begin (wake_at), and a drain that never empties ends by the timeout, at the deadline."""
    ctl, prov, gw, source, clock = setup(tmp_path)
    prov.boot_s = 600.0  # the replacement cannot serve before EC2 takes the instance
    victim = serving(ctl, "res")
    warned = clock()
    warn(source, victim, "interruption", warned + 120, warned)
    gw.sessions["res-0"] = 5  # a client that never lets go
    report = ctl.tick()
    assert report.ok and drains(gw, "res-0") == 0 and report.wake_at is not None
    assert report.wake_at <= warned + 90  # it wakes in time to begin the drain
    while clock() < warned + 89:
        clock.advance(min(15.0, warned + 89 - clock()))
        assert ctl.tick().ok
        assert gw.weights("res") == {"res-0": 256} and ("terminate", victim.instance_id) not in prov.calls
    clock.advance(1)  # warned + 90: 30 s left
    assert ctl.tick().ok
    assert ("terminate", victim.instance_id) not in prov.calls
    book = ctl.store.get("controller_state")["gateway_drains"]
    assert book == {"res-0": warned + 90}  # its drain began, in the gateway's name
    clock.advance(30)
    assert ctl.tick().ok
    assert ("terminate", victim.instance_id) in prov.calls  # the timeout: let go at the deadline


def test_without_a_gateway_view_the_going_instance_is_not_let_go_early(tmp_path: Path) -> None:
    """A gateway that cannot be read shows nothing drained: only the drain timeout lets it go."""
    ctl, prov, gw, source, clock = setup(tmp_path)
    victim = serving(ctl, "res")
    warn(source, victim, "state_change", None, clock())  # stopping: taken now
    gw.fail_observe = True
    assert ctl.tick().ok
    assert ("terminate", victim.instance_id) not in prov.calls
    clock.advance(30)
    assert ctl.tick().ok and ("terminate", victim.instance_id) in prov.calls
