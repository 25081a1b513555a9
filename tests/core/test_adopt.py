"""core/fleet/adopt.py: a fresh start takes the fleet as it runs (issue 51 item 1). The decisive
check is the last: routed from what was adopted, the gateway keeps every server it holds (before,
a fresh store routed nothing, and the gateway step deleted them all)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from autoscaler.core.fleet.adopt import ADOPTED_PLANNER, AdoptInput, adopt, adoptable, hold_adopted
from autoscaler.core.fleet.lifecycle import Reason, Record, State
from autoscaler.core.layout.layout_types import PlannedServer, WorkloadInfo
from autoscaler.core.routing.routes import (
    BackendSeen,
    DelServer,
    GatewayView,
    Readiness,
    ServerSeen,
    desired_routes,
    gateway_names,
    route_ops,
)
from autoscaler.fleet.base import Instance
from autoscaler.loop.tick.adopt_step import _addresses

pytestmark = pytest.mark.unit


def inst(slot: str, attempt: int = 0, state: str = "running", port_base: int = 9000, gen: int = 3) -> Instance:
    return Instance(
        id=f"i-{slot}-{attempt}",
        instance_type="p3.2xlarge",
        slot=slot,
        state=state,  # type: ignore[arg-type]
        launched_at=0.0,
        address="10.0.0.5",
        plan_generation=gen,
        attempt=attempt,
        port_base=port_base,
    )


def server(name: str, workload: str, port: int, state: str = "ready", batch: int = 4) -> dict[str, object]:
    return {
        "name": name,
        "workload": workload,
        "state": state,
        "port": port,
        "batch": batch,
        "mps_percent": 20.0,
        "gpu_index": 0,
        "mig_profile": None,
        "mig_start": None,
        "processes": 1,
    }


def judge(instance_type: str, servers: Sequence[PlannedServer]) -> list[tuple[bool, float]]:
    return [(True, 100.0 * s.batch) for s in servers]


def inp(instances: Sequence[Instance], statuses: dict[str, dict[str, object]], **kw: object) -> AdoptInput:
    args: dict[str, object] = dict(
        instances=instances,
        statuses=statuses,
        gateway=None,
        hosts={i.id: "10.0.0.5" for i in instances},
        port_bases={i.id: i.port_base or 8100 for i in instances},
        workloads={"a": WorkloadInfo("/m/alexnet", 7.5), "b": WorkloadInfo("/m/resnet", 20.0)},
        models={"a": "alexnet", "b": "resnet50"},
        gpus={"p3.2xlarge": ("v100",)},
        prices={"p3.2xlarge": 3.06},
        rates={"a": 90.0, "b": 10.0},
        judge=judge,
    )
    args.update(kw)
    return AdoptInput(**args)  # type: ignore[arg-type]


def test_adoptable_are_the_tagged_live_instances_no_record_knows() -> None:
    known = Record(
        slot="s-0",
        attempt=0,
        instance_type="p3.2xlarge",
        state=State.READY,
        created_at=0,
        updated_at=0,
        instance_id="i-s-0-0",
    )
    found = adoptable(
        [
            inst("s-0"),
            inst("s-1"),
            inst("s-2", state="terminated"),
            inst("s-3"),
            inst("", 0),
            inst("s-4", state="pending"),
        ],
        [known],
        frozenset({("s-3", 0)}),
    )
    assert [i.slot for i in found] == ["s-1", "s-4"]


def test_an_answering_agent_makes_a_ready_record_with_what_it_runs() -> None:
    status = {"generation": 17, "servers": [server("a-0", "a", 9001, batch=4), server("a-3", "a", 9002, batch=2)]}
    out = adopt(inp([inst("s-0")], {"i-s-0-0": status}), now=50.0)
    assert [c.reason for c in out.changes] == [Reason.DISCOVERED, Reason.BOOTED, Reason.AGENT_READY]
    rec = out.changes[-1].record
    assert (rec.state, rec.instance_id, rec.plan_generation, rec.created_at) == (State.READY, "i-s-0-0", 3, 50.0)
    gen, servers = out.applied[("s-0", 0)]
    assert gen == 17
    a0, a3 = servers
    assert (a0.index, a0.address, a0.model, a0.model_dir, a0.max_queue_delay_ms) == (
        1,
        "10.0.0.5:9001",
        "alexnet",
        "/m/alexnet",
        7.5,
    )
    assert (a3.index, a3.predicted_throughput_rps) == (2, 200.0)
    assert a0.rate_rps == pytest.approx(60.0) and a3.rate_rps == pytest.approx(30.0)  # 90 req/s by throughput
    assert out.plan_generation == 3


def test_no_answer_or_not_running_adopts_the_instance_without_servers() -> None:
    out = adopt(inp([inst("s-0"), inst("s-1", state="pending")], {}), now=1.0)
    final = {c.record.slot: c.record.state for c in out.changes}
    assert final == {"s-0": State.RUNNING, "s-1": State.PENDING}
    assert out.applied == {} and out.layout is None


def test_agents_not_contacted_make_running_instances_ready() -> None:
    out = adopt(inp([inst("s-0")], {}, contact=False), now=1.0)
    assert out.changes[-1].record.state is State.READY


def test_a_server_the_status_cannot_describe_is_named_not_guessed() -> None:
    bad = {"name": "a-9", "workload": "a", "state": "ready", "port": True, "batch": 4, "mps_percent": 20.0}
    out = adopt(inp([inst("s-0")], {"i-s-0-0": {"generation": 1, "servers": [bad, server("a-0", "a", 9001)]}}), 1.0)
    assert [s.name for s in out.applied[("s-0", 0)][1]] == ["a-0"]
    assert len(out.notes) == 1 and "a-9" in out.notes[0]


def test_the_layout_is_what_runs_newest_attempt_and_no_surge() -> None:
    instances = [inst("s-0", 0), inst("s-0", 1, port_base=9100), inst("f-surge-0")]
    statuses = {
        "i-s-0-0": {"generation": 2, "servers": [server("a-0", "a", 9001)]},
        "i-s-0-1": {"generation": 4, "servers": [server("a-0", "a", 9101), server("a-0-s1", "a", 9102)]},
        "i-f-surge-0-0": {"generation": 4, "servers": [server("b-0", "b", 9005)]},
    }
    out = adopt(inp(instances, statuses, surge=frozenset({"f-surge-0"})), 1.0)
    assert out.layout is not None and out.layout.planner == ADOPTED_PLANNER
    assert [(s.slot, [v.name for v in s.servers]) for s in out.layout.slots] == [("s-0", ["a-0"])]
    assert out.layout.slots[0].price_per_hour == 3.06 and out.layout.slots[0].gpus == ("v100",)
    assert set(out.applied) == {("s-0", 0), ("s-0", 1), ("f-surge-0", 0)}


def serving_view(held: dict[tuple[str, str], str]) -> GatewayView:
    """The gateway as it was serving: every held (workload, server) -> address up at weight 128."""
    return GatewayView(
        backends={w: BackendSeen(workload=w, requests_total=0, errors_5xx=0, sessions=0) for w in ("a", "b")},
        servers={
            k: ServerSeen(
                workload=k[0],
                name=k[1],
                address=a,
                admin="ready",
                status="UP",
                check_ok=True,
                weight=128,
                sessions=1,
                requests_total=10,
            )
            for k, a in held.items()
        },
    )


def test_routed_from_the_adoption_the_gateway_keeps_every_server() -> None:
    """The outage: the gateway held these servers, the fresh store knew none of them."""
    instances = [inst("s-0"), inst("s-1", attempt=2, port_base=9100)]
    statuses = {
        "i-s-0-0": {"generation": 5, "servers": [server("a-0", "a", 9001), server("b-0", "b", 9002)]},
        "i-s-1-2": {"generation": 6, "servers": [server("a-1", "a", 9101)]},
    }
    held = {("a", "a-0"): "10.0.0.5:9001", ("b", "b-0"): "10.0.0.5:9002", ("a", "a-1.a2"): "10.0.0.5:9101"}
    seen = serving_view(held)
    out = adopt(inp(instances, statuses, gateway=_addresses(seen)), 1.0)
    current = {slot: (attempt, servers) for (slot, attempt), (_, servers) in out.applied.items()}
    names = gateway_names(current, {})
    ready = names.to_gateway(s.name for _, servers in out.applied.values() for s in servers)
    routes = desired_routes(
        layout=out.layout,
        applied=names.applied,
        readiness=Readiness(ready=ready, healthy=seen.healthy(), serving=seen.serving()),
        draining=frozenset(),
        aliases=names.aliases,
    )
    ops = route_ops(routes, seen)
    assert not [op for op in ops if isinstance(op, DelServer)], ops
    assert {(r.workload, r.name) for rs in routes.values() for r in rs} == set(held)
    assert all(r.weight > 0 and r.state == "ready" for rs in routes.values() for r in rs)


def test_an_older_attempt_beside_a_newer_one_goes_away_through_a_drain() -> None:
    """A replacement under way when the state was lost: the older instance still serves. It is let
    go as a going instance is (drained once the replacement serves), not terminated as a duplicate."""
    instances = [inst("s-0", 0), inst("s-0", 1, port_base=9100)]
    statuses = {
        "i-s-0-0": {"generation": 2, "servers": [server("a-0", "a", 9001)]},
        "i-s-0-1": {"generation": 4, "servers": [server("a-0", "a", 9101, state="starting")]},
    }
    out = adopt(inp(instances, statuses), 1.0)
    final = {c.record.key: c.record for c in out.changes}
    assert final[("s-0", 0)].state is State.GOING_AWAY and final[("s-0", 0)].leaves_at is None
    assert [c.reason for c in out.changes if c.record.key == ("s-0", 0)][-1] is Reason.SUPERSEDED
    assert final[("s-0", 1)].state is State.READY
    assert set(out.applied) == {("s-0", 0), ("s-0", 1)}  # the going one's servers stay routed until drained
    assert out.layout is not None and out.layout.slots[0].servers[0].address == "10.0.0.5:9101"


def _adopted_layout():  # type: ignore[no-untyped-def]
    instances = [inst("s-0"), inst("s-1")]
    statuses = {i.id: {"generation": 1, "servers": [server("a-0", "a", 9001)]} for i in instances}
    layout = adopt(inp(instances, statuses), 1.0).layout
    assert layout is not None and layout.cost_per_hour == pytest.approx(6.12)
    return layout


def _plan(*workloads: str, n: int = 1):  # type: ignore[no-untyped-def]
    from autoscaler.planner.types import GpuOut, InstanceOut, PlacementOut, Plan

    gpu = GpuOut(0, "v100", tuple(PlacementOut(w, "alexnet", 4, 20.0, 10.0, 5.0, 400.0) for w in workloads))
    return Plan("igniter", tuple(InstanceOut("p3.2xlarge", 3.06, (gpu,)) for _ in range(n)))


def test_a_cheaper_plan_waits_out_the_scale_down_delay_with_the_adopted_fleet_held() -> None:
    layout = _adopted_layout()
    first = hold_adopted(100.0, _plan("a"), layout, None, 300.0, missing=False)
    assert first.held and first.cheaper_since == 100.0
    later = hold_adopted(350.0, _plan("a"), layout, first.cheaper_since, 300.0, missing=False)
    assert later.held and later.cheaper_since == 100.0
    done = hold_adopted(400.0, _plan("a"), layout, later.cheaper_since, 300.0, missing=False)
    assert not done.held and done.cheaper_since is None
    assert hold_adopted(500.0, _plan("a"), layout, 100.0, 300.0, missing=True).held  # no scale-in blind


def test_a_plan_that_needs_more_or_serves_more_is_used_at_once() -> None:
    layout = _adopted_layout()
    assert not hold_adopted(1.0, _plan("a", n=3), layout, None, 300.0, missing=False).held  # scale-up
    assert not hold_adopted(1.0, _plan("a", n=2), layout, None, 300.0, missing=False).held  # as dear
    new = hold_adopted(1.0, _plan("a", "b"), layout, None, 300.0, missing=False)
    assert not new.held and "b" in new.why  # b has no server in the adopted fleet


def test_a_silent_agent_keeps_the_servers_the_gateway_holds_at_its_address() -> None:
    """An agent that does not answer during adoption (stopped, slow) is no proof its servers are
    down: the gateway's entries at its address are adopted, so routing keeps them serving (before,
    the instance was adopted with no servers and the gateway step deleted them)."""
    instances = [inst("s-0"), inst("s-1", attempt=1, port_base=9100)]
    statuses = {"i-s-0-0": {"generation": 5, "servers": [server("a-0", "a", 9001)]}}  # s-1's agent: silent
    held = {("a", "a-0"): "10.0.0.5:9001", ("a", "a-1.a1"): "10.0.0.5:9101", ("b", "b-1.a1"): "10.0.0.5:9102"}
    seen = serving_view(held)
    entries = [(w, n, a) for (w, n), a in held.items()]
    out = adopt(inp(instances, statuses, gateway=_addresses(seen), held=entries), 1.0)
    assert out.changes[-1].record.key == ("s-1", 1) and out.changes[-1].record.state is State.READY
    assert out.silent == frozenset({("s-1", 1)})
    kept = out.applied[("s-1", 1)][1]
    assert [(s.workload, s.name, s.address, s.index) for s in kept] == [
        ("a", "a-1", "10.0.0.5:9101", 1),
        ("b", "b-1", "10.0.0.5:9102", 2),
    ]
    assert out.layout is not None and [s.slot for s in out.layout.slots] == ["s-0"]  # not known enough to plan on
    current = {slot: (attempt, servers) for (slot, attempt), (_, servers) in out.applied.items()}
    names = gateway_names(current, {})
    ready = names.to_gateway(s.name for s in out.applied[("s-0", 0)][1])
    silent = names.to_gateway(s.name for s in kept)  # as the gateway step counts an unanswered slot's
    routes = desired_routes(
        layout=out.layout,
        applied=names.applied,
        readiness=Readiness(ready=ready, silent=silent, healthy=seen.healthy(), serving=seen.serving()),
        draining=frozenset(),
        aliases=names.aliases,
    )
    ops = route_ops(routes, seen)
    assert not [op for op in ops if isinstance(op, DelServer)], ops
    assert {(r.workload, r.name) for rs in routes.values() for r in rs} == set(held)
    by_name = {r.name: r for rs in routes.values() for r in rs}
    assert by_name["a-1.a1"].weight == by_name["a-0"].weight == 256  # shared evenly with a-0, not weight 1
    assert all(r.state == "ready" and r.weight > 0 for r in by_name.values())


def test_a_silent_agent_does_not_take_another_instances_gateway_entries() -> None:
    instances = [inst("s-0"), inst("s-1", port_base=9100)]
    held = [("a", "a-0", "10.0.0.5:9001"), ("a", "a-1", "10.0.0.5:9101"), ("a", "a-2", "10.0.0.9:9101")]
    out = adopt(inp(instances, {}, held=held), 1.0)
    assert {k: [s.name for s in v[1]] for k, v in out.applied.items()} == {("s-0", 0): ["a-0"], ("s-1", 0): ["a-1"]}
    assert out.layout is None
