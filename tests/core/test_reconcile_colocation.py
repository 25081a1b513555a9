"""reconcile.diff with a GPU-fit predicate (Limits.gpu_fits) or the performance model, and resizes:
never restarted in place while they carry capacity (a handover beside the old server, or surge)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest

from autoscaler.config.policy import load_policy
from autoscaler.core.fleet.lifecycle import State
from autoscaler.core.layout.layout_types import Layout, PlannedServer, SlotSpec
from autoscaler.core.rollout.colocation import gpu_fits
from autoscaler.core.rollout.reconcile import Configure, GpuFits, Launch, Limits, shares_fit
from tests.core.test_reconcile import done, kinds, never_below, rec, run, share, slot
from tests.kit.control import REPO
from tests.kit.paperfleet import fleet

pytestmark = pytest.mark.unit


def rejects(*servers: tuple[str, float]) -> GpuFits:
    """Shares within 100 %, but never all of `servers` (name, share) on one GPU (a stand-in latency test)."""

    def fits(instance_type: str, on_gpu: Sequence[PlannedServer]) -> bool:
        return shares_fit(instance_type, on_gpu) and not set(servers) <= {(s.name, s.mps_percent) for s in on_gpu}

    return fits


def configures(d) -> dict[str, Configure]:  # type: ignore[no-untyped-def]
    return {a.slot: a for a in d.actions if isinstance(a, Configure)}


def on_gpu(servers: Sequence[PlannedServer], gpu: int) -> list[tuple[str, float]]:
    return sorted((s.name, s.mps_percent) for s in servers if s.gpu_index == gpu)


# --- Limits.gpu_fits: per GPU, what may run side by side --------------------------------------


def two_gpus(name: str, *servers: PlannedServer) -> SlotSpec:
    return SlotSpec(name, "p3", 3.0, ("v100", "v100"), servers)


GROW = [
    two_gpus("s0", share("a-0", "a", 0, 65.0), replace(share("c-0", "c", 2, 50.0), gpu_index=1)),
    slot("s1", share("b-1", "b", 0, 35.0)),
]
GROW_APPLIED = {"s0": (share("a-0", "a", 0, 50.0), share("b-0", "b", 1, 35.0))}


def test_predicate_rejecting_a_full_gpu_defers_its_planned_change() -> None:
    """GPU 0 cannot hold a-0's new size beside b-0 (the predicate), and a-0 is planned under its own
    name, so it cannot start beside its old version either: GPU 0 keeps what it runs (before, a-0
    was restarted in place once b-0 left) and a-0's new size starts early elsewhere: on the room the
    booting s1 will have beside b-1 (35 % + 65 %), or, where it has none, on a surge instance."""
    records = [rec("s0"), rec("s1", State.PENDING)]
    limits = Limits(gpu_fits=rejects(("a-0", 65.0), ("b-0", 35.0)))
    d = run(GROW, records, GROW_APPLIED, ready={"a-0", "b-0"}, limits=limits)
    conf = configures(d)["s0"]  # GPU 1 still gets c-0: each GPU moves on its own
    assert on_gpu(conf.servers, 0) == [("a-0", 50.0), ("b-0", 35.0)]
    assert on_gpu(conf.servers, 1) == [("c-0", 50.0)]
    assert not [a for a in d.actions if isinstance(a, Launch)] and not d.breaches  # s1 is ready as soon as a surge
    full = [GROW[0], slot("s1", share("b-1", "b", 0, 50.0))]  # s1 will have no room: a surge instance
    d = run(full, records, GROW_APPLIED, ready={"a-0", "b-0"}, limits=limits)
    assert [a.reason for a in d.actions if isinstance(a, Launch)] == ["surge: stand-in for a-0 while s0 GPU 0 changes"]
    assert not d.breaches


def test_a_stand_in_waiting_for_a_booting_instance_starts_there_once_it_is_ready() -> None:
    """The room s1 was booting with is borrowed the tick s1 is ready: the stand-in starts beside
    b-1 (no surge instance ever launched)."""
    records = [rec("s0"), rec("s1")]  # s1 is ready now; its agent runs nothing yet
    d = run(
        GROW, records, GROW_APPLIED, ready={"a-0", "b-0"}, limits=Limits(gpu_fits=rejects(("a-0", 65.0), ("b-0", 35.0)))
    )
    assert not [a for a in d.actions if isinstance(a, Launch)] and not d.breaches
    assert on_gpu(configures(d)["s1"].servers, 0) == [("a-0-s0", 65.0), ("b-1", 35.0)]


def test_a_resize_under_a_new_name_hands_over_on_its_own_gpu() -> None:
    """As the layout names it (a resized running server gets a new name, a-2): a-2 starts beside
    a-0 (assigned 150 %, but a starting server runs no kernels) and takes over once it serves, while
    b-0 stays for b-1. Before, a-0 was restarted in place at the new size."""
    a2 = replace(share("a-2", "a", 3, 65.0), replaces="a-0")
    layout = [
        two_gpus("s0", a2, replace(share("c-0", "c", 2, 50.0), gpu_index=1)),
        slot("s1", share("b-1", "b", 0, 35.0)),
    ]
    d = run(layout, [rec("s0"), rec("s1", State.PENDING)], GROW_APPLIED, ready={"a-0", "b-0"})
    assert on_gpu(configures(d)["s0"].servers, 0) == [("a-0", 50.0), ("a-2", 65.0), ("b-0", 35.0)]
    applied = {"s0": configures(d)["s0"].servers}
    d = run(layout, [rec("s0"), rec("s1", State.PENDING)], applied, ready={"a-0", "a-2", "b-0"})
    assert on_gpu(configures(d)["s0"].servers, 0) == [("a-2", 65.0), ("b-0", 35.0)]
    assert not any("break-before-make" in n for n in d.notes)


def test_a_swap_under_a_predicate_starts_where_the_pair_is_allowed() -> None:
    """a and b swap GPUs and the predicate forbids a-1 beside b-0 but allows b-1 beside a-0: b-1
    starts on s1 at once, s0 waits for b-0 to leave (the old reconcile removed b-0 first)."""
    layout = [slot("s0", share("a-1", "a", 1, 50.0)), slot("s1", share("b-1", "b", 0, 50.0))]
    applied = {"s0": (share("b-0", "b", 0, 50.0),), "s1": (share("a-0", "a", 0, 50.0),)}
    fits = rejects(("a-1", 50.0), ("b-0", 50.0))
    d = run(layout, [rec("s0"), rec("s1")], applied, ready={"a-0", "b-0"}, limits=Limits(gpu_fits=fits))
    confs = configures(d)
    assert list(confs) == ["s1"] and sorted(s.name for s in confs["s1"].servers) == ["a-0", "b-1"]
    assert all(fits("p3", c.servers) for c in confs.values()) and not d.breaches
    assert any("make-before-break on s0 GPU 0: a-1 start once b-0 leave" in n for n in d.notes)
    pf = fleet(layout, applied, limits=Limits(gpu_fits=fits))
    pf.run()
    assert done(pf)
    never_below(pf)


# --- shrinks and grows of a running server ------------------------------------------------------


def sized(name: str, batch: int, mps: float, thr: float, workload: str = "m", replaces: str = "") -> PlannedServer:
    return PlannedServer(
        name=name,
        workload=workload,
        model="alexnet",
        gpu_index=0,
        index=int(name.rsplit("-", 1)[1]),
        batch=batch,
        mps_percent=mps,
        rate_rps=100.0,
        predicted_latency_ms=5.0,
        predicted_throughput_rps=thr,
        model_dir="/m",
        max_queue_delay_ms=7.5,
        replaces=replaces,
    )


BIG, SMALL = sized("m-1", 8, 60.0, 1000.0), sized("m-4", 4, 30.0, 200.0, replaces="m-1")
N0 = sized("n-0", 4, 20.0, 100.0, "n")


def test_a_shrink_keeps_the_big_server_until_the_rest_of_its_workload_serves() -> None:
    """m-1 (1000 req/s) shrinks to m-4 (200) while m-2 (800) boots: m needs m-1 until then, and
    60 + 30 + 20 > 100 leaves no room for m-4 beside it, so m-4 waits (n-0 starts at once)."""
    layout = [slot("s0", SMALL, N0), slot("s1", sized("m-2", 4, 50.0, 800.0))]
    d = run(layout, [rec("s0"), rec("s1", State.PENDING)], {"s0": (BIG,)}, ready={"m-1"})
    assert by_name(configures(d)["s0"].servers) == [BIG, N0]
    pf = fleet(layout, {"s0": (BIG,)})
    pf.records["s1"] = rec("s1", State.PENDING)
    pf.run()
    assert done(pf) and not any(d.breaches for d in pf.diffs)
    never_below(pf)


def test_a_grow_hands_over_at_once() -> None:
    """More predicted throughput takes over the old one's load: started beside it, no waiting."""
    old = sized("m-3", 4, 30.0, 200.0)
    grown = sized("m-4", 8, 80.0, 1000.0, replaces="m-3")
    layout = [slot("s0", grown), slot("s1", sized("m-2", 4, 50.0, 800.0))]
    calm = Limits(burst=False)  # no burst stand-in for m-2 in the room m-3 leaves (test_burst.py)
    d = run(layout, [rec("s0"), rec("s1", State.PENDING)], {"s0": (old,)}, ready={"m-3"}, limits=calm)
    assert by_name(configures(d)["s0"].servers) == [old, grown]  # 110 % assigned, m-4 idle until ready
    d = run(layout, [rec("s0"), rec("s1", State.PENDING)], {"s0": (old, grown)}, ready={"m-3", "m-4"}, limits=calm)
    assert by_name(configures(d)["s0"].servers) == [grown]


