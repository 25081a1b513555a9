"""The error tables of the provider and transport contracts, row by row, through the real tick.

Each test injects one kind of failure into the fakes (which implement the same contracts as EC2,
the local provider and SSH) and checks the three columns: what happens to the record, when the
call is tried again, and what the operator sees (tick report, /v1/fleet, metrics kind)."""

from __future__ import annotations

from pathlib import Path

import pytest
from botocore.exceptions import ClientError, NoCredentialsError

from autoscaler.core.fleet.lifecycle import State
from autoscaler.fleet.base import (
    PROVIDER_ERRORS,
    AuthError,
    CapacityError,
    NotFoundError,
    OnRecord,
    PermanentError,
    ProviderError,
    ProviderFault,
    ThrottledError,
)
from autoscaler.fleet.ec2 import classify
from autoscaler.loop.status.server import fleet_snapshot
from autoscaler.transport.base import TRANSPORT_ERRORS, TransportError, TransportFault
from tests.kit.control import Clock, make_controller, make_policy

pytestmark = pytest.mark.unit


ONE = [{"name": "alex", "model": "alexnet", "slo_ms": 15, "rate_rps": 50}]


def one_slot(tmp_path: Path, clock: Clock):  # type: ignore[no-untyped-def]
    return make_controller(make_policy(tmp_path, workloads=ONE), clock)


def launches(prov) -> list:  # type: ignore[no-untyped-def]
    return [c for c in prov.calls if c[0] == "launch"]


def test_every_fault_has_a_row() -> None:
    assert set(PROVIDER_ERRORS) == set(ProviderFault) and set(TRANSPORT_ERRORS) == set(TransportFault)
    assert TRANSPORT_ERRORS[TransportFault.AUTH].record is OnRecord.QUARANTINE
    errors: list[ProviderError] = [
        CapacityError("p3", "x"),
        ThrottledError("x"),
        NotFoundError("x"),
        AuthError("x"),
        PermanentError("x"),
    ]
    assert [e.kind for e in errors] == list(ProviderFault)
    assert [TransportError("x", k).retryable for k in TransportFault] == [True, True, False, False]


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        ("InsufficientInstanceCapacity", ProviderFault.CAPACITY),
        ("RequestLimitExceeded", ProviderFault.THROTTLED),
        ("InvalidLaunchTemplateName.NotFoundException", ProviderFault.NOT_FOUND),
        ("UnauthorizedOperation", ProviderFault.AUTH),
        ("AuthFailure", ProviderFault.AUTH),
        ("InvalidParameterValue", ProviderFault.PERMANENT),
    ],
)
def test_ec2_codes_map_to_their_row(code: str, kind: ProviderFault) -> None:
    exc = ClientError({"Error": {"Code": code, "Message": "m"}}, "RunInstances")
    assert classify(exc, "p3.2xlarge").kind is kind


def test_missing_credentials_are_an_auth_error() -> None:
    assert classify(NoCredentialsError()).kind is ProviderFault.AUTH


def test_capacity_closes_the_attempt_and_replans_at_once(tmp_path: Path) -> None:
    ctl, prov, _, _ = one_slot(tmp_path, Clock())
    prov.no_capacity.add("p3.2xlarge")
    report = ctl.tick()
    assert report.rounds == 2 and report.outcome.errors == {"capacity": 1}
    assert [r.state for r in ctl.store.all_records() if r.instance_type == "p3.2xlarge"] == [State.TERMINATED]
    assert "p3.2xlarge" in fleet_snapshot(ctl)["unavailable"]


def test_throttled_keeps_the_intent_and_backs_off(tmp_path: Path) -> None:
    clock = Clock()
    ctl, prov, _, _ = one_slot(tmp_path, clock)
    prov.fail_next.append(ThrottledError("RequestLimitExceeded"))
    report = ctl.tick()
    assert report.outcome.errors == {"provider": 1}
    assert [r.state for r in ctl.store.open_records()] == [State.REQUESTED]  # intent kept
    assert report.backoff_until == clock() + 15.0 and fleet_snapshot(ctl)["backoff"]["failures"] == 1
    clock.advance(10)  # an early tick inside the backoff: the provider is left alone
    waiting = ctl.tick()
    assert len(launches(prov)) == 1 and any("provider backing off" in n for n in waiting.notes)
    prov.fail_next.append(ThrottledError("RequestLimitExceeded"))
    clock.advance(10)
    ctl.tick()  # tried again after 15 s, throttled again: the wait doubles
    assert len(launches(prov)) == 2 and ctl.current_state().backoff.until == clock() + 30.0
    clock.advance(30)
    ctl.tick()
    assert len(launches(prov)) == 3 and ctl.current_state().backoff.failures == 0  # success clears it
    assert [(r.attempt, r.state) for r in ctl.store.open_records()] == [(0, State.PENDING)]  # same attempt


def test_throttled_listing_backs_off_mutations_too(tmp_path: Path) -> None:
    clock = Clock()
    ctl, prov, _, _ = one_slot(tmp_path, clock)

    def outage() -> list:  # type: ignore[type-arg]
        raise ThrottledError("RequestLimitExceeded")

    real, prov.list_instances = prov.list_instances, outage  # type: ignore[method-assign]
    assert not ctl.tick().ok and ctl.current_state().backoff.failures == 1
    prov.list_instances = real  # type: ignore[method-assign]
    clock.advance(5)
    ctl.tick()
    assert launches(prov) == []


