"""The simulated provider keeps the Provider contract and bills every instance's lifetime."""

from __future__ import annotations

import pytest

from autoscaler.fleet.base import PermanentError
from autoscaler.fleet.sim import SimProvider

pytestmark = pytest.mark.unit


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def make() -> tuple[SimProvider, Clock]:
    clock = Clock()
    return SimProvider("f", clock, {"small": 1.0, "big": 4.0}, boot_s=180.0), clock


def test_instances_turn_running_boot_s_after_launch():
    p, clock = make()
    inst = p.launch("s0", "small", 1)
    assert inst.state == "pending" and p.next_boot() == 180.0
    clock.t = 179.0
    assert p.list_instances()[0].state == "pending"
    clock.t = 180.0
    assert p.list_instances()[0].state == "running" and p.next_boot() is None


def test_launch_is_idempotent_per_slot_and_attempt():
    p, _ = make()
    a = p.launch("s0", "small", 1)
    assert p.launch("s0", "small", 1, attempt=0) == a
    assert p.launch("s0", "small", 1, attempt=1).id != a.id
    assert p.launches == 2
    with pytest.raises(PermanentError):
        p.launch("s1", "huge", 1)


def test_terminate_is_idempotent_and_bills_the_lifetime():
    p, clock = make()
    a = p.launch("s0", "small", 1)
    p.launch("s1", "big", 1)
    clock.t = 1800.0
    p.terminate(a.id)
    p.terminate(a.id)
    p.terminate("i-unknown")
    assert p.terminations == 1 and [i.slot for i in p.list_instances()] == ["s1"]
    clock.t = 3600.0
    assert p.cost_per_hour() == 4.0
    assert p.instance_hours(3600.0) == {"small": 0.5, "big": 1.0}
    assert p.cost_usd(3600.0) == pytest.approx(4.5)


def test_boot_all_starts_a_warm_fleet():
    p, _ = make()
    p.launch("s0", "small", 1)
    p.boot_all()
    assert p.list_instances()[0].state == "running"
