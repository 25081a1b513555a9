"""The controller's gateway step against fakes on an injected clock: servers are weighted once
ready, a retiring server drains before its agent stops it (until no session is left, or
drain_timeout_s on the injected clock), and a gateway that fails does not stop the tick."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from autoscaler.core.routing.routes import AddServer, DelServer, SetState, SetWeight
from autoscaler.fleet.fake import FakeProvider
from autoscaler.gateway.fake import FakeGateway
from autoscaler.loop.state.store import Store
from autoscaler.loop.tick.controller import Controller, Deps
from autoscaler.rates.reader import RateReader
from autoscaler.rates.static import ManualRates
from autoscaler.transport.fake import FakeTransport
from tests.kit.control import Clock, make_policy, stub_planner

pytestmark = pytest.mark.unit


def build(tmp_path: Path, **gateway: Any) -> tuple[Controller, Clock, FakeGateway, FakeTransport, ManualRates]:
    policy = make_policy(
        tmp_path,
        gateway={"kind": "haproxy", "drain_timeout_s": 30, **gateway},
        rates={"source": "static"},
        scaling={"interval_s": 30, "scale_down_delay_s": 0, "headroom": 0.0, "forecast": "last"},
    )
    clock, gw, tr = Clock(), FakeGateway(), FakeTransport()
    rates = ManualRates({"alex": 150.0, "res": 50.0})
    deps = Deps(
        FakeProvider(policy.fleet, clock), tr, RateReader(rates, 300), Store(":memory:"), stub_planner, clock, True
    )
    deps.gateway = gw
    return Controller(policy, deps), clock, gw, tr, rates


def run(ctl: Controller, clock: Clock, ticks: int, step: float = 5.0) -> None:
    for _ in range(ticks):
        clock.advance(step)
        report = ctl.tick()
        assert report.ok, report.error


def test_servers_are_added_then_weighted_by_their_planned_rate(tmp_path: Path) -> None:
    ctl, clock, gw, _, _ = build(tmp_path)
    run(ctl, clock, 3)
    adds = [op for op in gw.ops if isinstance(op, AddServer)]
    assert sorted(op.name for op in adds) == ["alex-0", "alex-1", "res-0"]
    assert all(op.address == "127.0.0.1:8100" for op in adds)  # each fake instance: address + port base
    assert gw.weights("alex") == {"alex-0": 256, "alex-1": 256} and gw.weights("res") == {"res-0": 256}
    first_weight = next(i for i, op in enumerate(gw.ops) if isinstance(op, SetWeight))
    assert first_weight > max(i for i, op in enumerate(gw.ops) if isinstance(op, AddServer))  # checked first
    before = len(gw.ops)
    run(ctl, clock, 2)
    assert len(gw.ops) == before  # converged: nothing to change


def test_a_retiring_server_drains_before_its_agent_stops_it(tmp_path: Path) -> None:
    ctl, clock, gw, tr, rates = build(tmp_path)
    run(ctl, clock, 3)
    rates.set(alex=50.0)  # one alex instance is surplus
    gw.sessions = {"alex-0": 2, "alex-1": 2}  # requests in flight
    run(ctl, clock, 2)
    (draining,) = [op.name for op in gw.ops if isinstance(op, SetState) and op.state == "drain"]
    assert not [a for _, a in tr.applies if a["servers"] == []]  # the agent still runs it
    report = ctl.tick()
    assert report.gateway is not None and report.gateway.draining == [draining] and report.settling
    gw.sessions[draining] = 0  # its requests are done
    run(ctl, clock, 2)
    emptied = [a for _, a in tr.applies if a["servers"] == []]
    assert len(emptied) == 1  # now the agent stops it (surplus slot: drained, then terminated)
    assert DelServer("alex", draining) in gw.ops and set(gw.weights("alex")) == {"alex-0", "alex-1"} - {draining}
    assert ctl.store.get("gateway_drains", {}) == {}


def test_drain_timeout_bounds_the_wait_on_the_injected_clock(tmp_path: Path) -> None:
    ctl, clock, gw, tr, rates = build(tmp_path)
    run(ctl, clock, 3)
    rates.set(alex=50.0)
    gw.sessions = {"alex-0": 5, "alex-1": 5}  # a client that never lets go
    run(ctl, clock, 2, step=10.0)
    assert not [a for _, a in tr.applies if a["servers"] == []]
    run(ctl, clock, 3, step=10.0)  # 30 s after the drain began
    assert len([a for _, a in tr.applies if a["servers"] == []]) == 1


def test_a_delete_refused_for_attached_connections_waits_and_is_no_error(tmp_path: Path) -> None:
    """HAProxy refuses `del server` while connections are still attached (keep-alive connections
    close a moment after the server's process exits): the tick notes the wait, counts no gateway
    error, ticks again soon, and deletes the server once they are gone."""
    ctl, clock, gw, _, rates = build(tmp_path)
    run(ctl, clock, 3)
    rates.set(alex=50.0)
    gw.sessions = {"alex-0": 5, "alex-1": 5}  # connections that outlive the drain timeout
    run(ctl, clock, 5, step=10.0)
    (gone,) = [n for n in ("alex-0", "alex-1") if DelServer("alex", n) in gw.ops]
    report = ctl.tick()
    assert report.gateway is not None and report.gateway.failed == []
    assert report.gateway.deferred == [f"del server alex/{gone}"]
    assert "gateway" not in report.outcome.errors and report.settling
    assert f"gateway: del server alex/{gone} waits for its connections to close" in report.notes
    gw.sessions[gone] = 0  # they closed
    clock.advance(5)
    report = ctl.tick()
    assert (
        report.gateway is not None
        and report.gateway.deferred == []
        and set(gw.weights("alex"))
        == {
            "alex-0",
            "alex-1",
        }
        - {gone}
    )


def test_a_failing_gateway_is_an_error_of_the_tick_not_its_end(tmp_path: Path) -> None:
    ctl, clock, gw, tr, rates = build(tmp_path)
    run(ctl, clock, 3)
    gw.fail_observe = True
    clock.advance(5)
    report = ctl.tick()
    assert report.ok and report.outcome.errors.get("gateway") == 1
    assert report.gateway is not None and not report.gateway.ok and "connection refused" in (report.gateway.error or "")
    rates.set(alex=50.0)
    run(ctl, clock, 2, step=10.0)
    assert not [a for _, a in tr.applies if a["servers"] == []]  # no view: only the timeout drains
    run(ctl, clock, 3, step=10.0)
    assert len([a for _, a in tr.applies if a["servers"] == []]) == 1
    gw.fail_observe = False
    run(ctl, clock, 2)
    assert len(gw.servers) == 2  # the retired server left the gateway once it could be reached


def test_without_a_gateway_servers_count_as_drained_at_once(tmp_path: Path) -> None:
    ctl, clock, gw, tr, rates = build(tmp_path)
    ctl.routing = None
    run(ctl, clock, 3)
    rates.set(alex=50.0)
    run(ctl, clock, 1)
    assert len([a for _, a in tr.applies if a["servers"] == []]) == 1 and gw.ops == []


def test_a_process_that_does_not_lead_never_touches_the_gateway(tmp_path: Path) -> None:
    """The gateway's changes go through the lease's fence (wiring.GATEWAY_MUTATING), like launches."""
    import time

    from autoscaler.leader.base import Fence
    from autoscaler.loop.service.wiring import GATEWAY_MUTATING, fenced

    ctl, clock, gw, _, _ = build(tmp_path)
    fence = Fence(time.monotonic)  # never granted: this process is not the leader
    ctl.deps.gateway = fenced(gw, fence, GATEWAY_MUTATING)
    ctl.routing = type(ctl.routing)(ctl.deps.gateway)  # type: ignore[misc]
    clock.advance(5)
    report = ctl.tick()
    assert not report.ok and "not the leader" in (report.error or "")
    assert gw.ensures == 0 and gw.ops == []


def test_a_resized_server_hands_over_through_the_gateway(tmp_path: Path) -> None:
    """A resize (batch 4 -> 8) starts a successor beside the old server; the successor joins the
    gateway at once and gets its weight once ready; only then is the old one drained in the
    gateway, and only once drained does its agent stop it; then it leaves the gateway."""
    from dataclasses import replace as dc_replace

    from autoscaler.planner.types import Plan
    from tests.kit.control import stub_planner

    resized: dict[str, Any] = {}  # workload -> (batch, rate): a rate the running server cannot carry

    def planner(policy: Any, rates: Any, corrections: Any, caps: Any, current: Any) -> Plan:
        plan = stub_planner(policy, rates, corrections, caps, current)

        def resize(p: Any) -> Any:
            if p.workload not in resized:
                return p
            b, rate = resized[p.workload]
            return dc_replace(p, batch=b, rate_rps=rate)

        return dc_replace(
            plan,
            instances=tuple(
                dc_replace(i, gpus=tuple(dc_replace(g, placements=tuple(map(resize, g.placements))) for g in i.gpus))
                for i in plan.instances
            ),
        )

    ctl, clock, gw, tr, _ = build(tmp_path)
    ctl.deps.planner = planner
    run(ctl, clock, 3)
    (old,) = gw.weights("res")
    resized["res"] = (8, 650.0)  # the model gives res at batch 4 605 req/s, at batch 8 713 on a V100's 50 %
    gw.sessions = {old: 3}  # requests in flight on the old server
    events: list[tuple[str, str]] = []
    for _ in range(8):
        n_ops, n_applies = len(gw.ops), len(tr.applies)
        run(ctl, clock, 1)
        for _, a in tr.applies[n_applies:]:  # the act step comes before the route step
            names = {s["name"] for s in a["servers"]}
            if old in names or any(s["workload"] == "res" for s in a["servers"]):
                events.append(("apply", ",".join(sorted(names))))
        for op in gw.ops[n_ops:]:
            events.append((type(op).__name__ + getattr(op, "state", "") + str(getattr(op, "weight", "")), op.name))
        draining_for = sum(1 for e in events if e[0] == "tick" and e[1] == "draining")
        if any(e[0] == "SetStatedrain" for e in events) and gw.sessions.get(old):
            events.append(("tick", "draining"))
            if draining_for >= 1:
                gw.sessions[old] = 0  # the drain lets the in-flight requests finish
                events.append(("sessions", "0"))
    new = next(name for kind, name in events if kind == "AddServer")
    assert new != old and gw.weights("res") == {new: 256}
    index = {e: i for i, e in reversed(list(enumerate(events)))}
    joined = next(i for i, e in enumerate(events) if e[0] == "apply" and new in e[1].split(",") and old in e[1])
    weighted = index[("SetWeight256", new)]
    drained = index[("SetStatedrain", old)]
    stopped = next(i for i, e in enumerate(events) if e[0] == "apply" and old not in e[1].split(",") and i > joined)
    deleted = index[("DelServer", old)]
    quiet = index[("sessions", "0")]
    assert joined < index[("AddServer", new)] < weighted < drained < quiet < stopped < deleted, events
