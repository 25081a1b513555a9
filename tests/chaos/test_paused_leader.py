"""A paused DynamoDB leader sends no mutating request after its lease ran out, counted at moto's
server (forced trials: tests/chaos/paused_leader.py), for a launch and for a termination.
`make chaos` runs 20 or more of each (CHAOS_TRIALS); make test runs 2 of each. A trial with the
send-time lease check taken off A's client must see A's late request arrive: the probe bites."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chaos.paused_leader import OPERATIONS, trial
from tests.chaos.report import record, trials
from tests.kit.backends import Moto

pytestmark = [pytest.mark.e2e, pytest.mark.chaos]
TRIALS = trials(2)


@pytest.mark.parametrize("operation", OPERATIONS)
def test_a_paused_leader_sends_nothing_after_its_lease_ran_out(moto: Moto, tmp_path: Path, operation: str) -> None:
    outcomes = []
    for n in range(TRIALS):
        (tmp_path / str(n)).mkdir()
        outcomes.append(trial(moto, tmp_path / str(n), operation))
    late = sum(o.late_calls for o in outcomes)
    refused = sum(o.a_error.startswith("lease lost") for o in outcomes)
    print(f"\npaused leader at {operation}: {TRIALS} forced trials, {late} late calls, {refused} refused at send")
    record(
        f"paused_leader_{operation}",
        trials=TRIALS,
        late_calls=late,
        refused_at_send=refused,
        late_instances=sum(o.late_new for o in outcomes),
        duplicates=sum(o.duplicates for o in outcomes),
    )
    assert all(o.held_at_pause for o in outcomes)  # the delay sat after the tick's own fence check
    assert [o.late_calls for o in outcomes] == [0] * TRIALS
    assert all(o.a_error.startswith("lease lost: ec2 " + operation) for o in outcomes), outcomes
    assert [o.late_new for o in outcomes] == [0] * TRIALS
    assert [o.duplicates for o in outcomes] == [0] * TRIALS
    assert all(o.instances > 0 for o in outcomes)


@pytest.mark.parametrize("operation", OPERATIONS)
def test_without_the_send_time_check_the_late_request_reaches_the_cloud(
    moto: Moto, tmp_path: Path, operation: str
) -> None:
    outcome = trial(moto, tmp_path, operation, unbound=True)
    print(f"\npaused leader at {operation}, send-time check removed: {outcome}")
    record(f"paused_leader_{operation}_unbound", trials=1, late_calls=outcome.late_calls)
    assert outcome.held_at_pause
    assert outcome.late_kinds == (operation,)  # exactly the held request, after the term ran out
    assert outcome.duplicates == 0  # a launch: the shared ClientToken still starts nothing new
