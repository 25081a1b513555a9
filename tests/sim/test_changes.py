"""sim/changes.Moves: spares (instances a re-plan no longer wanted, kept as surge instances for
stand-ins) are billed as surge for the time they are held, not before and not after."""

from __future__ import annotations

import pytest

from autoscaler.fleet.sim import Lifetime
from autoscaler.loop.tick.records import TickReport
from autoscaler.sim.changes import Moves

pytestmark = pytest.mark.unit


def test_a_spare_is_billed_as_surge_while_held() -> None:
    moves = Moves(["a"], 10)
    spare = Lifetime(instance_type="p3", price_per_hour=3.0, start=0.0, end=900.0, slot="f-p3-7")
    planned = Lifetime(instance_type="p3", price_per_hour=3.0, start=0.0, slot="f-p3-1")
    surge = Lifetime(instance_type="p3", price_per_hour=3.0, start=0.0, slot="f-p3-surge0")
    lives = [spare, planned, surge]
    moves.bill(0.0, 300.0, lives)  # not held yet
    moves.end(TickReport(tick=1, now=300.0, surge_slots=["f-p3-7", "f-p3-surge0"]))
    moves.bill(300.0, 600.0, lives)
    moves.bill(600.0, 1200.0, lives)  # it ends at 900
    moves.end(TickReport(tick=2, now=1200.0, surge_slots=[]))
    moves.bill(1200.0, 1500.0, lives)
    assert abs(moves.spare_hours - 600.0 / 3600.0) < 1e-9  # 300-900; the surge slot is billed by name
    assert abs(moves.spare_cost_usd - 3.0 * 600.0 / 3600.0) < 1e-9
