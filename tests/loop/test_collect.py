"""loop/tick/collect.py: the cyclic collector waits for a tick's end, and is back on after it; in a
process that is the controller's own, the ticks' survivors are frozen and the whole heap collected
now and then, at a bounded share of the CPU."""

from __future__ import annotations

import gc
import sys
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from autoscaler.cli import main
from autoscaler.loop.tick import collect
from autoscaler.loop.tick.collect import AMORTISE, FIRST_AFTER, Book, held_off, settle
from tests.kit.control import make_controller, make_policy, stub_planner, write_policy

pytestmark = pytest.mark.unit


def test_held_off_for_the_block_and_back_on_after_even_when_it_raises() -> None:
    assert gc.isenabled()
    with held_off():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), held_off():
        raise RuntimeError("a tick's bug")
    assert gc.isenabled()


def test_a_collector_the_process_turned_off_stays_off() -> None:
    gc.disable()
    try:
        with held_off():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_tick_runs_without_the_collector_and_collects_its_young_objects_once(tmp_path: Path) -> None:
    seen: list[bool] = []
    collections: list[int] = []

    def planner(*args: Any) -> Any:
        seen.append(gc.isenabled())
        return stub_planner(*args)

    def counted(phase: str, info: dict[str, int]) -> None:
        if phase == "stop":
            collections.append(info["generation"])

    ctl, _, _, _ = make_controller(make_policy(tmp_path), planner=planner)
    gc.callbacks.append(counted)
    try:
        report = ctl.tick()
    finally:
        gc.callbacks.remove(counted)
    assert report.ok and seen and not any(seen) and gc.isenabled()
    assert collections == [0]


class Cycle:
    def __init__(self) -> None:
        self.me = self


class Clock:
    """The CPU clock a Book reads, moved by hand."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def thawed() -> Iterator[None]:
    """What a test froze is back in the generations after it (the suite's heap is not the
    controller's own)."""
    try:
        yield
    finally:
        gc.unfreeze()


def collections_during(fn: Any) -> list[int]:
    seen: list[int] = []

    def counted(phase: str, info: dict[str, int]) -> None:
        if phase == "stop":
            seen.append(info["generation"])

    gc.callbacks.append(counted)
    try:
        fn()
    finally:
        gc.callbacks.remove(counted)
    return seen


@pytest.mark.usefixtures("thawed")
def test_an_own_heap_freezes_what_a_tick_leaves_and_collects_nothing_at_first() -> None:
    book = Book(freezing=True, clock=Clock())
    made: list[weakref.ref[Cycle]] = []

    def tick() -> None:
        with held_off(book):
            made.append(weakref.ref(Cycle()))

    assert collections_during(tick) == []
    assert gc.get_count()[0] < 50 and gc.get_freeze_count() > 0  # the survivors went to the permanent generation
    gc.collect()
    assert made[0]() is not None  # frozen: no collection reaches the cycle until a full one is due


@pytest.mark.usefixtures("thawed")
def test_a_tick_that_leaves_many_survivors_is_not_scanned_young_before_they_are_frozen() -> None:
    """A real tick leaves far more survivors than the young generation's threshold (gc.get_threshold):
    were the collector's next allocation to come before they are frozen, it would collect them
    young, the very scan that freezing saves."""
    book = Book(freezing=True, clock=Clock())
    kept: list[list[Cycle]] = []

    def tick() -> None:
        with held_off(book):
            kept.append([Cycle() for _ in range(10 * gc.get_threshold()[0])])
        kept.append([Cycle()])  # the caller's next allocation

    assert collections_during(tick) == []
    assert gc.get_count()[0] < 50


@pytest.mark.usefixtures("thawed")
def test_the_whole_heap_is_collected_after_the_first_ticks_then_at_a_bounded_share_of_the_cpu() -> None:
    clock = Clock()
    book = Book(freezing=True, clock=clock)
    made: list[weakref.ref[Cycle]] = []

    def tick() -> None:  # a cycle made with the collector off, as in a tick, then settled
        with held_off(book):
            made.append(weakref.ref(Cycle()))
        clock.t += 1.0

    for _ in range(FIRST_AFTER):
        assert collections_during(tick) == []
    assert all(m() is not None for m in made)
    assert collections_during(lambda: settle(book)) == [2]  # the whole heap, once
    assert not any(m() for m in made) and book.ticks == 0 and book.full_at == clock.t
    book.full_cost = 0.5  # as if that one had taken half a second of CPU
    clock.t += AMORTISE * 0.5 - 1.0
    assert collections_during(tick) == [] and made[-1]() is not None  # less CPU since than AMORTISE x its cost
    assert collections_during(tick) == [2] and made[-1]() is None


def test_a_plain_book_collects_the_young_generation_and_freezes_nothing() -> None:
    book = Book()
    frozen = gc.get_freeze_count()
    assert collections_during(lambda: settle(book)) == [0]
    assert gc.get_freeze_count() == frozen and book.ticks == 0


def test_a_collector_turned_off_freezes_nothing() -> None:
    book = Book(freezing=True)
    frozen = gc.get_freeze_count()
    gc.disable()
    try:
        with held_off(book):
            pass
        assert book.ticks == 0 and gc.get_freeze_count() == frozen
    finally:
        gc.enable()


def test_only_the_command_line_of_the_process_marks_its_heap_as_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    policy = write_policy(tmp_path / "policy.yaml")
    monkeypatch.setattr(collect, "_BOOK", Book())
    assert main(["validate", str(policy)]) == 0  # a caller's argv: a test's, a notebook's
    assert not collect._BOOK.freezing
    monkeypatch.setattr(sys, "argv", ["igniter", "validate", str(policy)])
    assert main() == 0  # the `igniter` script, `python -m autoscaler`
    assert collect._BOOK.freezing
