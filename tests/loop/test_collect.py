"""loop/tick/collect.py: the cyclic collector waits for a tick's end, and is back on after it."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pytest

from autoscaler.loop.tick.collect import held_off
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
