"""rollout: the invariant (ready capacity never below min(demand, capacity before the change))
and one tick's stops and starts, judged model-free (shares) unless a test says otherwise."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from autoscaler.config.policy import load_policy
from autoscaler.core.layout.layout_types import PlannedServer, is_stand_in
from autoscaler.core.rollout.colocation import server_judge, split
from autoscaler.core.rollout.rollout import Gpu, RolloutInput, Tick, original_of, shares_judge, step
from tests.kit.control import REPO

pytestmark = pytest.mark.unit


K0, K1 = ("s0", 0), ("s1", 0)


def srv(
    name: str, workload: str, mps: float, thr: float, batch: int = 4, index: int = 0, replaces: str = ""
) -> PlannedServer:
    return PlannedServer(
        name=name,
        workload=workload,
        model="alexnet",
        gpu_index=0,
        index=index,
        batch=batch,
        mps_percent=mps,
        rate_rps=thr,
        predicted_latency_ms=5.0,
        predicted_throughput_rps=thr,
        model_dir="/m",
        max_queue_delay_ms=5.0,
        replaces=replaces,
    )


def gpu(key: tuple[str, int], running: Sequence[PlannedServer], wanted: Sequence[PlannedServer]) -> Gpu:
    return Gpu(key=key, instance_type="p3", running=tuple(running), wanted=tuple(wanted))


def names(servers: Sequence[PlannedServer]) -> list[str]:
    return sorted(s.name for s in servers)


def test_stand_in_names_say_whose_copy_they_are() -> None:
    assert is_stand_in("m-large-3-s0") and original_of("m-large-3-s0") == "m-large-3"
    assert not is_stand_in("m-large-3") and original_of("m-large-3") is None
    assert not is_stand_in("a-s-1")  # workload "a-s", server 1


def test_floor_is_the_smaller_of_the_capacity_before_and_the_demand() -> None:
    a0 = srv("a-0", "a", 50.0, 300.0)
    inp = RolloutInput(gpus=(gpu(K0, [a0], [a0]),), ready=frozenset({"a-0"}), demand={"a": 200.0})
    assert Tick(inp).floor == {"a": 200.0}
    with_base = RolloutInput(gpus=inp.gpus, ready=inp.ready, demand={"a": 1000.0}, baseline={"a": 500.0})
    assert Tick(with_base).floor == {"a": 500.0}  # the capacity when the change began, if it was more
    unknown = RolloutInput(gpus=inp.gpus, ready=inp.ready, demand={})
    assert Tick(unknown).floor == {"a": 300.0}  # no demand known: keep all it has


def test_a_moved_server_stays_until_its_replacement_serves() -> None:
    a0, a1 = srv("a-0", "a", 50.0, 300.0), srv("a-1", "a", 50.0, 300.0)
    gpus = (gpu(K0, [a0], []), gpu(K1, [], [a1]))
    first = step(RolloutInput(gpus=gpus, ready=frozenset({"a-0"}), demand={"a": 250.0}))
    assert names(first.assign[K0]) == ["a-0"] and names(first.assign[K1]) == ["a-1"]
    assert first.started == {"a-1"} and not first.stopped and not first.short()
    gpus = (gpu(K0, [a0], []), gpu(K1, [a1], [a1]))
    second = step(RolloutInput(gpus=gpus, ready=frozenset({"a-0", "a-1"}), demand={"a": 250.0}))
    assert second.assign[K0] == () and second.stopped == {"a-0"}
    assert second.after["a"] == pytest.approx(300.0) and second.converged


def test_scale_in_goes_down_to_the_demand_and_no_further() -> None:
    """Three servers of 100 req/s each, two retiring, demand 150: one may leave, the other stays."""
    keep, r1, r2 = (
        srv("a-0", "a", 30.0, 100.0),
        srv("a-1", "a", 30.0, 100.0, index=1),
        srv("a-2", "a", 30.0, 100.0, index=2),
    )
    inp = RolloutInput(
        gpus=(gpu(K0, [keep, r1, r2], [keep]),), ready=frozenset({"a-0", "a-1", "a-2"}), demand={"a": 150.0}
    )
    out = step(inp)
    assert len(out.stopped) == 1 and out.after["a"] == pytest.approx(200.0)
    assert out.after["a"] >= out.floor["a"] == 150.0


def test_drained_hook_holds_a_retiring_server_in_its_assignment_until_drained() -> None:
    a0, a1 = srv("a-0", "a", 40.0, 300.0), srv("a-1", "a", 40.0, 300.0, index=1)
    gpus = (gpu(K0, [a0, a1], [a1]),)
    ready = frozenset({"a-0", "a-1"})
    held = step(RolloutInput(gpus=gpus, ready=ready, demand={"a": 250.0}, drained=frozenset()))
    assert names(held.assign[K0]) == ["a-0", "a-1"] and held.draining == {"a-0"} and not held.stopped
    assert held.after["a"] == pytest.approx(300.0)  # draining carries nothing: the gateway sends it nothing new
    gone = step(RolloutInput(gpus=gpus, ready=ready, demand={"a": 250.0}, drained=frozenset({"a-0"})))
    assert names(gone.assign[K0]) == ["a-1"] and gone.stopped == {"a-0"} and not gone.draining
    no_gateway = step(RolloutInput(gpus=gpus, ready=ready, demand={"a": 250.0}))
    assert no_gateway.assign == gone.assign


def test_a_needed_server_is_never_drained() -> None:
    a0, a1 = srv("a-0", "a", 40.0, 300.0), srv("a-1", "a", 40.0, 300.0, index=1)
    out = step(
        RolloutInput(
            gpus=(gpu(K0, [a0], []), gpu(K1, [a1], [a1])),
            ready=frozenset({"a-0"}),  # a-1 not ready yet
            demand={"a": 250.0},
            drained=frozenset({"a-0"}),
        )
    )
    assert not out.draining and not out.stopped and names(out.assign[K0]) == ["a-0"]


def test_a_resize_on_a_full_gpu_is_a_handover_not_a_restart() -> None:
    """a-0 (60 %) is resized on its own GPU to a-1 (100 %, which `replaces` it): a-1 starts beside
    it (a new name and port; it loads nothing until ready), a-0 serves until a-1 does, then goes."""
    a0, a1 = srv("a-0", "a", 60.0, 300.0), srv("a-1", "a", 100.0, 500.0, index=1, replaces="a-0")
    first = step(RolloutInput(gpus=(gpu(K0, [a0], [a1]),), ready=frozenset({"a-0"}), demand={"a": 450.0}))
    assert names(first.assign[K0]) == ["a-0", "a-1"] and first.after["a"] == pytest.approx(300.0)
    second = step(RolloutInput(gpus=(gpu(K0, [a0, a1], [a1]),), ready=frozenset({"a-0", "a-1"}), demand={"a": 450.0}))
    assert names(second.assign[K0]) == ["a-1"] and second.after["a"] == pytest.approx(500.0)


def test_a_shrink_that_still_needs_the_old_server_does_not_hand_over() -> None:
    """The smaller a-1 cannot carry the demand alone once a-0 hands over to it, and 60 + 50 > 100
    leaves no room to run both busy: a-1 waits (surge's case)."""
    a0, a1 = srv("a-0", "a", 60.0, 500.0), srv("a-1", "a", 50.0, 200.0, index=1, replaces="a-0")
    out = step(RolloutInput(gpus=(gpu(K0, [a0], [a1]),), ready=frozenset({"a-0"}), demand={"a": 450.0}))
    assert names(out.assign[K0]) == ["a-0"] and out.blocked == {K0: (a1,)}


def test_another_workloads_retiring_server_blocks_until_it_can_leave() -> None:
    b0, a1 = srv("b-0", "b", 60.0, 300.0), srv("a-1", "a", 60.0, 300.0, index=1)
    out = step(RolloutInput(gpus=(gpu(K0, [b0], [a1]),), ready=frozenset({"b-0"}), demand={"a": 250.0, "b": 250.0}))
    assert names(out.assign[K0]) == ["b-0"] and out.blocked == {K0: (a1,)}
    tick = Tick(RolloutInput(gpus=(gpu(K0, [b0], [a1]),), ready=frozenset({"b-0"}), demand={"b": 250.0}))
    tick.stop()
    tick.start()
    tick.force_out(["b-0"])  # break-before-make, as surge.py does when a limit leaves no room
    tick.start([K0])
    forced = tick.result()
    assert names(forced.assign[K0]) == ["a-1"] and forced.forced == {"b-0"}
    assert forced.short() == {"b": pytest.approx(250.0)}  # the breach shows


def test_a_stand_in_leaves_once_its_planned_server_serves() -> None:
    a1, copy = srv("a-1", "a", 60.0, 300.0), srv("a-1-s0", "a", 60.0, 320.0)
    gpus = (gpu(K0, [a1], [a1]), gpu(K1, [copy], []))
    waiting = step(RolloutInput(gpus=gpus, ready=frozenset({"a-1-s0"}), demand={"a": 600.0}))
    assert names(waiting.assign[K1]) == ["a-1-s0"]  # a-1 not ready: the copy carries a
    done = step(RolloutInput(gpus=gpus, ready=frozenset({"a-1", "a-1-s0"}), demand={"a": 600.0}))
    assert done.assign[K1] == () and done.stopped == {"a-1-s0"}  # even though a is below 600 without it


def test_a_starting_server_loads_nothing_but_must_fit_once_it_serves() -> None:
    """The real model: a new neighbour that would push a server over its budget once busy never starts."""
    policy = load_policy(REPO / "policies" / "servegen-sim.yaml")
    judge = server_judge(policy)
    large = PlannedServer(
        name="m-large-0",
        workload="m-large",
        model="vgg19",
        gpu_index=0,
        index=0,
        batch=5,
        mps_percent=65.0,
        rate_rps=100.0,
        predicted_latency_ms=5.0,
        predicted_throughput_rps=100.0,
        model_dir="/m",
        max_queue_delay_ms=5.0,
    )
    small = PlannedServer(
        name="m-small-0",
        workload="m-small",
        model="alexnet",
        gpu_index=0,
        index=1,
        batch=14,
        mps_percent=35.0,
        rate_rps=100.0,
        predicted_latency_ms=5.0,
        predicted_throughput_rps=100.0,
        model_dir="/m",
        max_queue_delay_ms=5.0,
    )
    assert not all(ok for ok, _ in judge("g4dn.xlarge", [large, small]))
    g = Gpu(key=K0, instance_type="g4dn.xlarge", running=(large,), wanted=(large, small))
    out = step(RolloutInput(gpus=(g,), ready=frozenset({"m-large-0"}), demand={}, judge=judge))
    assert out.blocked == {K0: (small,)} and names(out.assign[K0]) == ["m-large-0"]


def test_over_subscribed_shares_are_judged_as_the_proportional_split() -> None:
    assert split([60.0, 30.0]) == [60.0, 30.0]
    assert split([80.0, 70.0]) == pytest.approx([80.0 / 1.5, 70.0 / 1.5])
    assert shares_judge("p3", [srv("a", "a", 80.0, 1.0), srv("b", "b", 70.0, 1.0)]) == [(False, 0.0), (False, 0.0)]


def test_a_ready_successor_keeps_its_predecessors_load_even_when_a_later_plan_drops_it() -> None:
    """A handover half done when the plan changes (the successor is no longer wanted either): the
    predecessor still carries nothing and loads nothing, so its neighbours are not judged as if
    three busy servers shared the GPU (which made a server there look worthless, and go)."""
    from autoscaler.core.rollout.rollout import loading

    old = srv("b-0", "b", 65.0, 300.0)
    new = srv("b-1", "b", 55.0, 280.0, index=1, replaces="b-0")
    other = srv("c-0", "c", 10.0, 60.0, index=2)
    wanted = {other.agent_key()}  # the newest plan wants neither b server here
    assert names(loading([old, new, other], {"b-0", "b-1", "c-0"}, wanted)) == ["b-1", "c-0"]
    assert names(loading([old, new, other], {"b-0", "c-0"}, wanted)) == ["b-0", "c-0"]  # b-1 not ready
    renamed = srv("b-0", "b", 30.0, 200.0, index=3)  # a new server reusing the name, wanted
    assert names(loading([renamed, new], {"b-0", "b-1"}, {renamed.agent_key()})) == ["b-0", "b-1"]
    out = step(
        RolloutInput(
            gpus=(gpu(K0, [old, new, other], [other]),), ready=frozenset({"b-0", "b-1", "c-0"}), demand={"c": 50.0}
        )
    )
    assert "c-0" in names(out.assign[K0]) and out.after["c"] > 0


def test_two_servers_naming_each_other_both_load_their_gpu() -> None:
    """A successor whose predecessor left keeps `replaces`; should a later server carry that name
    and replace it back, neither can be said to have taken over: both load the GPU (neither is
    dropped from the judgement, which once left the workload with no capacity there at all)."""
    from autoscaler.core.rollout.rollout import loading

    a2, a0 = srv("a-2", "a", 40.0, 95.0, replaces="a-0"), srv("a-0", "a", 40.0, 102.0, index=1, replaces="a-2")
    assert names(loading([a2, a0], {"a-0", "a-2"}, ())) == ["a-0", "a-2"]
    a1 = srv("a-1", "a", 40.0, 102.0, index=1, replaces="a-2")
    assert names(loading([a2, a1], {"a-1", "a-2"}, ())) == ["a-1"]  # an ordinary handover


def test_a_stand_ins_relief_never_takes_a_workload_at_its_floor_below_it() -> None:
    """x1 and x2 retire; x2's stand-in (left from an earlier plan that moved x2) still runs beside
    it. x1 may go (m keeps its floor); x2 then may not, although its stand-in's relief would lower
    the bar to where m is without that stand-in: m would end 20 req/s below its floor. Found by
    the MIG property test (two removals in one tick on a re-cut)."""
    k, x1, x2 = srv("m-0", "m", 30.0, 100.0), srv("m-1", "m", 20.0, 30.0, index=1), srv("m-2", "m", 20.0, 40.0)
    copy = srv("m-2-s0", "m", 20.0, 40.0)
    inp = RolloutInput(
        gpus=(gpu(K0, [k, x1], [k]), gpu(K1, [x2], []), gpu(("s2", 0), [copy], [])),
        ready=frozenset({"m-0", "m-1", "m-2", "m-2-s0"}),
        demand={"m": 160.0},
        elsewhere=frozenset({"m-3"}),
        pending=frozenset({"m"}),
    )
    result = step(inp)
    assert result.floor == {"m": 160.0} and "m-1" in result.stopped and "m-2" not in result.stopped
    assert not result.short()
