"""core.routing.routes: weights from the plan, readiness gating, make-before-break ordering, drains."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoscaler.core.fleet.lifecycle import Record, State
from autoscaler.core.layout.layout_types import Layout, PlannedServer, SlotSpec
from autoscaler.core.rollout.reconcile import Configure, FleetView, Limits, diff
from autoscaler.core.routing.routes import (
    AddServer,
    BackendSeen,
    DelServer,
    GatewayView,
    Readiness,
    Renames,
    ServerSeen,
    SetState,
    SetWeight,
    counter_rate,
    desired_routes,
    drain_progress,
    gateway_name,
    gateway_names,
    route_ops,
    weights,
)

NOW = 5_000.0


def srv(name: str, rate: float, workload: str = "w", index: int = 0, address: str = "") -> PlannedServer:
    return PlannedServer(
        name=name, workload=workload, model="alexnet", gpu_index=0, index=index, batch=4, mps_percent=30.0,
        rate_rps=rate, predicted_latency_ms=5.0, predicted_throughput_rps=rate * 1.2, model_dir="/m",
        max_queue_delay_ms=5.0, address=address or f"10.0.0.1:{8100 + index}",
    )  # fmt: skip


def seen(name: str, weight: int = 0, admin: str = "ready", ok: bool = True, sessions: int = 0, workload: str = "w", address: str = "") -> ServerSeen:  # fmt: skip
    return ServerSeen(
        workload=workload,
        name=name,
        address=address or f"10.0.0.1:{8100 + int(name[-1])}",
        admin=admin,  # type: ignore[arg-type]
        status="UP" if ok else "DOWN",
        check_ok=ok,
        weight=weight,
        sessions=sessions,
        requests_total=0,
    )


def view(*servers: ServerSeen, workloads: tuple[str, ...] = ("w",)) -> GatewayView:
    backends = {w: BackendSeen(workload=w, requests_total=0, errors_5xx=0, sessions=0) for w in workloads}
    return GatewayView(backends, {(s.workload, s.name): s for s in servers})


def layout(*servers: PlannedServer) -> Layout:
    return Layout("x", (slot_spec("s0", servers),))


def slot_spec(name: str, servers: tuple[PlannedServer, ...]) -> SlotSpec:
    return SlotSpec(name, "p3", 3.0, ("v100",), servers)


@pytest.mark.unit
def test_weights_are_proportional_to_planned_rates_within_1_to_256() -> None:
    assert weights({"a": 400.0, "b": 150.0}) == {"a": 256, "b": 96}
    assert weights({"a": 1000.0, "b": 1.0}) == {"a": 256, "b": 1}  # never 0: a server in the plan serves
    assert weights({"a": 0.0, "b": 0.0}) == {"a": 256, "b": 256}
    assert weights({}) == {}


@pytest.mark.property
@given(st.dictionaries(st.text("abc", min_size=1, max_size=3), st.floats(1.0, 1e4), min_size=1, max_size=8))
def test_weight_shares_track_rate_shares(rates: dict[str, float]) -> None:
    w = weights(rates)
    assert all(1 <= v <= 256 for v in w.values()) and max(w.values()) == 256
    for name, rate in rates.items():  # rounding to integers costs at most half a unit of 256
        assert abs(w[name] - 256 * rate / max(rates.values())) <= 0.5 + 1e-9 or w[name] == 1


@pytest.mark.unit
def test_a_server_gets_a_weight_only_once_its_agent_and_the_health_check_agree() -> None:
    servers = (srv("w-0", 300, index=0), srv("w-1", 100, index=1))
    applied = {"s0": servers}
    both = Readiness(ready=frozenset({"w-0", "w-1"}), healthy=frozenset({"w-0", "w-1"}))
    routes = desired_routes(layout=layout(*servers), applied=applied, readiness=both, draining=frozenset())
    assert {r.name: r.weight for r in routes["w"]} == {"w-0": 256, "w-1": 85}
    agent_only = Readiness(ready=frozenset({"w-0", "w-1"}), healthy=frozenset({"w-0"}))
    routes = desired_routes(layout=layout(*servers), applied=applied, readiness=agent_only, draining=frozenset())
    assert {r.name: r.weight for r in routes["w"]} == {"w-0": 256, "w-1": 0}
    check_only = Readiness(ready=frozenset({"w-0"}), healthy=frozenset({"w-0", "w-1"}))
    routes = desired_routes(layout=layout(*servers), applied=applied, readiness=check_only, draining=frozenset())
    assert {r.name: r.weight for r in routes["w"]} == {"w-0": 256, "w-1": 0}


@pytest.mark.unit
def test_a_serving_server_keeps_its_weight_while_its_agent_is_silent() -> None:
    servers = (srv("w-0", 300),)
    r = Readiness(ready=frozenset(), silent=frozenset({"w-0"}), healthy=frozenset({"w-0"}), serving=frozenset({"w-0"}))
    routes = desired_routes(layout=layout(*servers), applied={"s0": servers}, readiness=r, draining=frozenset())
    assert routes["w"][0].weight == 256
    new = replace(r, serving=frozenset())  # silent and not serving yet: no weight until its agent says ready
    routes = desired_routes(layout=layout(*servers), applied={"s0": servers}, readiness=new, draining=frozenset())
    assert routes["w"][0].weight == 0


@pytest.mark.unit
def test_layout_rates_win_over_the_applied_ones_and_retiring_servers_keep_theirs() -> None:
    old, new = srv("w-0", 100, index=0), srv("w-1", 100, index=1)
    applied = {"s0": (old, new)}
    ready = Readiness(ready=frozenset({"w-0", "w-1"}), healthy=frozenset({"w-0", "w-1"}))
    routes = desired_routes(
        layout=layout(replace(new, rate_rps=400)), applied=applied, readiness=ready, draining=frozenset()
    )
    by = {r.name: r for r in routes["w"]}
    assert by["w-1"].planned_rate_rps == 400 and not by["w-1"].retiring
    assert by["w-0"].planned_rate_rps == 100 and by["w-0"].retiring and by["w-0"].weight == 64
    drain = desired_routes(layout=layout(new), applied=applied, readiness=ready, draining=frozenset({"w-0"}))
    by = {r.name: r for r in drain["w"]}
    assert (by["w-0"].state, by["w-0"].weight, by["w-1"].weight) == ("drain", 0, 256)


@pytest.mark.unit
def test_servers_without_an_address_are_not_routed() -> None:
    servers = (replace(srv("w-0", 1), address=""),)
    routes = desired_routes(
        layout=None, applied={"s0": servers}, readiness=Readiness(ready=frozenset()), draining=frozenset()
    )
    assert routes == {}


@pytest.mark.unit
def test_gateway_names_tell_a_going_instance_from_its_replacement() -> None:
    """The slot's servers run on the going instance (attempt 0) and its replacement (attempt 1) at
    once: at the gateway they are two servers, the replacement's named after its attempt."""
    assert gateway_name("w-0", 0) == "w-0" and gateway_name("w-0", 3) == "w-0.a3"
    going, new = srv("w-0", 100, address="10.0.0.1:8100"), srv("w-0", 100, address="10.0.0.2:8100")
    names = gateway_names({"s0": (1, (new,))}, {("s0", 0): (going,)})
    assert {k: [(s.name, s.address) for s in v] for k, v in names.applied.items()} == {
        "s0#0": [("w-0", "10.0.0.1:8100")],
        "s0#1": [("w-0.a1", "10.0.0.2:8100")],
    }
    assert names.aliases == {"w-0.a1": "w-0"} and names.going == {("s0", 0): ("w-0",)}
    assert names.to_gateway({"w-0", "w-9"}) == {"w-0.a1"}  # layout names of current servers only
    assert names.to_layout({"w-0", "w-0.a1"}) == {"w-0"}  # the going one is not the layout's w-0
    assert names.going_servers([("s0", 0)]) == {"w-0"}
    assert names.going_drained(frozenset({"w-0.a1"})) == frozenset()
    assert names.going_drained(frozenset({"w-0"})) == {("s0", 0)}