def test_a_shrink_that_frees_room_for_a_neighbour_moves_on_surge() -> None:
    """The shrink frees room n-0 needs (60 % + 70 % > 100 %) while m needs m-1 until m-2 serves:
    n-0 waits for m-1 to leave, nobody is restarted in place, and nobody is ever short."""
    n0 = sized("n-0", 4, 70.0, 300.0, "n")
    layout = [slot("s0", SMALL, n0), slot("s1", sized("m-2", 4, 50.0, 800.0))]
    d = run(layout, [rec("s0"), rec("s1", State.PENDING)], {"s0": (BIG,)}, ready={"m-1"})
    assert kinds(d) in ([("Configure", "s0")], []) and not d.breaches
    pf = fleet(layout, {"s0": (BIG,)})
    pf.records["s1"] = rec("s1", State.PENDING)
    pf.run(40)
    assert done(pf)
    never_below(pf)


# --- colocation.gpu_fits: the performance model's latency test --------------------------------


def t4(name: str, workload: str, model: str, batch: int, mps: float, index: int) -> PlannedServer:
    return PlannedServer(
        name=name,
        workload=workload,
        model=model,
        gpu_index=0,
        index=index,
        batch=batch,
        mps_percent=mps,
        rate_rps=100.0,
        predicted_latency_ms=5.0,
        predicted_throughput_rps=100.0,
        model_dir="/m",
        max_queue_delay_ms=5.0,
    )


