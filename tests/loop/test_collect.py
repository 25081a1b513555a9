"""loop/tick/collect.py: the cyclic collector waits for a tick's end and is back on after it; the
tick's survivors are frozen, and the whole heap collected every so many ticks."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path
from typing import Any

import pytest

from autoscaler.loop.tick import collect
from autoscaler.loop.tick.collect import Frozen, held_off
from tests.kit.control import make_controller, make_policy, stub_planner

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


def test_a_tick_runs_without_the_collector_and_freezes_what_survives(tmp_path: Path) -> None:
    seen: list[bool] = []
    collections: list[int] = []

    def planner(*args: Any) -> Any:
        seen.append(gc.isenabled())
        return stub_planner(*args)

    def counted(phase: str, info: dict[str, int]) -> None:
        if phase == "stop":
            collections.append(info["generation"])

    ctl, _, _, _ = make_controller(make_policy(tmp_path), planner=planner)
    ctl.tick()  # the first tick may collect the heap (a fresh book, or the suite's growth)
    gc.callbacks.append(counted)
    try:
        report = ctl.tick()
    finally:
        gc.callbacks.remove(counted)
    assert report.ok and seen and not any(seen) and gc.isenabled()
    assert collections in ([], [2])  # none, or the full one when due; never the young generation alone
    assert gc.get_count()[0] < 50  # the tick's survivors went to the permanent generation


class Cycle:
    def __init__(self) -> None:
        self.me = self


def test_a_cycle_left_by_a_tick_stays_frozen_until_the_next_full_collection(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(collect, "EVERY", 3)
    book = Frozen()
    with held_off(book):
        pass  # the first settle collects the heap
    with held_off(book):
        cycles = [Cycle() for _ in range(10)]
        ref = weakref.ref(cycles[0])
        del cycles
    gc.collect()  # another's full collection does not reach frozen objects
    assert ref() is not None and book.since_full == 1
    with held_off(book):
        pass
    assert ref() is not None and book.since_full == 2
    with held_off(book):
        pass  # the third tick after the last full collection collects again
    assert ref() is None and book.since_full == 0


def test_a_full_collection_comes_every_so_many_ticks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(collect, "EVERY", 3)
    book = Frozen()
    done = [collect.settle(book) for _ in range(7)]
    assert done == [True, False, False, True, False, False, True]
