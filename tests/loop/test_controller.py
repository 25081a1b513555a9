"""The tick against fakes (provider, transport, rates) and a stand-in planner, on an injected clock."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoscaler.core.fleet.lifecycle import State
from autoscaler.fleet.base import ThrottledError
from autoscaler.loop.state.store import Store
from autoscaler.planner.types import Plan, Unplaced
from tests.kit.control import Clock, make_controller, make_policy, stub_planner

pytestmark = pytest.mark.unit


def live(ctl) -> list:  # type: ignore[no-untyped-def]
    return [r for r in ctl.store.open_records() if r.state in (State.PENDING, State.RUNNING, State.READY)]


def settle(ctl, clock: Clock, ticks: int = 3) -> None:  # type: ignore[no-untyped-def]
    for _ in range(ticks):
        clock.advance(30)
        assert ctl.tick().ok


def test_first_tick_launches_then_configures_then_idles(tmp_path: Path) -> None:
    policy = make_policy(tmp_path)
    clock = Clock()
    ctl, prov, tr, _ = make_controller(policy, clock)
    report = ctl.tick()
    assert report.ok and report.decision.startswith("target")
    launches = [c for c in prov.calls if c[0] == "launch"]
    assert sorted(c[1] for c in launches) == ["test-p3.2xlarge-0", "test-p3.2xlarge-1", "test-p3.2xlarge-2"]
    settle(ctl, clock, 2)
    assert {r.state for r in ctl.store.open_records()} == {State.READY}
    assert len(tr.applies) == 3
    body = tr.applies[0][1]
    assert body["servers"][0]["port"] == policy.agents.server_base_port and body["servers"][0]["batch"] == 4
    before = len(prov.mutating_calls()), len(tr.applies)
    settle(ctl, clock, 2)
    assert (len(prov.mutating_calls()), len(tr.applies)) == before


def test_scale_out_is_immediate_scale_in_waits(tmp_path: Path) -> None:
    policy = make_policy(
        tmp_path,
        scaling={
            "interval_s": 30,
            "scale_down_delay_s": 300,
            "headroom": 0.0,
            "forecast": "last",
            "disruption_budget": {"max_unavailable": 2},  # both surplus instances at once (10 % of 5 is 1)
        },
    )
    clock = Clock()
    ctl, prov, tr, rates = make_controller(policy, clock)
    settle(ctl, clock, 3)
    assert len(live(ctl)) == 3
    rates.set(alex=350.0)
    clock.advance(30)
    ctl.tick()
    assert len([c for c in prov.calls if c[0] == "launch"]) == 5  # +2 on the tick that saw it
    settle(ctl, clock, 2)
    rates.set(alex=150.0)
    for _ in range(10):  # held 0 .. 270 s < 300 s
        clock.advance(30)
        report = ctl.tick()
        assert report.decision.startswith("hold"), report.decision
    assert not [c for c in prov.calls if c[0] == "terminate"]
    clock.advance(30)
    report = ctl.tick()
    assert report.decision.startswith("target")
    drained = [a for _, a in tr.applies if a["servers"] == []]
    assert len(drained) == 2  # drained before terminate
    assert not [c for c in prov.calls if c[0] == "terminate"] and report.settling  # their agents stop servers first
    clock.advance(policy.scaling.settle_s)
    ctl.tick()  # the agents report nothing left running or draining
    assert len([c for c in prov.calls if c[0] == "terminate"]) == 2
    assert len(live(ctl)) == 3


def test_a_drained_instance_terminates_once_its_agent_stopped_its_servers(tmp_path: Path) -> None:
    """Its servers answer what they hold before they exit: the instance waits for its agent to
    report none still `draining` (at most AGENT_DRAIN_WAIT_S), then terminates."""
    from autoscaler.loop.tick.controller import AGENT_DRAIN_WAIT_S

    policy = make_policy(
        tmp_path, scaling={"interval_s": 30, "scale_down_delay_s": 0, "headroom": 0.0, "forecast": "last"}
    )
    clock = Clock()
    ctl, prov, tr, rates = make_controller(policy, clock)
    settle(ctl, clock, 3)
    rates.set(alex=50.0)  # one alex instance is surplus
    clock.advance(30)
    report = ctl.tick()
    (gone,) = [r for r in ctl.store.open_records() if r.state is State.DRAINING]
    assert report.settling and not [c for c in prov.calls if c[0] == "terminate"]
    tr.draining[gone.instance_id] = ["alex-1"]  # the agent is still stopping it
    for _ in range(3):
        clock.advance(policy.scaling.settle_s)
        report = ctl.tick()
        assert not [c for c in prov.calls if c[0] == "terminate"]
        assert any("stop their servers before termination" in n for n in report.notes), report.notes
    tr.draining[gone.instance_id] = []
    clock.advance(policy.scaling.settle_s)
    ctl.tick()
    assert [c for c in prov.calls if c[0] == "terminate"] == [("terminate", gone.instance_id)]
    # an agent that never finishes holds it AGENT_DRAIN_WAIT_S at most
    rates.set(alex=0.0)
    clock.advance(30)
    ctl.tick()
    (stuck,) = [r for r in ctl.store.open_records() if r.state is State.DRAINING]
    tr.draining[stuck.instance_id] = ["alex-0"]
    clock.advance(AGENT_DRAIN_WAIT_S - 1)
    ctl.tick()
    assert ("terminate", stuck.instance_id) not in prov.calls
    clock.advance(1)
    ctl.tick()
    assert ("terminate", stuck.instance_id) in prov.calls


def test_growth_of_one_workload_while_another_shrinks(tmp_path: Path) -> None:
    """alex drops, res grows: res gets capacity at once, alex's is kept until the delay passes."""
    policy = make_policy(tmp_path)
    clock = Clock()
    ctl, prov, _, rates = make_controller(policy, clock)
    settle(ctl, clock, 3)  # alex 2 + res 1
    rates.set(alex=50.0, res=250.0)  # target: 1 + 3
    clock.advance(30)
    report = ctl.tick()
    assert report.decision.startswith("hold: cheaper plan held for 0 s")
    assert report.layout is not None and dict(report.layout.rates) == {"alex": 150.0, "res": 250.0}
    assert len(report.layout.slots) == 5 and not [c for c in prov.calls if c[0] == "terminate"]