@pytest.mark.parametrize("small_batch, fits", [(14, False), (11, True)])
def test_real_latency_predicate_decides_whether_the_retiring_server_waits(small_batch: int, fits: bool) -> None:
    """On a T4 vgg19 (b5, 65 %) beside alexnet b14 (35 %) breaks alexnet's 10 ms budget at 100 %
    shares; b11 does not. m-small-0 retires while m-small-1 boots: s0 waits only where it must."""
    predicate = gpu_fits(load_policy(REPO / "policies" / "servegen-sim.yaml"))
    large, small = (
        t4("m-large-0", "m-large", "vgg19", 5, 65.0, 0),
        t4("m-small-0", "m-small", "alexnet", small_batch, 35.0, 1),
    )
    assert predicate("g4dn.xlarge", [large, small]) is fits
    assert predicate("g4dn.xlarge", [small]) and shares_fit("g4dn.xlarge", [large, small])
    layout = [
        slot("s0", large, itype="g4dn.xlarge"),
        slot("s1", t4("m-small-1", "m-small", "alexnet", small_batch, 35.0, 0), itype="g4dn.xlarge"),
    ]
    records = [rec("s0", itype="g4dn.xlarge"), rec("s1", State.PENDING, itype="g4dn.xlarge")]
    d = run(layout, records, {"s0": (small,)}, ready={"m-small-0"}, limits=Limits(gpu_fits=predicate))
    if fits:
        assert sorted(s.name for s in configures(d)["s0"].servers) == ["m-large-0", "m-small-0"]
        assert d.notes == ()
    else:
        assert kinds(d) == []  # s0 keeps m-small-0 alone until m-small-1 is ready
        assert any("make-before-break on s0 GPU 0: m-large-0 start once m-small-0 leave" in n for n in d.notes)