@pytest.mark.unit
def test_renames_copy_an_applied_tuple_once_and_forget_it_two_calls_after_its_last() -> None:
    """The controller names the fleet twice a tick from the store's same parsed tuples: the
    gateway's copies are made once per tuple (the same answer as a fresh copy), again for another
    tuple or attempt, and an entry no call asked for in the last two goes."""
    a, b = (srv("w-0", 100, address="10.0.0.1:8100"),), (srv("v-0", 50, address="10.0.0.2:8100"),)
    renames = Renames()
    first = gateway_names({"s0": (1, a), "s1": (0, b)}, {}, renames)
    assert first == gateway_names({"s0": (1, a), "s1": (0, b)}, {})  # what a fresh copy gives
    again = gateway_names({"s0": (1, a)}, {("s1", 0): b}, renames)
    assert again.applied["s0#1"] is first.applied["s0#1"] and again.applied["s1#0"] is first.applied["s1#0"]
    assert gateway_names({"s0": (2, a)}, {}, renames).applied["s0#2"][0].name == "w-0.a2"  # another attempt
    assert gateway_names({"s0": (2, a)}, {}, renames).applied["s0#2"] is not first.applied["s0#1"]
    equal = tuple(replace(s) for s in b)  # an equal tuple that is another object: copied afresh, same answer
    assert gateway_names({"s1": (0, equal)}, {}, renames).applied["s1#0"] == first.applied["s1#0"]
    assert len(renames._asked) == 0 and set(renames._before) == {id(equal)}  # b, a: not asked in two calls