def capped_planner(limit: int):  # type: ignore[no-untyped-def]
    """stub_planner with at most `limit` instances: workloads that do not fit are left out, the
    biggest first (as the real planner's packing.cover leaves them to a type's max_instances)."""

    def plan(policy, rates, corrections, caps, current) -> Plan:  # type: ignore[no-untyped-def]
        full = stub_planner(policy, rates, corrections, caps, current)
        need: dict[str, int] = {}
        for i in full.instances:
            w = i.gpus[0].placements[0].workload
            need[w] = need.get(w, 0) + 1
        out = []
        for w in sorted(need, key=lambda w: -need[w]):
            if sum(need.values()) <= limit:
                break
            out.append(w)
            del need[w]
        kept = tuple(i for i in full.instances if i.gpus[0].placements[0].workload in need)
        return Plan("stub", kept, tuple(Unplaced(w, "no capacity: at max_instances") for w in out))

    return plan


def test_a_hold_plan_that_leaves_a_workload_out_gives_way_to_a_target_that_places_it(tmp_path: Path) -> None:
    """At most 5 instances: res grows to 310 req/s (4) beside alex's 300 (3), so res is left out.
    alex then falls to 50: the plan for the forecast (1 + 4 instances) places res and costs more
    than the hold plan at alex's old rate (3, res still out), yet it is adopted on that tick (the
    hold plan kept res dark for good: the MIG rollout property's seed-4 case)."""
    policy = make_policy(tmp_path)
    clock = Clock()
    ctl, _, _, rates = make_controller(policy, clock, rates={"alex": 300.0, "res": 100.0}, planner=capped_planner(5))
    settle(ctl, clock, 3)
    rates.set(res=310.0)
    clock.advance(30)
    report = ctl.tick()
    assert report.layout is not None and [u.workload for u in report.layout.unplaced] == ["res"]
    rates.set(alex=50.0)
    clock.advance(30)
    report = ctl.tick()
    assert report.decision == "target: it places res, which the hold plan leaves out", report.decision
    assert report.layout is not None and not report.layout.unplaced and len(report.layout.slots) == 5