# --- shrinks never wait for shrinks; a deferred shrink keeps its neighbours ---------------------


def by_name(servers: Sequence[PlannedServer]) -> list[PlannedServer]:
    return sorted(servers, key=lambda s: s.name)


M0 = sized("m-0", 4, 30.0, 300.0)  # retiring on the surplus s2 while m is resized
P0 = sized("p-0", 4, 20.0, 100.0, "p")


def test_two_shrinks_of_one_workload_hand_over_without_dropping_it() -> None:
    """m-1 and m-5 (1000 req/s each) shrink to m-4 and m-6 (200 each), m-0 (300) on the surplus s2:
    m's layout plans 400 (a scale-in), so whatever m does not need may go at once: m-1 and m-0 leave
    (m keeps 1000 >= 400), m-4 starts in m-1's room, and m-6 takes over from m-5 once m-4 serves.
    Before, the two shrinks restarted their servers in place."""
    m5 = sized("m-5", 8, 60.0, 1000.0)
    m6 = sized("m-6", 4, 30.0, 200.0, replaces="m-5")
    layout = [slot("s0", SMALL, N0), slot("s1", m6, P0)]
    applied = {"s0": (BIG,), "s1": (m5,), "s2": (M0,)}
    d = run(layout, [rec("s0"), rec("s1"), rec("s2")], applied, ready={"m-0", "m-1", "m-5"})
    assert by_name(configures(d)["s0"].servers) == [SMALL, N0]
    assert by_name(configures(d)["s1"].servers) == [m5, P0]  # m-5 carries m until m-4 serves
    assert ("Terminate", "s2") in kinds(d) and d.step is not None and d.step.after["m"] >= 400.0
    pf = fleet(layout, applied)
    pf.run()
    assert done(pf)
    never_below(pf)


def test_a_shrink_waits_for_the_genuinely_new_server_it_counts_on() -> None:
    """m-1 shrinks to m-4 while m-3 (800) boots: m's layout counts on m-3, so m-1 keeps serving
    until m-3 does; m-0 on the surplus s2 may go (m keeps 1000 without it)."""
    layout = [slot("s0", SMALL, N0), slot("s1", sized("m-3", 4, 50.0, 800.0))]
    d = run(layout, [rec("s0"), rec("s1", State.PENDING), rec("s2")], {"s0": (BIG,), "s2": (M0,)}, ready={"m-0", "m-1"})
    assert by_name(configures(d)["s0"].servers) == [BIG, N0]
    assert any("make-before-break on s0 GPU 0: m-4 start once m-1 leave" in n for n in d.notes)


