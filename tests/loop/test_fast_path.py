"""The fast path (core/rollout/fast_path.py, loop/service/watch.py, Service.watch_job): when it ticks, and
that a fast tick only adds capacity, never overlaps a tick and never acts on a standby."""

from __future__ import annotations

import math
import threading
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from autoscaler.config.scaling import FastPathConfig
from autoscaler.core.fleet.lifecycle import State
from autoscaler.core.rollout.fast_path import additive, no_less, panicking
from autoscaler.core.rollout.reconcile import Configure, Drain, Launch, Terminate
from autoscaler.core.routing.routes import AddServer, BackendSeen, GatewayView
from autoscaler.gateway.fake import FakeGateway
from autoscaler.loop.service.scheduler import Service
from autoscaler.loop.service.watch import FastWatch
from autoscaler.loop.state.store import Store
from autoscaler.loop.tick.controller import Controller
from autoscaler.planner.types import GpuOut, InstanceOut, PlacementOut, Plan
from tests.core.test_reconcile import share
from tests.kit.control import Clock, make_controller, make_policy

pytestmark = pytest.mark.unit


def test_a_workload_panics_above_its_capacity_or_at_twice_its_plan() -> None:
    got = panicking({"a": 250.0, "b": 90.0, "c": 210.0}, {"a": 200.0, "b": 100.0, "c": 400.0}, {}, {"c": 100.0}, 2.0)
    assert [(p.workload, p.why) for p in got] == [
        ("a", "250.0 req/s above its ready capacity 200.0"),
        ("c", "210.0 req/s, 2.1 x its planned 100.0"),
    ]
    assert panicking({"a": 250.0}, {"a": 200.0}, {"a": 300.0}, {"a": 300.0}, 2.0) == []  # capacity on its way


def test_a_fast_tick_keeps_only_what_adds() -> None:
    a0, b0 = share("a-0", "a", 0, 40.0), share("b-0", "b", 1, 40.0)
    actions = [
        Launch("s2", "p3", 0, "more"),
        Configure("s0", (a0, b0, share("a-0-s0", "a", 2, 20.0)), "burst"),  # adds
        Configure("s1", (share("a-1", "a", 0, 50.0),), "move"),  # drops b0 from s1
        Drain("s3", 0, "surplus"),
        Terminate("s4", 0, "i-4", "surplus"),  # type: ignore[arg-type]
    ]
    kept = additive(actions, {"s0": (a0, b0), "s1": (b0,)})
    assert [type(a).__name__ + ":" + a.slot for a in kept] == ["Launch:s2", "Configure:s0"]
    assert no_less({"a": 100.0, "b": 50.0}, {"a": 80.0, "b": 70.0}) == {"a": 100.0, "b": 70.0}


def test_the_watcher_measures_the_window_from_the_counters() -> None:
    totals = iter([0, 100, 400, 1000])
    store = Store(":memory:")
    watch = FastWatch(
        lambda: GatewayView(
            backends={"a": BackendSeen(workload="a", requests_total=next(totals), errors_5xx=0, sessions=0)}
        ),
        store,
    )
    assert watch.rates(0.0, 6.0) == {}
    assert watch.rates(2.0, 6.0) == {"a": 50.0}
    assert watch.rates(4.0, 6.0) == {"a": 100.0}
    assert watch.rates(8.0, 6.0) == pytest.approx({"a": 900.0 / 6.0})  # the sample at 0 left the window


def test_a_fast_tick_never_scales_in_and_scales_out_at_once(tmp_path: Path) -> None:
    policy = make_policy(tmp_path, scaling={"interval_s": 30, "scale_down_delay_s": 0, "headroom": 0.0})
    clock = Clock()
    ctl, prov, _tr, rates = make_controller(policy, clock)
    for _ in range(3):
        clock.advance(30)
        assert ctl.tick().ok
    launched = len([c for c in prov.calls if c[0] == "launch"])
    rates.set(alex=600.0)
    clock.advance(5)
    assert ctl.tick(fast=True).fast
    assert len([c for c in prov.calls if c[0] == "launch"]) > launched  # scale-out at once
    applied = dict(ctl.store.applied())
    rates.set(alex=10.0, res=1.0)  # far below: a regular tick scales in (no delay)
    for _ in range(3):
        clock.advance(5)
        report = ctl.tick(fast=True)
        assert report.fast and report.ok
    assert not [c for c in prov.calls if c[0] in ("terminate", "drain")]
    assert all(set(v[1]) <= set(ctl.store.applied().get(k, ((), ()))[1]) for k, v in applied.items())
    for _ in range(3):  # the same fleet on regular ticks: it does scale in
        clock.advance(30)
        ctl.tick()
    assert [c for c in prov.calls if c[0] == "terminate"] or ctl.store.applied() != applied
    assert all(r.state is not State.TERMINATED for r in ctl.store.open_records())