@pytest.mark.unit
def test_a_going_server_keeps_its_own_rate_and_the_replacement_gets_the_layouts() -> None:
    going, new = srv("w-0", 100, address="10.0.0.1:8100"), srv("w-0", 100, address="10.0.0.2:8100")
    names = gateway_names({"s0": (1, (new,))}, {("s0", 0): (going,)})
    both = frozenset({"w-0", "w-0.a1"})
    routes = desired_routes(
        layout=layout(replace(new, rate_rps=300)),
        applied=names.applied,
        readiness=Readiness(ready=frozenset({"w-0.a1"}), silent=frozenset({"w-0"}), healthy=both, serving=both),
        draining=frozenset(),
        aliases=names.aliases,
    )
    by = {r.name: r for r in routes["w"]}
    assert (by["w-0.a1"].planned_rate_rps, by["w-0.a1"].retiring, by["w-0.a1"].weight) == (300, False, 256)
    assert (by["w-0"].planned_rate_rps, by["w-0"].retiring, by["w-0"].weight) == (100, True, 85)
    assert (by["w-0"].address, by["w-0.a1"].address) == ("10.0.0.1:8100", "10.0.0.2:8100")


@pytest.mark.unit
def test_ops_are_ordered_make_before_break() -> None:
    ready = Readiness(ready=frozenset({"w-1", "w-2"}), healthy=frozenset({"w-1", "w-2"}))
    servers = (srv("w-0", 100, index=0), srv("w-1", 100, index=1), srv("w-2", 100, index=2), srv("w-3", 50, index=3))
    routes = desired_routes(
        layout=layout(*servers[1:]), applied={"s0": servers}, readiness=ready, draining=frozenset({"w-0"})
    )
    current = view(seen("w-0", 256), seen("w-1", 0), seen("w-2", 256), seen("w-5", 10))
    ops = route_ops(routes, current)
    assert ops == (
        SetWeight("w", "w-1", 256),
        AddServer("w", "w-3", "10.0.0.1:8103"),
        SetWeight("w", "w-0", 0),
        SetState("w", "w-0", "drain"),
        DelServer("w", "w-5"),
    )
    assert route_ops(routes, view(seen("w-0", 0, "drain"), seen("w-1", 256), seen("w-2", 256), seen("w-3", 0))) == ()


@pytest.mark.unit
def test_a_moved_address_is_removed_first_and_workloads_without_a_backend_wait() -> None:
    routes = desired_routes(
        layout=None,
        applied={"s0": (srv("w-0", 1), srv("x-0", 1, workload="x"))},
        readiness=Readiness(ready=frozenset()),
        draining=frozenset(),
    )
    ops = route_ops(routes, view(seen("w-0", address="10.9.9.9:1")))
    assert ops == (DelServer("w", "w-0"),)  # x has no backend yet: the configuration must gain it first


@pytest.mark.unit
def test_drained_means_no_session_or_the_timeout() -> None:
    removing = frozenset({"w-0", "w-1", "w-2", "w-3"})
    gw = view(seen("w-0", admin="drain", sessions=0), seen("w-1", admin="drain", sessions=3), seen("w-2"))
    first = drain_progress(started={}, removing=removing, seen=gw, now=NOW, timeout_s=30)
    assert first.started == {n: NOW for n in removing}
    assert first.drained == {"w-0", "w-3"}  # w-3 is not in the gateway: nothing routes to it
    later = drain_progress(started=first.started, removing=removing - {"w-3"}, seen=gw, now=NOW + 30, timeout_s=30)
    assert later.drained == {"w-0", "w-1", "w-2"} and "w-3" not in later.started
    blind = drain_progress(started=first.started, removing=removing, seen=None, now=NOW + 10, timeout_s=30)
    assert blind.drained == frozenset()  # without a view only the timeout counts


@pytest.mark.unit
def test_counter_rate_handles_resets() -> None:
    assert counter_rate(None, NOW, 10) is None
    assert counter_rate((NOW - 10, 100), NOW, 300) == 20.0
    assert counter_rate((NOW - 10, 100), NOW, 50) == 5.0  # the gateway restarted: counted from zero
    assert counter_rate((NOW, 100), NOW, 300) is None


