"""A paused DynamoDB leader makes no launch that counts after its lease ran out (forced trials:
tests/chaos/paused_leader.py). `make chaos` runs 20 or more (CHAOS_TRIALS); make test runs 3."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chaos.paused_leader import trial
from tests.chaos.report import record, trials
from tests.kit.backends import Moto

pytestmark = [pytest.mark.e2e, pytest.mark.chaos]
TRIALS = trials(3)


def test_a_paused_leaders_late_launch_starts_nothing(moto: Moto, tmp_path: Path) -> None:
    outcomes = []
    for n in range(TRIALS):
        (tmp_path / str(n)).mkdir()
        outcomes.append(trial(moto, tmp_path / str(n)))
    print(f"\npaused leader, {TRIALS} forced trials: {outcomes}")
    record(
        "paused_leader",
        trials=TRIALS,
        late_calls=sum(o.late_calls for o in outcomes),
        late_instances=sum(o.late_new for o in outcomes),
        duplicates=sum(o.duplicates for o in outcomes),
    )
    assert all(o.late_calls >= 1 for o in outcomes)  # the hook did place the call after the term
    assert [o.late_new for o in outcomes] == [0] * TRIALS
    assert [o.duplicates for o in outcomes] == [0] * TRIALS
    assert all(o.instances > 0 for o in outcomes)