def test_a_shrink_never_pushes_another_workloads_server_off() -> None:
    """b-0's replacement cannot launch (max_cost_per_hour), so b-0 stays for good; m-1 hands over to
    the smaller m-4 once m-2 serves, and c-0 then fits. Before, m-1 was shrunk in place at once."""
    big, small = sized("m-1", 8, 70.0, 1000.0), sized("m-4", 4, 30.0, 200.0, replaces="m-1")
    b0, c0 = share("b-0", "b", 0, 30.0), share("c-0", "c", 2, 30.0)
    layout = [slot("s0", small, c0), slot("s1", sized("m-2", 4, 50.0, 800.0)), slot("s2", share("b-1", "b", 0, 30.0))]
    limits = Limits(max_cost_per_hour=6.0)
    d = run(layout, [rec("s0"), rec("s1", State.PENDING)], {"s0": (big, b0)}, ready={"m-1", "b-0"}, limits=limits)
    assert d.actions == () and not d.breaches  # b-1's launch is blocked; m-1 waits for m-2
    assert any("b-0 stays" in n and "cannot launch" in n for n in d.notes)
    pf = fleet(layout[:2], {"s0": (big, b0)}, limits=limits)
    pf.layout = Layout("x", tuple(layout))
    pf.records["s1"] = rec("s1", State.PENDING)
    pf.run()
    assert by_name(pf.applied["s0"]) == [b0, c0, small] and not any(d.breaches for d in pf.diffs)
    never_below(pf)


def test_no_server_is_dropped_for_a_move_whose_replacements_cannot_launch() -> None:
    """b-0 and c-0 would move to s1, which max_cost_per_hour keeps from launching; a-1 may not run
    beside c-0 (the predicate). Before, c-0 was removed for a-1 (c lost its only server for good);
    now a-1 waits and the notes say why."""
    layout = [
        slot("s0", share("a-1", "a", 0, 50.0)),
        slot("s1", share("b-1", "b", 0, 40.0), share("c-1", "c", 1, 10.0)),
    ]
    applied = {"s0": (share("b-0", "b", 1, 40.0), share("c-0", "c", 2, 10.0))}
    limits = Limits(max_cost_per_hour=3.0, gpu_fits=rejects(("a-1", 50.0), ("c-0", 10.0)))
    d = run(layout, [rec("s0")], applied, ready={"b-0", "c-0"}, limits=limits)
    assert d.actions == () and not d.breaches
    assert any("move on s0 GPU 0 waits" in n and "cannot launch" in n for n in d.notes)


# --- Diff.settling ------------------------------------------------------------------------------


def test_settling_while_a_retiring_server_waits_for_a_new_one() -> None:
    """a-1 starts on s1 while s0 keeps a-0 for it: the next link is one tick away, so tick soon."""
    layout = [slot("s0", share("b-0", "b", 0, 30.0)), slot("s1", share("a-1", "a", 0, 30.0))]
    applied = {"s0": (share("b-0", "b", 0, 30.0), share("a-0", "a", 1, 30.0)), "s1": ()}
    d = run(layout, [rec("s0"), rec("s1")], applied, ready={"b-0", "a-0"})
    assert kinds(d) == [("Configure", "s1")] and d.settling


def test_not_settling_on_a_plain_first_assignment() -> None:
    """Nothing retires and nothing waits: the normal interval is enough."""
    d = run([slot("s0", share("a-0", "a", 0, 30.0))], [rec("s0")])
    assert kinds(d) == [("Configure", "s0")] and not d.settling


