"""blocking.resolve: moves that wait for capacity on its way, and moves that would wait forever."""

from __future__ import annotations

import pytest

from autoscaler.core.layout.layout_types import PlannedServer
from autoscaler.core.rollout.blocking import Blockage, Progress, resolve

pytestmark = pytest.mark.unit


def srv(name: str, workload: str, mps: float = 50.0) -> PlannedServer:
    return PlannedServer(
        name=name,
        workload=workload,
        model="alexnet",
        gpu_index=0,
        index=0,
        batch=4,
        mps_percent=mps,
        rate_rps=100.0,
        predicted_latency_ms=5.0,
        predicted_throughput_rps=100.0,
        model_dir="/m",
        max_queue_delay_ms=5.0,
    )


def block(slot: str, waiting: list[PlannedServer], blockers: list[PlannedServer]) -> Blockage:
    return Blockage(key=(slot, 0), instance_type="p3", waiting=tuple(waiting), blockers=tuple(blockers))


def progress(
    pending: dict[str, set[str]], coming: frozenset[str] = frozenset(), never: frozenset[str] = frozenset()
) -> Progress:
    return Progress(
        pending={w: frozenset(v) for w, v in pending.items()}, coming=frozenset(coming), never=frozenset(never)
    )


def test_a_move_behind_a_server_whose_replacement_boots_waits() -> None:
    res = resolve(
        [block("s0", [srv("a-1", "a")], [srv("b-0", "b")])], progress({"a": {"a-1"}, "b": {"b-1"}}, frozenset({"b-1"}))
    )
    assert not res.picks and [b.key for b in res.waiting] == [("s0", 0)]


def test_a_chain_of_moves_that_ends_on_a_booting_instance_waits_link_by_link() -> None:
    """c moves onto s1 where b-0 waits for b-1 (booting); a moves onto s0 where c-0 waits for c-1."""
    blockages = [
        block("s0", [srv("a-1", "a")], [srv("c-0", "c")]),
        block("s1", [srv("c-1", "c")], [srv("b-0", "b")]),
    ]
    res = resolve(blockages, progress({"a": {"a-1"}, "b": {"b-1"}, "c": {"c-1"}}, frozenset({"b-1"})))
    assert not res.picks and len(res.waiting) == 2


def test_two_workloads_exchanging_gpus_get_one_pick() -> None:
    """a goes to b's GPU and b to a's: each waits for the other. One pick (a stand-in for one of the
    waiting servers) breaks the cycle; the other GPU then waits for it."""
    blockages = [
        block("s0", [srv("a-1", "a")], [srv("b-0", "b")]),
        block("s1", [srv("b-1", "b")], [srv("a-0", "a")]),
    ]
    res = resolve(blockages, progress({"a": {"a-1"}, "b": {"b-1"}}))
    assert len(res.picks) == 1 and len(res.waiting) == 1
    assert res.picks[0].needs == res.picks[0].blockage.waiting


def test_a_cycle_of_three_moves_gets_one_pick() -> None:
    blockages = [
        block("s0", [srv("a-1", "a")], [srv("c-0", "c")]),
        block("s1", [srv("b-1", "b")], [srv("a-0", "a")]),
        block("s2", [srv("c-1", "c")], [srv("b-0", "b")]),
    ]
    res = resolve(blockages, progress({"a": {"a-1"}, "b": {"b-1"}, "c": {"c-1"}}))
    assert len(res.picks) == 1 and len(res.waiting) == 2


def test_a_resize_on_its_own_full_gpu_is_picked() -> None:
    res = resolve([block("s0", [srv("a-1", "a", 30.0)], [srv("a-0", "a", 80.0)])], progress({"a": {"a-1"}}))
    assert [p.blockage.key for p in res.picks] == [("s0", 0)]


def test_a_server_whose_replacement_cannot_launch_is_never_worked_around() -> None:
    res = resolve(
        [block("s0", [srv("a-1", "a")], [srv("b-0", "b")])],
        progress({"a": {"a-1"}, "b": {"b-1"}}, never=frozenset({"b-1"})),
    )
    assert not res.picks and not res.waiting
    [(b, why)] = res.stuck
    assert b.key == ("s0", 0) and "cannot launch" in why and "b-1" in why


def test_a_server_its_workload_still_needs_with_nothing_planned_is_stuck() -> None:
    res = resolve([block("s0", [srv("a-1", "a")], [srv("b-0", "b")])], progress({"a": {"a-1"}}))
    [(_, why)] = res.stuck
    assert "still needs it" in why