def _service(panics: bool, held: bool = True) -> SimpleNamespace:
    """Service.watch_job's view of a service: the watcher, fence, lock and tick recorded."""
    ticks: list[bool] = []
    cfg = FastPathConfig(min_gap_s=30.0)
    svc = SimpleNamespace(
        policy=SimpleNamespace(scaling=SimpleNamespace(fast_path=cfg)),
        watch=SimpleNamespace(check=lambda now, c: [SimpleNamespace(workload="a", why="x")] if panics else []),
        fence=SimpleNamespace(held=held),
        ticking=threading.Lock(),
        last_fast=float("-inf"),
        state=SimpleNamespace(metrics=SimpleNamespace(fast_ticks=SimpleNamespace(inc=lambda: None))),
        ticks=ticks,
    )
    svc._tick = lambda fast: ticks.append(fast)
    return svc


def test_the_watch_job_ticks_fast_at_most_once_per_gap_and_never_during_a_tick() -> None:
    svc = _service(panics=True)
    Service.watch_job(svc)  # type: ignore[arg-type]
    Service.watch_job(svc)  # type: ignore[arg-type]  # within min_gap_s: no second fast tick
    assert svc.ticks == [True]
    svc.last_fast = float("-inf")
    with svc.ticking:  # a tick runs: the watcher skips its read
        Service.watch_job(svc)  # type: ignore[arg-type]
    assert svc.ticks == [True]
    calm = _service(panics=False)
    Service.watch_job(calm)  # type: ignore[arg-type]
    assert calm.ticks == []


def test_a_standby_never_acts_on_the_fast_path() -> None:
    svc = _service(panics=True, held=False)
    Service.watch_job(svc)  # type: ignore[arg-type]
    assert svc.ticks == []


ROOMY = {"alex": (1190.0, 20.0), "res": (290.0, 20.0)}  # req/s the model gives a server at 20 % MPS, batch 4


def roomy_planner(policy: Any, rates: Any, corrections: Any, caps: Any, current: Any) -> Plan:
    """One server per p3.2xlarge at 20 % MPS, carrying what the perf model says it does there (so
    that the controller's judge agrees): every GPU leaves 80 % of its share free."""
    itype = next(t for t in policy.instance_types if t.gpus == 1)
    instances = []
    for w in policy.workloads:
        per, share = ROOMY[w.name]
        n = math.ceil(rates.get(w.name, 0.0) / per - 1e-9)
        for _ in range(n):
            place = PlacementOut(w.name, w.model, 4, share, rates[w.name] / n, 5.0, per)
            instances.append(InstanceOut(itype.name, itype.price_per_hour, (GpuOut(0, itype.gpu, (place,)),)))
    return Plan("roomy", tuple(instances))


def test_a_4x_step_between_ticks_bursts_into_free_share_within_seconds_and_launches_the_rest(
    tmp_path: Path,
) -> None:
    """The issue's test, end to end in process: the gateway's counters (the watcher's source) show
    alex stepping 4 x between two regular ticks; the watcher panics within poll_s + window_s; the
    fast tick starts burst servers in the share its running GPUs leave free (the model says every
    neighbour keeps its budget and planned rate), adds them to the gateway in that tick, and
    launches instances for the rest of the plan."""
    policy = make_policy(
        tmp_path,
        gateway={"kind": "haproxy", "drain_timeout_s": 30},
        rates={"source": "static"},
        scaling={"interval_s": 60, "scale_down_delay_s": 600, "headroom": 0.0, "forecast": "last"},
    )
    clock, gw = Clock(), FakeGateway()
    base, prov, _tr, rates = make_controller(policy, clock, rates={"alex": 1000.0, "res": 200.0}, planner=roomy_planner)
    ctl = Controller(policy, replace(base.deps, gateway=gw))
    for _ in range(3):  # the fleet at rest, its servers in the gateway
        assert ctl.tick().ok
        clock.advance(20)
    launches = len([c for c in prov.calls if c[0] == "launch"])
    servers = {op.name for op in gw.ops if isinstance(op, AddServer)}
    watch, cfg = FastWatch(gw.observe, ctl.store), policy.scaling.fast_path
    gw.requests["alex"] = 0
    assert not watch.check(clock(), cfg)
    step_at, panicked_at = clock(), None
    for _ in range(30):  # the watcher's reads, every poll_s, after the step to 4 x
        clock.advance(cfg.poll_s)
        gw.requests["alex"] += int(4000.0 * cfg.poll_s)
        if watch.check(clock(), cfg):
            panicked_at = clock()
            break
    assert panicked_at is not None and panicked_at - step_at <= cfg.poll_s + cfg.window_s  # seconds, not a tick
    rates.set(alex=4000.0)  # what the tick's rate source reads
    report = ctl.tick(fast=True)
    assert report.ok and report.fast
    assert report.bursts  # servers in free share at once
    added = {op.name for op in gw.ops if isinstance(op, AddServer)} - servers
    assert set(report.bursts) <= added  # and in the gateway in the same tick
    assert len([c for c in prov.calls if c[0] == "launch"]) > launches  # instances beyond that
    assert not [c for c in prov.calls if c[0] == "terminate"]