def test_capacity_error_replans_on_another_type_in_the_same_tick(tmp_path: Path) -> None:
    policy = make_policy(tmp_path)
    clock = Clock()
    ctl, prov, _, _ = make_controller(policy, clock)
    prov.no_capacity.add("p3.2xlarge")
    report = ctl.tick()
    assert report.ok and report.rounds == 2
    launched = [c[2] for c in prov.mutating_calls()]
    assert launched[0] == "p3.2xlarge" and set(launched[1:]) == {"p3.8xlarge"} and len(launched) == 4
    assert {r.instance_type for r in live(ctl)} == {"p3.8xlarge"}
    assert "p3.2xlarge" in ctl.current_state().unavailable
    failed = [r for r in ctl.store.all_records() if r.instance_type == "p3.2xlarge"]
    assert [r.state for r in failed] == [State.TERMINATED]  # failed, then released
    assert [h["reason"] for h in ctl.store.history(failed[0].slot)] == ["request", "launch_failed", "release"]
    clock.advance(181)  # unavailable for 3 minutes
    prov.no_capacity.clear()
    assert ctl.caps(clock()) == {}


def test_lost_state_rediscovers_by_tag_and_launches_nothing(tmp_path: Path) -> None:
    policy = make_policy(tmp_path)
    clock = Clock()
    ctl, prov, tr, _ = make_controller(policy, clock)
    settle(ctl, clock, 3)
    n = len(prov.mutating_calls())
    ctl2, _, _, _ = make_controller(policy, clock, provider=prov, transport=tr, store=Store(":memory:"))
    settle(ctl2, clock, 3)
    assert prov.mutating_calls()[n:] == []
    assert len(live(ctl2)) == 3


def test_crash_between_launch_and_record_adopts(tmp_path: Path) -> None:
    """A launch that reached the provider but was never recorded is adopted, not repeated."""
    policy = make_policy(tmp_path)
    clock = Clock()
    ctl, prov, _, _ = make_controller(policy, clock)
    ctl.tick()
    # simulate: the record fell back to REQUESTED (the LAUNCHED write was lost)
    with ctl.store._tx() as db:
        db.execute("UPDATE instances SET state='requested', instance_id=NULL")
    clock.advance(30)
    ctl.tick()
    assert len(prov.list_instances()) == 3
    assert {r.state for r in live(ctl)} <= {State.RUNNING, State.READY} and len(live(ctl)) == 3
    assert any(h["reason"] == "adopted" for h in ctl.store.history())


def test_vanished_instance_is_replaced(tmp_path: Path) -> None:
    policy = make_policy(tmp_path)
    clock = Clock()
    ctl, prov, _, _ = make_controller(policy, clock)
    settle(ctl, clock, 3)
    victim = live(ctl)[0]
    prov.kill(victim.instance_id or "")
    clock.advance(30)
    ctl.tick()
    relaunch = [c for c in prov.calls if c[0] == "launch"][-1]
    assert relaunch[1] == victim.slot and relaunch[3] == "1"  # same slot, next attempt


def test_not_ready_in_time_is_replaced(tmp_path: Path) -> None:
    policy = make_policy(tmp_path, workloads=[{"name": "alex", "model": "alexnet", "slo_ms": 15, "rate_rps": 50}])
    clock = Clock()
    ctl, prov, tr, _ = make_controller(policy, clock)
    ctl.tick()
    [rec] = live(ctl)
    tr.unreachable.add(rec.instance_id or "")
    for _ in range(31):  # 930 s > ready_timeout_s 900
        clock.advance(30)
        ctl.tick()
    assert ("terminate", rec.instance_id) in prov.calls
    assert any(h["reason"] == "ready_timeout" for h in ctl.store.history())
    assert [r.attempt for r in live(ctl)] == [1]


def test_agent_that_lost_its_assignment_gets_it_again(tmp_path: Path) -> None:
    policy = make_policy(tmp_path)
    clock = Clock()
    ctl, _prov, tr, _ = make_controller(policy, clock)
    settle(ctl, clock, 3)
    rec = live(ctl)[0]
    before = [a for i, a in tr.applies if i == rec.instance_id]
    tr.forget(rec.instance_id or "")
    settle(ctl, clock, 1)
    after = [a for i, a in tr.applies if i == rec.instance_id]
    assert len(after) == len(before) + 1 and after[-1] == before[-1]  # same generation, same servers