def test_not_found_closes_the_attempt_and_a_new_one_follows(tmp_path: Path) -> None:
    clock = Clock()
    ctl, prov, _, _ = one_slot(tmp_path, clock)
    prov.fail_next.append(NotFoundError("InvalidLaunchTemplateName.NotFoundException: lt"))
    report = ctl.tick()
    assert report.outcome.errors == {"provider": 1} and report.backoff_until is None
    assert [r.state for r in ctl.store.open_records()] == [State.FAILED]
    clock.advance(30)
    ctl.tick()
    assert [c[3] for c in launches(prov)] == ["0", "1"]  # next tick, a new attempt


def test_auth_keeps_the_intent_counts_as_auth_and_backs_off(tmp_path: Path) -> None:
    clock = Clock()
    ctl, prov, _, _ = one_slot(tmp_path, clock)
    prov.fail_next.append(AuthError("UnauthorizedOperation: not allowed"))
    report = ctl.tick()
    assert report.outcome.errors == {"auth": 1} and report.backoff_until is not None
    assert [r.state for r in ctl.store.open_records()] == [State.REQUESTED]
    clock.advance(5)
    ctl.tick()
    assert len(launches(prov)) == 1


def test_permanent_closes_the_attempt_without_backoff(tmp_path: Path) -> None:
    clock = Clock()
    ctl, prov, _, _ = one_slot(tmp_path, clock)
    prov.fail_next.append(PermanentError("no launch template for p3.2xlarge"))
    report = ctl.tick()
    assert report.outcome.errors == {"provider": 1} and report.backoff_until is None
    assert [r.state for r in ctl.store.open_records()] == [State.FAILED]


def ready_slot(tmp_path: Path, clock: Clock):  # type: ignore[no-untyped-def]
    ctl, prov, tr, rates = one_slot(tmp_path, clock)
    for _ in range(3):
        ctl.tick()
        clock.advance(30)
    [rec] = [r for r in ctl.store.open_records() if r.state is State.READY]
    return ctl, prov, tr, rates, rec


def test_unreachable_agent_is_asked_again_next_tick(tmp_path: Path) -> None:
    clock = Clock()
    ctl, _, tr, _, rec = ready_slot(tmp_path, clock)
    tr.errors[rec.instance_id] = TransportError("timed out")
    ctl.tick()
    clock.advance(30)
    tr.calls.clear()
    ctl.tick()
    assert ("status", rec.instance_id) in tr.calls and ctl.current_state().quarantined == {}


def test_host_key_mismatch_quarantines_the_node_and_never_retries(tmp_path: Path) -> None:
    clock = Clock()
    ctl, prov, tr, _, rec = ready_slot(tmp_path, clock)
    iid = rec.instance_id or ""
    tr.errors[iid] = TransportError(f"{iid}: host key mismatch", TransportFault.AUTH)
    report = ctl.tick()
    assert report.quarantined == {iid: f"{iid}: host key mismatch"}
    assert report.summary()["quarantined"] == report.quarantined
    shown = fleet_snapshot(ctl)["quarantined"][iid]
    assert shown["slot"] == rec.slot and "mismatch" in shown["reason"]
    for _ in range(5):
        clock.advance(30)
        tr.calls.clear()
        ctl.tick()
        assert not [c for c in tr.calls if c[1] == iid]  # never contacted again
    for _ in range(30):  # its agent stays silent: replaced after provider.ready_timeout_s
        clock.advance(30)
        ctl.tick()
    assert ("terminate", iid) in prov.calls
    assert iid not in ctl.current_state().quarantined  # forgotten once the provider no longer lists it


def test_apply_refused_by_ssh_auth_quarantines_the_node(tmp_path: Path) -> None:
    clock = Clock()
    ctl, _, tr, _ = one_slot(tmp_path, clock)
    ctl.tick()
    clock.advance(30)
    [rec] = ctl.store.open_records()
    tr.errors[rec.instance_id] = TransportError("Authentication failed.", TransportFault.AUTH)
    ctl.tick()  # the status call fails first: quarantined before any apply
    assert rec.instance_id in ctl.current_state().quarantined
    assert not [c for c in tr.calls if c == ("apply", rec.instance_id)]


def test_rejected_assignment_is_not_resent_until_it_changes(tmp_path: Path) -> None:
    clock = Clock()
    ctl, _, tr, _ = one_slot(tmp_path, clock)
    tr.reject = True
    for _ in range(3):
        ctl.tick()
        clock.advance(30)
    applies = [c for c in tr.calls if c[0] == "apply"]
    assert len(applies) == 1  # sent once, rejected, not sent again
    report = ctl.tick()
    assert any("rejected this assignment" in n for n in report.notes)
    slower = [{**ONE[0], "slo_ms": 20}]  # a new SLO: a new queue delay, so a new assignment
    ctl.set_policy(make_policy(tmp_path, workloads=slower))
    tr.reject = False
    clock.advance(30)
    ctl.tick()
    assert len([c for c in tr.calls if c[0] == "apply"]) == 2
    assert tr.applies[-1][1]["servers"][0]["max_queue_delay_ms"] == 10.0
    assert ctl.current_state().rejected == {}
