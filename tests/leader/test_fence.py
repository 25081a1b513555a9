"""The fenced Provider and Transport under a real controller tick, and Leadership's role changes."""

from __future__ import annotations

import json
import logging
import math
from dataclasses import replace
from pathlib import Path

import pytest

from autoscaler.leader.base import Fence, LeaseError, NotLeader, Term
from autoscaler.loop.service.fence import FencedProvider, FencedTransport
from autoscaler.loop.service.leadership import Leadership
from autoscaler.loop.service.wiring import build_controller, make_leadership
from tests.kit.control import Clock, make_controller, make_policy

pytestmark = pytest.mark.unit


class Monotonic:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


class ScriptedLease:
    """A Lease that answers from a script of Terms (or LeaseErrors), recording each attempt."""

    kind, owner, lease_s = "fake", "me", 10.0

    def __init__(self, *answers: Term | LeaseError) -> None:
        self.answers, self.attempts, self.released = list(answers), [], False

    def attempt(self, now: float) -> Term:
        self.attempts.append(now)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, LeaseError):
            raise answer
        return answer

    def release(self) -> None:
        self.released = True


def fenced_controller(tmp_path: Path, fence: Fence):  # type: ignore[no-untyped-def]
    policy = make_policy(tmp_path)
    ctl, provider, transport, _ = make_controller(policy, Clock())
    ctl.deps.provider = FencedProvider(provider, fence)
    ctl.deps.transport = FencedTransport(transport, fence)
    return ctl, provider, transport


def test_a_tick_without_the_lease_makes_no_mutating_call(tmp_path: Path) -> None:
    clock = Monotonic()
    fence = Fence(clock)
    ctl, provider, transport = fenced_controller(tmp_path, fence)
    report = ctl.tick()
    assert not report.ok and "not the leader" in (report.error or "")
    assert [c for c in provider.calls if c[0] != "list"] == [] and transport.applies == []
    assert report.outcome.errors == {"leader": 1}
    fence.grant(Term(leader=True, token=3, holder="me", valid_until=5.0))
    report = ctl.tick()
    launched = [c[0] for c in provider.calls].count("launch")
    assert report.ok and report.layout is not None and launched == len(report.layout.slots) == 3
    clock.t = 5.0  # the term ran out: the next tick's mutating calls are refused again
    ctl.deps.rates.source.set(alex=400.0)  # type: ignore[attr-defined]
    report = ctl.tick()
    assert not report.ok and [c[0] for c in provider.calls].count("launch") == launched


def test_every_call_that_passes_the_fence_is_logged_with_its_token(tmp_path: Path, monkeypatch) -> None:
    log = tmp_path / "calls.jsonl"
    monkeypatch.setenv("IGNITER_CALL_LOG", str(log))
    fence = Fence(Monotonic())
    fence.grant(Term(leader=True, token=4, holder="me", valid_until=math.inf))
    ctl, provider, _ = fenced_controller(tmp_path, fence)
    assert ctl.tick().ok
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(c["kind"], c["token"]) for c in lines] == [("launch", 4)] * 3
    assert [c["target"] for c in lines] == [c[1] for c in provider.calls if c[0] == "launch"]


def test_build_controller_fences_only_when_given_a_fence(tmp_path: Path) -> None:
    policy = make_policy(tmp_path, agents={"transport": "none"}, provider={"state_root": str(tmp_path / "i")})
    plain = build_controller(policy, tmp_path / "a.sqlite")
    assert not isinstance(plain.deps.provider, FencedProvider)
    plain.store.close()
    fenced = build_controller(policy, tmp_path / "b.sqlite", fence=Fence.always())
    assert isinstance(fenced.deps.provider, FencedProvider) and isinstance(fenced.deps.transport, FencedTransport)
    assert fenced.deps.provider.root == fenced.deps.provider.inner.root  # type: ignore[attr-defined]
    fenced.store.close()