def test_slo_guard_raises_correction_and_capacity(tmp_path: Path) -> None:
    policy = make_policy(
        tmp_path,
        workloads=[
            {"name": "alex", "model": "alexnet", "slo_ms": 15, "rate_rps": 150},
            {"name": "res", "model": "resnet50", "slo_ms": 40, "rate_rps": 90},
        ],
    )
    clock = Clock()
    ctl, _prov, tr, _ = make_controller(policy, clock)
    settle(ctl, clock, 3)
    tr.p99["res"] = 80.0  # SLO 40 ms
    settle(ctl, clock, 3)
    assert ctl.current_state().slo_guard.corrections["res"] > 1.0
    settle(ctl, clock, 1)
    assert len(live(ctl)) == 4  # res: 90 rps at 100 / 1.2 per instance -> 2


def test_rate_source_failure_never_scales_in(tmp_path: Path) -> None:
    policy = make_policy(
        tmp_path,
        scaling={"interval_s": 30, "scale_down_delay_s": 0, "headroom": 0.0, "forecast": "last"},
        rates={"source": "static", "stale_after_s": 60},
    )
    clock = Clock()
    ctl, prov, _, rates = make_controller(policy, clock)
    settle(ctl, clock, 3)
    rates.fail = True
    for _ in range(5):
        clock.advance(30)
        report = ctl.tick()
        assert report.ok and report.outcome.errors.get("rates") == 1
    assert report.missing == ["alex", "res"]
    assert not [c for c in prov.calls if c[0] == "terminate"] and len(live(ctl)) == 3


def test_provider_outage_fails_the_tick_cleanly(tmp_path: Path) -> None:
    policy = make_policy(tmp_path)
    clock = Clock()
    ctl, prov, _, _ = make_controller(policy, clock)
    prov.fail_next.append(ThrottledError("RequestLimitExceeded"))
    report = ctl.tick()
    assert report.ok and report.outcome.errors.get("provider") == 1
    # issue 18's throttling row: the intent is kept, the round's other launches wait for the backoff
    assert {r.state for r in ctl.store.open_records()} == {State.REQUESTED}
    assert any(n.startswith("provider backing off") for n in report.notes) and report.backoff_until
    clock.advance(30)
    ctl.tick()
    assert len(prov.list_instances()) == 3 and len(live(ctl)) == 3


def test_max_cost_per_hour_caps_launches(tmp_path: Path) -> None:
    policy = make_policy(
        tmp_path, scaling={"interval_s": 30, "max_cost_per_hour": 7.0, "headroom": 0.0, "forecast": "last"}
    )
    ctl, prov, _, _ = make_controller(policy, Clock())
    report = ctl.tick()
    assert len(prov.mutating_calls()) == 2 and "max_cost_per_hour" in report.notes[0]


def test_agents_rate_source_follows_request_counters(tmp_path: Path) -> None:
    from autoscaler.rates.agents import AgentsRates
    from autoscaler.rates.reader import RateReader

    policy = make_policy(tmp_path, rates={"source": "agents"})
    clock = Clock()
    ctl, _prov, tr, _ = make_controller(policy, clock)
    ctl.deps.rates = RateReader(AgentsRates(), 300)
    first = ctl.tick()
    assert first.missing == ["alex", "res"] and first.forecast == {"alex": 150.0, "res": 50.0}  # rate_rps prior
    settle(ctl, clock, 2)
    names = {s.name: s.workload for _, s in ctl.store.current_layout().servers()}  # type: ignore[union-attr]
    total = dict.fromkeys(names, 0)
    for _ in range(2):  # alex servers: 10 req/s each; res: 300 req/s
        for n, w in names.items():
            total[n] += 300 if w == "alex" else 9000
        tr.requests.update(total)
        clock.advance(30)
        report = ctl.tick()
    assert report.observed == {"alex": 20.0, "res": 300.0} and report.missing == []
    assert len(live(ctl)) == 3 + 2  # res needs 3 instances at once: scale-out


def test_ready_instance_whose_agent_goes_silent_is_replaced(tmp_path: Path) -> None:
    policy = make_policy(tmp_path, workloads=[{"name": "alex", "model": "alexnet", "slo_ms": 15, "rate_rps": 50}])
    clock = Clock()
    ctl, prov, tr, _ = make_controller(policy, clock)
    settle(ctl, clock, 3)
    [rec] = live(ctl)
    assert rec.state is State.READY
    tr.unreachable.add(rec.instance_id or "")
    for _ in range(30):  # 900 s: not yet
        clock.advance(30)
        ctl.tick()
    assert ("terminate", rec.instance_id) not in prov.calls
    clock.advance(30)
    ctl.tick()
    assert ("terminate", rec.instance_id) in prov.calls
    assert [h["reason"] for h in ctl.store.history(rec.slot) if h["attempt"] == 0][-1] == "agent_lost"
    assert [r.attempt for r in live(ctl)] == [1]