def test_shrink_does_not_wait_for_a_launch_the_budget_blocks() -> None:
    """m-2's slot cannot launch under max_cost_per_hour: m's layout counts on it, so m-1 keeps its
    size rather than shrinking m for good (before, it shrank at once), n-0 starts beside it, and
    the notes say why; with the budget, m-2 launches and m-1 waits for it."""
    layout = [slot("s0", SMALL, N0), slot("s1", sized("m-2", 4, 50.0, 800.0))]
    d = run(layout, [rec("s0")], {"s0": (BIG,)}, ready={"m-1"}, limits=Limits(max_cost_per_hour=3.0))
    assert kinds(d) == [("Configure", "s0")]
    assert by_name(configures(d)["s0"].servers) == [BIG, N0]
    assert any("blocked by max_cost_per_hour" in n for n in d.notes)
    assert any("m-1 stays" in n and "cannot launch" in n for n in d.notes)
    d = run(layout, [rec("s0")], {"s0": (BIG,)}, ready={"m-1"}, limits=Limits(max_cost_per_hour=6.0))
    assert kinds(d) == [("Launch", "s1"), ("Configure", "s0")]
    assert by_name(configures(d)["s0"].servers) == [BIG, N0]


def test_a_resize_on_a_full_gpu_hands_over_without_waiting_for_booting_capacity() -> None:
    """m-2 (45 %) is resized on its own GPU to the smaller m-1 (15 %) while m-3 boots elsewhere,
    and p-0 is new there. m-1 starts beside m-2 (m-1 alone carries m's floor), takes over once
    ready, and m-2's room goes to p-0. Before, the GPU waited for m-3, then removed m-2 first."""
    m2, n0 = share("m-2", "m", 0, 45.0), share("n-0", "n", 1, 40.0)
    m1 = replace(share("m-1", "m", 2, 15.0), replaces="m-2")
    layout = [slot("s0", m1, n0, share("p-0", "p", 3, 30.0)), slot("s1", share("m-3", "m", 0, 50.0))]
    calm = Limits(burst=False)  # no burst stand-in for m-3 in the room left (test_burst.py)
    d = run(layout, [rec("s0"), rec("s1", State.PENDING)], {"s0": (m2, n0)}, ready={"m-2", "n-0"}, limits=calm)
    assert [s.name for s in by_name(configures(d)["s0"].servers)] == ["m-1", "m-2", "n-0"]
    d = run(
        layout, [rec("s0"), rec("s1", State.PENDING)], {"s0": (m2, n0, m1)}, ready={"m-2", "n-0", "m-1"}, limits=calm
    )
    assert [s.name for s in by_name(configures(d)["s0"].servers)] == ["m-1", "n-0", "p-0"]
    assert not any("break-before-make" in n for n in d.notes)


def test_a_workload_growing_on_its_full_gpu_hands_over_at_once() -> None:
    """m-1 (60 %) replaces the smaller m-2 (45 %) while m-3 boots: m-1 starts beside it (145 %
    assigned, m-1 idle until ready) and takes over; there is no gap. Before: removed, then started."""
    m2, n0 = share("m-2", "m", 0, 45.0), share("n-0", "n", 1, 40.0)
    m1 = replace(share("m-1", "m", 2, 60.0), predicted_throughput_rps=300.0, replaces="m-2")
    layout = [slot("s0", m1, n0), slot("s1", share("m-3", "m", 0, 50.0))]
    calm = Limits(burst=False)  # no burst stand-in for m-3 in the room left (test_burst.py)
    d = run(layout, [rec("s0"), rec("s1", State.PENDING)], {"s0": (m2, n0)}, ready={"m-2", "n-0"}, limits=calm)
    assert [s.name for s in by_name(configures(d)["s0"].servers)] == ["m-1", "m-2", "n-0"]
    d = run(
        layout, [rec("s0"), rec("s1", State.PENDING)], {"s0": (m2, n0, m1)}, ready={"m-2", "n-0", "m-1"}, limits=calm
    )
    assert [s.name for s in by_name(configures(d)["s0"].servers)] == ["m-1", "n-0"]
    assert not any("break-before-make" in n for n in d.notes)