def test_the_wiring_hook_fences_another_component_only_under_a_lease() -> None:
    from autoscaler.loop.service.wiring import fenced

    class Gateway:
        weights: dict[str, int] = {}

        def set_weight(self, server: str, weight: int) -> None:
            self.weights[server] = weight

    plain = Gateway()
    assert fenced(plain, None, ["set_weight"]) is plain
    fence = Fence(Monotonic())
    guarded = fenced(Gateway(), fence, ["set_weight"])
    with pytest.raises(NotLeader, match="set_weight refused"):
        guarded.set_weight("a-0", 3)
    assert Gateway.weights == {}


def test_leadership_follows_the_lease_and_reports_each_change(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    clock = Monotonic()
    lease = ScriptedLease(
        Term(leader=False, token=1, holder="other", note="other holds it"),
        Term(leader=True, token=2, holder="me", valid_until=10.0),
        LeaseError("DynamoDB unreachable"),
    )
    changes: list[bool] = []
    fence = Fence(clock)
    lead = Leadership(lease, fence, fleet="prod", poll_s=1, renew_s=3, clock=clock, on_change=changes.append)
    lead.attempt()
    assert changes == [False] and lead.snapshot()["role"] == "standby" and lead.snapshot()["holder"] == "other"
    clock.t = 1.0
    lead.attempt()
    assert changes == [False, True] and fence.check("launch") == 2
    clock.t = 4.0
    assert lead.attempt() is None and fence.held  # one failed renewal: the term still holds
    clock.t = 10.0
    lead.attempt()
    assert changes == [False, True, False] and not fence.held
    assert "unreachable" in lead.snapshot()["note"]
    assert "standby:" in caplog.text and "leader: me holds the lease of fleet prod (token 2)" in caplog.text
    lead.stop()
    assert lease.released and not fence.held


def test_a_renewal_granted_after_its_term_ran_out_is_reported_as_run_out(caplog: pytest.LogCaptureFixture) -> None:
    """A leader paused between a renewal's reply and its grant wakes with a term already over:
    the fence refuses, and the standby line and the status note say why, not "no lease"."""
    caplog.set_level(logging.INFO)
    clock = Monotonic()
    lease = ScriptedLease(
        Term(leader=True, token=1, holder="me", valid_until=5.0),
        Term(leader=True, token=1, holder="me", valid_until=8.0),  # renewed at 3, granted at 9.5
    )
    fence = Fence(clock)
    lead = Leadership(lease, fence, fleet="prod", poll_s=1, renew_s=3, clock=clock)
    lead.attempt()
    assert fence.held and fence.why == "" and lead.snapshot()["note"] == ""
    clock.t = 9.5
    lead.attempt()
    assert not fence.held and fence.why == "the term of token 1 ran out 1.5 s ago"
    with pytest.raises(NotLeader, match=r"launch refused: not the leader \(the term of token 1 ran out 1\.5 s ago\)"):
        fence.check("launch")
    assert lead.snapshot()["role"] == "standby" and "ran out" in lead.snapshot()["note"]
    assert "standby: me acts on nothing for fleet prod (the term of token 1 ran out 1.5 s ago)" in caplog.text


def test_strict_first_attempt_raises_a_permanent_error() -> None:
    err = LeaseError("no such table")
    err.permanent = True
    lead = Leadership(ScriptedLease(err), Fence(Monotonic()), fleet="prod", poll_s=1, renew_s=1)
    with pytest.raises(LeaseError):
        lead.attempt(strict=True)
    assert lead.attempt() is None  # later ones are logged, not raised


def test_standby_polls_within_a_third_of_a_tick(tmp_path: Path) -> None:
    policy = make_policy(
        tmp_path, scaling={"interval_s": 6}, leader={"kind": "dynamodb", "table": "leases", "lease_s": 30}
    )
    lead = make_leadership(policy, Fence(Monotonic()), lease=ScriptedLease(Term(leader=False, token=0, holder="")))
    assert lead.poll_s == 2.0 and lead.renew_s == 10.0


def _local_lock_policy(tmp_path: Path) -> Path:
    """A local fleet under a local lock, no agents: for Services run in this process."""
    from tests.kit.control import write_policy

    return write_policy(
        tmp_path / "policy.yaml",
        agents={"transport": "none"},
        provider={"kind": "local", "state_root": str(tmp_path / "i")},
        leader={"kind": "local", "lock_dir": str(tmp_path / "locks")},
    )


def test_a_standby_service_never_ticks_and_takes_over_with_fresh_timers(tmp_path: Path) -> None:
    """Two services of one fleet in one process (the local lock is per open file): the second
    stands by, ticks not at all, and when the first goes takes over with its timers reset."""
    from autoscaler.loop.service.scheduler import Service

    path = _local_lock_policy(tmp_path)
    first = Service(path, tmp_path / "a.sqlite", None)
    second = Service(path, tmp_path / "b.sqlite", None)
    try:
        assert first.fence.held and not second.fence.held and second.was_standby
        _, fake, _, _ = make_controller(second.policy, Clock())
        second.controller.deps.provider = FencedProvider(fake, second.fence)
        store = second.controller.store
        store.save_state(replace(store.load_state(), cheaper_since=123.0, agent_seen={("s", 0): 1.0}))
        second.tick_job()
        assert fake.calls == [] and second.state.leader["role"] == "standby"
        with second.controller.store._tx() as db:
            assert db.execute("SELECT COUNT(*) FROM ticks").fetchone()[0] == 0  # no tick was even begun
        first.close()
        second.leadership.attempt()
        assert second.fence.held and second.state.leader["role"] == "leader"
        state = store.load_state()
        assert state.cheaper_since is None and state.agent_seen == {}
    finally:
        second.close()


def test_the_warm_pool_calls_need_the_lease_and_listing_does_not() -> None:
    """A standby never launches, stops, starts or returns a warm-pool member; it may list them."""
    from autoscaler.fleet.base import pool_of
    from autoscaler.fleet.sim import SimProvider

    clock = Monotonic()
    sim = SimProvider("f", clock, {"g5": 1.0})
    fence = Fence(clock)
    fenced = FencedProvider(sim, fence)
    pool = pool_of(fenced)
    assert pool is fenced  # the fence's own methods, never the inner provider's unfenced ones
    for call in (
        lambda: fenced.pool_launch("pool-f-1", "g5"),
        lambda: fenced.pool_stop("sim-p00001"),
        lambda: fenced.start_pooled("sim-p00001", "s", "g5", 1),
        lambda: fenced.pool_return("sim-000001", "pool-f-2"),
    ):
        with pytest.raises(NotLeader):
            call()
    assert fenced.pool_members() == [] and sim.lifetimes == {}
    fence.grant(Term(leader=True, token=1, holder="me", valid_until=math.inf))
    member = fenced.pool_launch("pool-f-1", "g5")
    assert fenced.pool_launch("pool-f-1", "g5") == member  # one name, one member
    assert [m.id for m in fenced.pool_members()] == [member.id]


def test_a_term_that_ran_out_between_renewals_leaves_no_standby_status(tmp_path: Path) -> None:
    """Seen under load with a 2 s DynamoDB lease: the term ran out before a late renewal, a tick
    in between was skipped as a standby's (status: standby), and the renewal was no change of role
    to the lease thread, so /healthz said standby while the process led and ticked."""
    from autoscaler.loop.service.scheduler import Service

    path = _local_lock_policy(tmp_path)
    service = Service(path, tmp_path / "a.sqlite", None)
    _, fake, _, _ = make_controller(service.policy, Clock())
    service.controller.deps.provider = FencedProvider(fake, service.fence)  # no local instance started
    try:
        assert service.fence.held and service.leadership is not None
        token = service.fence.token
        assert token is not None
        service.fence.grant(Term(leader=True, token=token, holder="me", valid_until=0.0))  # ran out
        service.tick_job()
        assert service.state.leader["role"] == "standby"  # the tick acted on nothing
        service.leadership.attempt()  # the late renewal: the lease thread saw no change of role
        assert service.fence.held and service.leadership.changes == 1
        service.tick_job()
        assert service.state.leader["role"] == "leader"
        assert service.state.book.health.status != "standby"
    finally:
        service.close()
