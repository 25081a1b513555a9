"""Status endpoint in-process, and the APScheduler wiring of the service (job options, SIGTERM path)."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import httpx

from autoscaler.fleet.base import ThrottledError
from autoscaler.loop.controller import Deps
from autoscaler.loop.service import Service
from autoscaler.loop.status import StatusServer, StatusState
from autoscaler.rates.reader import RateReader
from tests.kit.control import Clock, make_controller, make_policy, stub_planner, write_policy


def test_endpoints_serve_the_published_snapshot(tmp_path: Path) -> None:
    policy = make_policy(tmp_path)
    clock = Clock()
    ctl, prov, _tr, _ = make_controller(policy, clock)
    state = StatusState()
    server = StatusServer(state, 0).start()
    try:
        url = f"http://127.0.0.1:{server.port}"
        assert httpx.get(url + "/v1/plan").json() == {"layout": None}
        for _ in range(3):
            state.publish(ctl, ctl.tick())
            clock.advance(30)
        plan = httpx.get(url + "/v1/plan").json()
        assert len(plan["layout"]["slots"]) == 3 and plan["forecast"] == {"alex": 150.0, "res": 50.0}
        fleet = httpx.get(url + "/v1/fleet").json()
        assert fleet["cost_per_hour"] == 9.18 and {i["state"] for i in fleet["instances"]} == {"ready"}
        metrics = httpx.get(url + "/metrics").text
        assert "igniter_fleet_cost_per_hour 9.18" in metrics
        assert 'igniter_instances{instance_type="p3.2xlarge",state="ready"} 3.0' in metrics
        assert 'igniter_planned_capacity_rps{workload="alex"} 200.0' in metrics
        assert 'igniter_forecast_rps{workload="res"} 50.0' in metrics
        assert 'igniter_ticks_total{result="ok"} 3.0' in metrics
        assert "igniter_surge_instances 0.0" in metrics and "igniter_draining_servers 0.0" in metrics
        assert plan["converged"] is True and plan["breaches"] == [] and plan["surge_slots"] == []
        assert httpx.get(url + "/healthz").status_code == 200

        def outage() -> list:  # type: ignore[type-arg]
            raise ThrottledError("RequestLimitExceeded")

        prov.list_instances = outage  # type: ignore[method-assign]
        state.publish(ctl, ctl.tick())
        assert httpx.get(url + "/healthz").status_code == 503
        assert 'igniter_errors_total{kind="provider"} 1.0' in httpx.get(url + "/metrics").text
    finally:
        server.close()


def test_service_schedules_ticks_and_stops_on_sigterm(tmp_path: Path) -> None:
    path = write_policy(
        tmp_path / "policy.yaml",
        scaling={"interval_s": 0.2, "headroom": 0.0, "forecast": "last"},
        agents={"transport": "none"},
        provider={"kind": "local", "state_root": str(tmp_path / "i")},
    )
    svc = Service(path, tmp_path / "state.sqlite", None)
    _, prov, _, manual = make_controller(svc.policy, Clock())
    svc.controller.deps = Deps(
        prov,
        svc.controller.deps.transport,
        RateReader(manual, 300),
        svc.controller.store,
        stub_planner,
        Clock(),
        False,
    )
    seen: dict[str, object] = {}

    def later() -> None:
        job = svc.scheduler.get_job("tick") if svc.scheduler else None
        seen.update(coalesce=job.coalesce, max_instances=job.max_instances, grace=job.misfire_grace_time)
        signal.raise_signal(signal.SIGTERM)

    old = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    timer = threading.Timer(1.0, later)
    timer.start()
    try:
        assert svc.run() == 0
    finally:
        timer.cancel()
        for s, handler in old.items():
            signal.signal(s, handler)
    assert seen == {"coalesce": True, "max_instances": 1, "grace": 1}
    assert len([c for c in prov.calls if c[0] == "launch"]) == 3
    assert sum(1 for c in prov.calls if c[0] == "list") >= 2  # ticked more than once