# -- reconcile keeps a retiring server until the gateway has drained it ---------------------------------
def rec(slot: str, attempt: int = 0) -> Record:
    return Record(
        slot=slot, attempt=attempt, instance_type="p3", state=State.READY, created_at=NOW - 60,
        updated_at=NOW - 60, instance_id=f"i-{slot}",
    )  # fmt: skip


@pytest.mark.unit
def test_reconcile_holds_a_removed_server_until_it_is_drained() -> None:
    old, new = srv("w-0", 100, index=0), srv("w-1", 100, index=1)
    target = layout(new)
    base = FleetView(
        records=[rec("s0")], applied={"s0": (old, new)}, ready_servers=frozenset({"w-1"}), max_attempt={"s0": 0}
    )
    assert diff(target, base, NOW, Limits()).actions == (Configure("s0", (new,), "add [] remove ['w-0']"),)
    held = diff(target, replace(base, drained=frozenset()), NOW, Limits())
    assert held.actions == () and held.settling and any("drain w-0" in n for n in held.notes)
    done = diff(target, replace(base, drained=frozenset({"w-0"})), NOW, Limits())
    assert done.actions == (Configure("s0", (new,), "add [] remove ['w-0']"),)


@pytest.mark.unit
def test_reconcile_adds_new_servers_while_holding_the_undrained() -> None:
    old, new = srv("w-0", 100, index=0), srv("w-1", 100, index=1)
    base = FleetView(
        records=[rec("s0")],
        applied={"s0": (old,)},
        ready_servers=frozenset(),
        max_attempt={"s0": 0},
        drained=frozenset(),
    )
    # the replacement is not ready yet: reconcile keeps w-0 by itself (make-before-break), and adds w-1
    actions = diff(layout(new), base, NOW, Limits()).actions
    assert len(actions) == 1 and {s.name for s in actions[0].servers} == {"w-0", "w-1"}  # type: ignore[union-attr]


@pytest.mark.unit
def test_reconcile_holds_a_surplus_slot_until_its_servers_are_drained() -> None:
    keep, gone = srv("w-1", 100, index=0), srv("w-0", 100, index=0)
    target = Layout("x", (SlotSpec("s1", "p3", 3.0, ("v100",), (keep,)),))
    records = [rec("s0"), rec("s1")]
    base = FleetView(
        records=records, applied={"s0": (gone,), "s1": (keep,)}, ready_servers=frozenset({"w-1"}), max_attempt={}
    )
    free = diff(target, base, NOW, Limits()).actions
    assert [type(a).__name__ for a in free] == ["Drain", "Terminate"]
    held = diff(target, replace(base, drained=frozenset()), NOW, Limits())
    assert held.actions == () and held.settling
    done = diff(target, replace(base, drained=frozenset({"w-0"})), NOW, Limits()).actions
    assert [type(a).__name__ for a in done] == ["Drain", "Terminate"]


@pytest.mark.unit
def test_the_last_serving_servers_are_not_drained_before_another_serves() -> None:
    old, new = srv("w-0", 100, index=0), srv("w-1", 100, index=1)
    applied = {"s0": (old, new)}
    waiting = Readiness(ready=frozenset({"w-0"}), healthy=frozenset({"w-0"}))  # w-1 is still starting
    routes = desired_routes(layout=layout(new), applied=applied, readiness=waiting, draining=frozenset({"w-0"}))
    by = {r.name: r for r in routes["w"]}
    assert (by["w-0"].state, by["w-0"].weight, by["w-1"].weight) == ("ready", 256, 0)
    gw = view(seen("w-0", 256), seen("w-1", 0))
    progress = drain_progress(started={"w-0": NOW}, removing=frozenset({"w-0"}), seen=gw, now=NOW + 5, timeout_s=30)
    assert progress.drained == frozenset()  # serving, not draining: only the timeout ends the wait
    assert drain_progress(
        started={"w-0": NOW}, removing=frozenset({"w-0"}), seen=gw, now=NOW + 30, timeout_s=30
    ).drained
    both = Readiness(ready=frozenset({"w-0", "w-1"}), healthy=frozenset({"w-0", "w-1"}))
    routes = desired_routes(layout=layout(new), applied=applied, readiness=both, draining=frozenset({"w-0"}))
    assert {r.name: (r.state, r.weight) for r in routes["w"]} == {"w-0": ("drain", 0), "w-1": ("ready", 256)}
