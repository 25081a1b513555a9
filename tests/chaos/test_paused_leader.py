"""A paused DynamoDB leader sends no mutating request after its lease ran out, counted at moto's
server (forced trials: tests/chaos/paused_leader.py), for a launch and for a termination.
`make chaos` runs 20 or more of each (CHAOS_TRIALS); make test runs 2 of each, each trial a test of
its own. A trial with the send-time lease check taken off A's client must see A's late request
arrive: the probe bites."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chaos.paused_leader import OPERATIONS, trial
from tests.chaos.report import record, trials
from tests.kit.backends import Moto

pytestmark = [pytest.mark.e2e, pytest.mark.chaos]
TRIALS = trials(2)


@pytest.mark.parametrize("n", range(TRIALS))  # one test per trial: pytest-xdist spreads them
@pytest.mark.parametrize("operation", OPERATIONS)
def test_a_paused_leader_sends_nothing_after_its_lease_ran_out(
    moto: Moto, tmp_path: Path, operation: str, n: int
) -> None:
    o = trial(moto, tmp_path, operation)
    refused = o.a_error.startswith("lease lost")
    print(f"\npaused leader at {operation}, forced trial {n}: {o.late_calls} late calls, refused at send: {refused}")
    record(  # make chaos's summary adds the trials up per probe
        f"paused_leader_{operation}",
        trials=1,
        late_calls=o.late_calls,
        refused_at_send=int(refused),
        late_instances=o.late_new,
        duplicates=o.duplicates,
    )
    assert o.held_at_pause  # the delay sat after the tick's own fence check
    assert o.late_calls == 0, o
    assert o.a_error.startswith("lease lost: ec2 " + operation), o
    assert o.late_new == 0, o
    assert o.duplicates == 0, o
    assert o.instances > 0, o


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
