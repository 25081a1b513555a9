"""Event ticks (loop/service/ready_watch.py, Service.ready_job): what the watcher reports as come up since
the last tick, that it reports each thing once, that it asks nothing of a settled fleet, and that
the job ticks at most once per gap, never during a tick and never on a standby."""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from autoscaler.config.scaling import ReadyWatchConfig
from autoscaler.core.fleet.lifecycle import State
from autoscaler.fleet.fake import FakeProvider
from autoscaler.loop.service.ready_watch import RETRY_S, ReadyWatch, Seen
from autoscaler.loop.service.scheduler import Service
from autoscaler.transport.fake import FakeTransport
from tests.kit.control import Clock, make_controller, make_policy

pytestmark = pytest.mark.unit

NOW = 1000.0  # the watcher's clock, where the test does not move it


def _calls(prov: FakeProvider, tr: FakeTransport) -> tuple[int, int]:
    return len(prov.calls), len(tr.calls)


def test_the_watcher_reports_what_came_up_since_the_last_tick_once(tmp_path: Path) -> None:
    policy = make_policy(tmp_path)
    clock = Clock()
    prov = FakeProvider(policy.fleet, clock, boot_s=60.0)
    ctl, _, tr, _ = make_controller(policy, clock, provider=prov)
    watch = ReadyWatch()
    assert not watch.news(ctl, clock())  # before the first tick: nothing to ask about
    assert ctl.tick().ok  # launches; the instances are pending
    ids = {r.instance_id for r in ctl.store.open_records()}
    assert ids and not watch.news(ctl, clock())
    clock.advance(60)  # booted: listed running, and each agent answers
    news = watch.news(ctl, clock())
    assert news.running == ids and news.answered == ids and not news.ready
    watch.fire(news, clock())
    assert not watch.news(ctl, clock())  # fired once: the same thing does not tick again
    tr.not_ready = {"alex-0", "alex-1", "res-0"}
    assert ctl.tick().ok  # READY, servers assigned but not ready yet
    assert {r.state for r in ctl.store.open_records()} == {State.READY}
    assert not watch.news(ctl, clock())  # the tick saw all of it
    tr.not_ready = set()
    news = watch.news(ctl, clock())
    assert news.ready and {n.split("/")[0] for n in news.ready} <= ids and not news.running
    assert ctl.tick().ok
    assert not watch.news(ctl, clock())  # the tick saw them ready
    before = _calls(prov, tr)
    assert not watch.news(ctl, clock())
    assert _calls(prov, tr) == before  # a settled fleet: the watcher asked nothing


def test_a_server_that_goes_away_and_comes_back_fires_again() -> None:
    watch, ctl = ReadyWatch(), SimpleNamespace(last_obs=None)
    looks = iter([Seen(ready=frozenset({"i-1/a"})), Seen(), Seen(ready=frozenset({"i-1/a"}))])
    watch.look = lambda c: next(looks)  # type: ignore[method-assign]
    first = watch.news(ctl, NOW)
    watch.fire(first, NOW)
    assert first.ready == {"i-1/a"}
    assert not watch.news(ctl, NOW)  # gone
    assert watch.news(ctl, NOW).ready == {"i-1/a"}  # back: news again


def test_what_the_event_tick_did_not_see_fires_again_after_a_backoff(tmp_path: Path) -> None:
    """The event tick's own read of the agent fails (under load, say): the tick does not see the
    agent answer, and without a retry nothing would tick until the next interval."""
    policy = make_policy(tmp_path)
    clock = Clock()
    prov = FakeProvider(policy.fleet, clock, boot_s=60.0)
    ctl, _, tr, _ = make_controller(policy, clock, provider=prov)
    watch = ReadyWatch()
    assert ctl.tick().ok
    ids = {r.instance_id for r in ctl.store.open_records()}
    clock.advance(60)
    news = watch.news(ctl, clock())
    assert news.answered == ids
    watch.fire(news, clock())
    tr.unreachable = set(ids)  # the event tick's status reads fail
    assert ctl.tick().ok
    assert {r.state for r in ctl.store.open_records()} == {State.RUNNING}  # not ready: unseen
    tr.unreachable = set()
    assert not watch.news(ctl, clock() + RETRY_S - 0.1)  # within the backoff: no second event tick
    again = watch.news(ctl, clock() + RETRY_S)
    assert again.answered == ids and watch.fire(again, clock() + RETRY_S) == again
    assert not watch.news(ctl, clock() + 3 * RETRY_S - 0.1)  # the backoff doubles
    assert watch.news(ctl, clock() + 3 * RETRY_S).answered == ids
    assert ctl.tick().ok  # this one reads the agents: seen, so no news at any time after
    assert {r.state for r in ctl.store.open_records()} == {State.READY}
    assert not watch.news(ctl, clock() + 1000).answered


def _service(news: Seen, held: bool = True) -> SimpleNamespace:
    """Service.ready_job's view of a service: the watcher, fence, lock and the ticks run."""
    ticks: list[str] = []
    svc = SimpleNamespace(
        policy=SimpleNamespace(scaling=SimpleNamespace(ready_watch=ReadyWatchConfig(min_gap_s=30.0))),
        ready_watch=SimpleNamespace(news=lambda c, now: news, fire=lambda n, now: Seen()),
        controller=None,
        fence=SimpleNamespace(held=held),
        ticking=threading.Lock(),
        last_event=float("-inf"),
        in_tick=False,
        ticks_run=0,
        state=SimpleNamespace(metrics=SimpleNamespace(event_ticks=SimpleNamespace(inc=lambda: None))),
        ticks=ticks,
    )
    svc._full_tick = lambda: ticks.append("tick")
    return svc


def _tick_meanwhile(svc: SimpleNamespace) -> Seen:
    svc.ticks_run += 1
    return Seen(answered=frozenset({"i-2"}))


def test_the_ready_job_ticks_at_most_once_per_gap_and_never_during_a_tick() -> None:
    svc = _service(Seen(answered=frozenset({"i-1"})))
    Service.ready_job(svc)  # type: ignore[arg-type]
    Service.ready_job(svc)  # type: ignore[arg-type]  # within min_gap_s: no second event tick
    assert svc.ticks == ["tick"]
    svc.last_event = float("-inf")
    svc.in_tick = True  # a tick runs: the watcher skips its look
    Service.ready_job(svc)  # type: ignore[arg-type]
    assert svc.ticks == ["tick"]
    svc.in_tick = False
    svc.ready_watch.news = lambda c, now: _tick_meanwhile(svc)  # a tick ran during the look: no event tick
    Service.ready_job(svc)  # type: ignore[arg-type]
    assert svc.ticks == ["tick"]
    calm = _service(Seen())
    Service.ready_job(calm)  # type: ignore[arg-type]
    assert calm.ticks == []


def test_a_standby_never_ticks_on_an_event() -> None:
    svc = _service(Seen(answered=frozenset({"i-1"})), held=False)
    Service.ready_job(svc)  # type: ignore[arg-type]
    assert svc.ticks == []
