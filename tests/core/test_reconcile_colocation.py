"""reconcile.diff with a GPU-fit predicate (Limits.gpu_fits) and in-place shrinks held back
(_defer_shrinks) while the rest of their workload boots."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest

from autoscaler.config.policy import load_policy
from autoscaler.core.colocation import gpu_fits
from autoscaler.core.layout import PlannedServer, SlotSpec
from autoscaler.core.lifecycle import State
from autoscaler.core.reconcile import Configure, GpuFits, Limits, shares_fit
from tests.core.test_reconcile import kinds, rec, run, share, slot
from tests.kit.control import REPO


def rejects(*servers: tuple[str, float]) -> GpuFits:
    """Shares within 100 %, but never all of `servers` (name, share) on one GPU (a stand-in latency test)."""

    def fits(instance_type: str, on_gpu: Sequence[PlannedServer]) -> bool:
        return shares_fit(instance_type, on_gpu) and not set(servers) <= {(s.name, s.mps_percent) for s in on_gpu}

    return fits


def configures(d) -> dict[str, Configure]:  # type: ignore[no-untyped-def]
    return {a.slot: a for a in d.actions if isinstance(a, Configure)}


def on_gpu(servers: Sequence[PlannedServer], gpu: int) -> list[tuple[str, float]]:
    return sorted((s.name, s.mps_percent) for s in servers if s.gpu_index == gpu)


# --- Limits.gpu_fits in _fit_gpus -------------------------------------------------------------


def two_gpus(name: str, *servers: PlannedServer) -> SlotSpec:
    return SlotSpec(name, "p3", 3.0, ("v100", "v100"), servers)


GROW = [
    two_gpus("s0", share("a-0", "a", 0, 65.0), replace(share("c-0", "c", 2, 50.0), gpu_index=1)),
    slot("s1", share("b-1", "b", 0, 35.0)),
]
GROW_APPLIED = {"s0": (share("a-0", "a", 0, 50.0), share("b-0", "b", 1, 35.0))}


def test_predicate_rejecting_a_full_gpu_defers_its_planned_change() -> None:
    """A GPU the predicate rejects at exactly 100 % shares keeps what it runs while b-1 boots."""
    records = [rec("s0"), rec("s1", State.PENDING)]
    d = run(
        GROW, records, GROW_APPLIED, ready={"a-0", "b-0"}, limits=Limits(gpu_fits=rejects(("a-0", 65.0), ("b-0", 35.0)))
    )
    conf = configures(d)["s0"]  # GPU 1 still gets c-0: deferral is per GPU
    assert on_gpu(conf.servers, 0) == [("a-0", 50.0), ("b-0", 35.0)]
    assert on_gpu(conf.servers, 1) == [("c-0", 50.0)]
    assert any("make-before-break on s0 GPU 0: planned changes deferred" in n and "b-0" in n for n in d.notes)


def test_default_shares_fit_keeps_retiring_server_next_to_the_planned_set() -> None:
    """Same input, model-free predicate: 65 % + 35 % fits, so a-0 grows and b-0 stays."""
    d = run(GROW, [rec("s0"), rec("s1", State.PENDING)], GROW_APPLIED, ready={"a-0", "b-0"})
    conf = configures(d)["s0"]
    assert on_gpu(conf.servers, 0) == [("a-0", 65.0), ("b-0", 35.0)]
    assert not any("deferred" in n or "break-before-make" in n for n in d.notes)


def test_predicate_breaks_before_make_on_a_swap() -> None:
    """a and b swap GPUs: waiting would deadlock, so the rejected pairs are split, never assigned."""
    layout = [slot("s0", share("a-1", "a", 1, 50.0)), slot("s1", share("b-1", "b", 0, 50.0))]
    applied = {"s0": (share("b-0", "b", 0, 50.0),), "s1": (share("a-0", "a", 0, 50.0),)}
    fits = rejects(("a-1", 50.0), ("b-0", 50.0))
    d = run(layout, [rec("s0"), rec("s1")], applied, ready={"a-0", "b-0"}, limits=Limits(gpu_fits=fits))
    confs = configures(d)
    assert [s.name for s in confs["s0"].servers] == ["a-1"]
    assert sorted(s.name for s in confs["s1"].servers) == ["a-0", "b-1"]  # that pair is allowed
    assert all(fits("p3", c.servers) for c in confs.values())
    assert any("break-before-make on s0 GPU 0: b-0" in n for n in d.notes)
    shares_only = configures(run(layout, [rec("s0"), rec("s1")], applied, ready={"a-0", "b-0"}))
    assert sorted(s.name for s in shares_only["s0"].servers) == ["a-1", "b-0"]  # 100 %: kept


# --- _defer_shrinks ---------------------------------------------------------------------------


def sized(name: str, batch: int, mps: float, thr: float, workload: str = "m") -> PlannedServer:
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
    )


BIG, SMALL = sized("m-1", 8, 60.0, 1000.0), sized("m-1", 4, 30.0, 200.0)
N0 = sized("n-0", 4, 20.0, 100.0, "n")


def test_shrink_in_place_waits_for_the_rest_of_its_workload() -> None:
    """m-1 shrinks only once m-2 is ready: shrinking first would leave m short while m-2 boots."""
    layout = [slot("s0", SMALL, N0), slot("s1", sized("m-2", 4, 50.0, 800.0))]
    d = run(layout, [rec("s0"), rec("s1", State.PENDING)], {"s0": (BIG,)}, ready={"m-1"})
    assert kinds(d) == [("Configure", "s0")]
    assert sorted(d.actions[0].servers, key=lambda s: s.name) == [BIG, N0]  # type: ignore[union-attr]
    assert any("m-1 keeps its size until m-2 are ready" in n for n in d.notes)
    applied = {"s0": (BIG, N0), "s1": (layout[1].servers[0],)}
    d = run(layout, [rec("s0"), rec("s1")], applied, ready={"m-1", "m-2", "n-0"})
    assert kinds(d) == [("Configure", "s0")]
    assert sorted(d.actions[0].servers, key=lambda s: s.name) == [SMALL, N0]  # type: ignore[union-attr]
    assert not any("keeps its size" in n for n in d.notes)


def test_grow_in_place_is_never_deferred() -> None:
    """More predicted throughput adds capacity: no reason to hold the old size."""
    layout = [slot("s0", BIG), slot("s1", sized("m-2", 4, 50.0, 800.0))]
    d = run(layout, [rec("s0"), rec("s1", State.PENDING)], {"s0": (SMALL,)}, ready={"m-1"})
    assert [a.servers for a in d.actions] == [(BIG,)]  # type: ignore[union-attr]
    assert d.notes == ()


def test_shrink_goes_ahead_when_the_old_size_would_not_fit() -> None:
    """The shrink frees room n-0 needs (60 % + 70 % > 100 %): holding the old size is not allowed."""
    n0 = sized("n-0", 4, 70.0, 300.0, "n")
    layout = [slot("s0", SMALL, n0), slot("s1", sized("m-2", 4, 50.0, 800.0))]
    d = run(layout, [rec("s0"), rec("s1", State.PENDING)], {"s0": (BIG,)}, ready={"m-1"})
    assert sorted(d.actions[0].servers, key=lambda s: s.name) == [SMALL, n0]  # type: ignore[union-attr]
    assert not any("keeps its size" in n for n in d.notes)


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
        assert any("make-before-break on s0 GPU 0: planned changes deferred" in n for n in d.notes)


# --- shrinks never wait for shrinks; a deferred shrink keeps its neighbours ---------------------


def by_name(servers: Sequence[PlannedServer]) -> list[PlannedServer]:
    return sorted(servers, key=lambda s: s.name)


M0 = sized("m-0", 4, 30.0, 300.0)  # retiring on the surplus s2 while m is resized
P0 = sized("p-0", 4, 20.0, 100.0, "p")


def test_two_shrinks_of_one_workload_do_not_wait_on_each_other() -> None:
    """Only servers that add capacity are waited for: two shrinks holding each other back never apply."""
    m1, m2 = sized("m-1", 4, 30.0, 200.0), sized("m-2", 4, 30.0, 200.0)
    applied = {"s0": (BIG,), "s1": (sized("m-2", 8, 60.0, 1000.0),), "s2": (M0,)}
    d = run(
        [slot("s0", m1, N0), slot("s1", m2, P0)],
        [rec("s0"), rec("s1"), rec("s2")],
        applied,
        ready={"m-0", "m-1", "m-2"},
    )
    assert kinds(d) == [("Configure", "s0"), ("Configure", "s1")]  # s2 keeps m-0 meanwhile
    assert by_name(configures(d)["s0"].servers) == [m1, N0] and by_name(configures(d)["s1"].servers) == [m2, P0]
    assert not any("keeps its size" in n for n in d.notes)
    layout = [slot("s0", m1, N0), slot("s1", sized("m-3", 4, 50.0, 800.0))]  # a genuinely new server
    d = run(layout, [rec("s0"), rec("s1", State.PENDING), rec("s2")], {"s0": (BIG,), "s2": (M0,)}, ready={"m-0", "m-1"})
    assert by_name(configures(d)["s0"].servers) == [BIG, N0]
    assert any("m-1 keeps its size until m-3 are ready" in n for n in d.notes)


def test_deferred_shrink_never_pushes_another_workloads_server_off() -> None:
    """Holding m-1 at 70 % would leave no room for b-0, whose replacement cannot launch: shrink instead."""
    big, small = sized("m-1", 8, 70.0, 1000.0), sized("m-1", 4, 30.0, 200.0)
    b0, c0 = share("b-0", "b", 0, 30.0), share("c-0", "c", 2, 30.0)
    layout = [slot("s0", small, c0), slot("s1", sized("m-2", 4, 50.0, 800.0)), slot("s2", share("b-1", "b", 0, 30.0))]
    d = run(
        layout,
        [rec("s0"), rec("s1", State.PENDING)],
        {"s0": (big, b0)},
        ready={"m-1", "b-0"},
        limits=Limits(max_cost_per_hour=6.0),
    )
    assert kinds(d) == [("Configure", "s0")]  # b-1's launch is blocked
    assert by_name(configures(d)["s0"].servers) == [b0, c0, small]
    assert not any("break-before-make" in n and "b-0" in n for n in d.notes)
    assert not any("keeps its size" in n for n in d.notes)


def test_break_before_make_drops_only_the_conflicting_retiring_server() -> None:
    """Only c-0 conflicts with a-1 under the predicate: dropping the larger b-0 too loses b for nothing."""
    layout = [
        slot("s0", share("a-1", "a", 0, 50.0)),
        slot("s1", share("b-1", "b", 0, 40.0), share("c-1", "c", 1, 10.0)),
    ]
    applied = {"s0": (share("b-0", "b", 1, 40.0), share("c-0", "c", 2, 10.0))}
    limits = Limits(max_cost_per_hour=3.0, gpu_fits=rejects(("a-1", 50.0), ("c-0", 10.0)))
    d = run(layout, [rec("s0")], applied, ready={"b-0", "c-0"}, limits=limits)
    assert [s.name for s in by_name(configures(d)["s0"].servers)] == ["a-1", "b-0"]
    assert any("break-before-make on s0 GPU 0: c-0 removed" in n for n in d.notes)


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
    """m-2's slot cannot launch under max_cost_per_hour: m-1 shrinks now instead of waiting (and
    saying it waits) for a server that never comes; with the budget, it waits as before."""
    layout = [slot("s0", SMALL, N0), slot("s1", sized("m-2", 4, 50.0, 800.0))]
    d = run(layout, [rec("s0")], {"s0": (BIG,)}, ready={"m-1"}, limits=Limits(max_cost_per_hour=3.0))
    assert kinds(d) == [("Configure", "s0")]
    assert by_name(configures(d)["s0"].servers) == [SMALL, N0]
    assert not any("keeps its size" in n for n in d.notes)
    assert any("blocked by max_cost_per_hour" in n for n in d.notes)
    d = run(layout, [rec("s0")], {"s0": (BIG,)}, ready={"m-1"}, limits=Limits(max_cost_per_hour=6.0))
    assert kinds(d) == [("Launch", "s1"), ("Configure", "s0")]
    assert by_name(configures(d)["s0"].servers) == [BIG, N0]


def test_resize_on_a_full_gpu_waits_for_the_workloads_booting_capacity() -> None:
    """m-2 (45 %) is replaced on its own GPU by the smaller m-1 while m-3 boots elsewhere, and the GPU
    cannot hold m-2 beside what is planned. Swapping now would drop m-2's capacity for nothing:
    the GPU keeps what it runs until m-3 is ready, then swaps (m-1 can only start once m-2 is gone)."""
    m2, n0 = share("m-2", "m", 0, 45.0), share("n-0", "n", 1, 40.0)
    layout = [
        slot("s0", share("m-1", "m", 2, 15.0), n0, share("p-0", "p", 3, 30.0)),
        slot("s1", share("m-3", "m", 0, 50.0)),
    ]
    d = run(layout, [rec("s0"), rec("s1", State.PENDING)], {"s0": (m2, n0)}, ready={"m-2", "n-0"})
    assert kinds(d) == []
    assert any("make-before-break on s0 GPU 0: planned changes deferred" in n and "m-2" in n for n in d.notes)
    applied = {"s0": (m2, n0), "s1": layout[1].servers}
    d = run(layout, [rec("s0"), rec("s1")], applied, ready={"m-2", "n-0", "m-3"})
    assert [s.name for s in by_name(configures(d)["s0"].servers)] == ["m-1", "n-0", "p-0"]
    assert any("break-before-make on s0 GPU 0: m-2 removed" in n for n in d.notes)


def test_a_resize_never_waits_on_capacity_that_itself_waits() -> None:
    """The same resize, but m-3's GPU on ready s1 holds a retiring server of its own: not capacity
    that comes up by itself, so s0 swaps at once rather than chaining waits."""
    m2, n0 = share("m-2", "m", 0, 45.0), share("n-0", "n", 1, 40.0)
    layout = [
        slot("s0", share("m-1", "m", 2, 15.0), n0, share("p-0", "p", 3, 30.0)),
        slot("s1", share("m-3", "m", 0, 60.0)),
    ]
    applied = {"s0": (m2, n0), "s1": (share("q-0", "q", 0, 50.0),)}
    d = run(
        layout + [slot("s2", share("q-1", "q", 0, 50.0))],
        [rec("s0"), rec("s1"), rec("s2", State.PENDING)],
        applied,
        ready={"m-2", "n-0", "q-0"},
    )
    assert [s.name for s in by_name(configures(d)["s0"].servers)] == ["m-1", "n-0", "p-0"]
    assert any("break-before-make on s0 GPU 0: m-2 removed" in n for n in d.notes)


def test_a_workload_growing_on_its_full_gpu_swaps_at_once() -> None:
    """Mirror of the shrink above: m-1 (60 %) replaces the smaller m-2 (45 %) while m-3 boots.
    Waiting would keep the smaller server for a whole boot; the swap gives more capacity sooner."""
    m2, n0 = share("m-2", "m", 0, 45.0), share("n-0", "n", 1, 40.0)
    m1 = replace(share("m-1", "m", 2, 60.0), predicted_throughput_rps=300.0)
    layout = [slot("s0", m1, n0), slot("s1", share("m-3", "m", 0, 50.0))]
    d = run(layout, [rec("s0"), rec("s1", State.PENDING)], {"s0": (m2, n0)}, ready={"m-2", "n-0"})
    assert [s.name for s in by_name(configures(d)["s0"].servers)] == ["m-1", "n-0"]
    assert any("break-before-make on s0 GPU 0: m-2 removed" in n for n in d.notes)