def test_resize_is_make_before_break_when_the_gpu_has_room(tmp_path: Path) -> None:
    """The live-demo bug: a resized server kept its name and was restarted in place. Now a resized
    server always gets a new name and port: the agent runs old and new side by side and the old
    one goes once the new one serves, with room on the GPU (30 % -> 60 %) or without it (60 % ->
    80 %: 140 % assigned while the new server starts, a handover: it takes the old one's load once
    ready). A server that already carries its placement's rate is left as it runs instead."""
    from autoscaler.planner.types import GpuOut, InstanceOut, PlacementOut, Plan

    want = {"mps": 30.0, "rate": 100.0}

    def planner(policy, rates, corrections, caps, current):  # type: ignore[no-untyped-def]
        place = PlacementOut("alex", "alexnet", 4, want["mps"], want["rate"], 5.0, 120.0)
        return Plan("one", (InstanceOut("p3.2xlarge", 3.06, (GpuOut(0, "v100", (place,)),)),))

    clock = Clock()
    ctl, _, tr, _ = make_controller(make_policy(tmp_path), clock, planner=planner)
    settle(ctl, clock, 3)
    names = lambda: [(s["name"], s["port"], s["mps_percent"]) for s in tr.applies[-1][1]["servers"]]  # noqa: E731
    assert [n[0] for n in names()] == ["alex-0"]
    want.update(mps=60.0, rate=5000.0)  # more than alex-0 carries: it must be replaced
    clock.advance(30)
    assert ctl.tick().ok
    assert sorted(n[0] for n in names()) == ["alex-0", "alex-1"]  # both: make-before-break
    settle(ctl, clock, 2)
    assert [n[0] for n in names()] == ["alex-1"] and names()[0][2] == 60.0
    want.update(mps=80.0, rate=9000.0)  # 60 + 80 > 100: a handover, never a restart in place
    clock.advance(30)
    assert ctl.tick().ok
    # alex-2, not alex-0: alex-1 still says it replaced alex-0 (a name reused would make each seem
    # to replace the other)
    assert sorted((n[0], n[2]) for n in names()) == [("alex-1", 60.0), ("alex-2", 80.0)]
    settle(ctl, clock, 2)
    assert [(n[0], n[2]) for n in names()] == [("alex-2", 80.0)]
    for (_, before), (_, after) in zip(tr.applies, tr.applies[1:]):  # never a restart in place
        old = {s["name"]: (s["port"], s["mps_percent"], s["batch"]) for s in before["servers"]}
        for s in after["servers"]:
            assert old.get(s["name"], (s["port"], s["mps_percent"], s["batch"])) == (
                s["port"],
                s["mps_percent"],
                s["batch"],
            )
    want.update(mps=50.0, rate=10.0)  # alex-2 (80 %) carries 10 req/s as it is: left alone
    before = len(tr.applies)
    settle(ctl, clock, 2)
    assert len(tr.applies) == before


def test_min_rate_floor_shows_in_the_rate_planned_for(tmp_path: Path) -> None:
    """The tick report (and so the status page and gauges) shows the rate actually planned for:
    max(forecast, min_rate_rps), not a forecast the floor overrides; the observation is kept as is."""
    workloads = [
        {"name": "alex", "model": "alexnet", "slo_ms": 15, "rate_rps": 150, "min_rate_rps": 250},
        {"name": "res", "model": "resnet50", "slo_ms": 40, "rate_rps": 50},
    ]
    clock = Clock()
    ctl, prov, _, rates = make_controller(make_policy(tmp_path, workloads=workloads), clock)
    rates.set(alex=40.0, res=50.0)
    report = ctl.tick()
    assert report.forecast == {"alex": 250.0, "res": 50.0} and report.observed["alex"] == 40.0
    assert len([c for c in prov.calls if c[0] == "launch"]) == 4  # 3 for the floor (stub: 100 per GPU) + 1
