"""Status endpoint in-process, and the APScheduler wiring of the service (job options, SIGTERM path)."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from autoscaler.fleet.base import ThrottledError
from autoscaler.loop.service.scheduler import Service
from autoscaler.loop.status.server import StatusServer, StatusState
from autoscaler.loop.tick.controller import Deps
from autoscaler.rates.reader import RateReader
from tests.kit import web
from tests.kit.control import Clock, make_controller, make_policy, stub_planner, write_policy

pytestmark = pytest.mark.unit


def test_endpoints_serve_the_published_snapshot(tmp_path: Path) -> None:
    policy = make_policy(tmp_path)
    clock = Clock()
    ctl, prov, tr, _ = make_controller(policy, clock)
    mig = {"enabled": True, "device": "nvml", "errors": [], "gpus": [{"index": 0, "mig_mode": "enabled", "slices": []}]}
    tr.mig = mig  # each agent's MIG status reaches /v1/fleet per instance
    state = StatusState()
    server = StatusServer(state, 0).start()
    try:
        url = f"http://127.0.0.1:{server.port}"
        assert web.get(url + "/v1/plan").json() == {"layout": None}
        for _ in range(3):
            state.publish(ctl, ctl.tick())
            clock.advance(30)
        plan = web.get(url + "/v1/plan").json()
        assert len(plan["layout"]["slots"]) == 3 and plan["forecast"] == {"alex": 150.0, "res": 50.0}
        fleet = web.get(url + "/v1/fleet").json()
        assert fleet["cost_per_hour"] == 9.18 and {i["state"] for i in fleet["instances"]} == {"ready"}
        assert [i["mig"] for i in fleet["instances"]] == [mig] * 3
        metrics = web.get(url + "/metrics").text
        assert "igniter_fleet_cost_per_hour 9.18" in metrics
        assert 'igniter_instances{instance_type="p3.2xlarge",state="ready"} 3.0' in metrics
        assert 'igniter_planned_capacity_rps{workload="alex"} 200.0' in metrics
        assert 'igniter_forecast_rps{workload="res"} 50.0' in metrics
        assert 'igniter_ticks_total{result="ok"} 3.0' in metrics
        assert "igniter_surge_instances 0.0" in metrics and "igniter_draining_servers 0.0" in metrics
        assert plan["converged"] is True and plan["breaches"] == [] and plan["surge_slots"] == []
        assert web.get(url + "/healthz").status_code == 200

        def outage() -> list:  # type: ignore[type-arg]
            raise ThrottledError("RequestLimitExceeded")

        prov.list_instances = outage  # type: ignore[method-assign]
        state.publish(ctl, ctl.tick())
        assert web.get(url + "/healthz").status_code == 503
        assert 'igniter_errors_total{kind="provider"} 1.0' in web.get(url + "/metrics").text
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


def test_headroom_and_last_hour_attainment_per_workload(tmp_path: Path) -> None:
    """/v1/headroom and /metrics: the headroom each workload is planned with (auto: the cold
    start until it has an hour of errors, more once an error exceeds it) and the fraction of the
    last hour its ready capacity covered the observed rate (short after alex's rate jumped)."""
    policy = make_policy(tmp_path, scaling={"interval_s": 30, "headroom": "auto", "forecast": "last"})
    clock = Clock()
    ctl, _prov, _tr, manual = make_controller(policy, clock)
    state = StatusState()
    server = StatusServer(state, 0).start()
    try:
        url = f"http://127.0.0.1:{server.port}"
        for k in range(40):
            manual.set(alex=400.0 if k >= 30 else 150.0)
            state.publish(ctl, ctl.tick())
            clock.advance(30)
        body = web.get(url + "/v1/headroom").json()
        assert body["mode"] == "auto" and body["target_attainment"] == 0.999
        alex, res = body["workloads"]["alex"], body["workloads"]["res"]
        assert res["headroom"] == 0.5  # cold start: under an hour of samples
        assert alex["headroom"] == 1.0  # 400 against the 150 forecast boot_s earlier: the cap
        assert res["attainment_1h"] == 1.0
        assert 0.5 < alex["attainment_1h"] < 1.0  # 400 found the capacity planned for 225 short
        assert alex["forecast_error"] == pytest.approx(0.0)  # by now 400 was forecast boot_s ago too
        # the last hour's errors: 0 but for the 6 reads (of 34) before 400 was forecast boot_s ago
        assert alex["forecast_error_1h"] == {
            "0.1": 0.0,
            "0.5": 0.0,
            "0.9": pytest.approx(400 / 150 - 1),
            "0.99": pytest.approx(400 / 150 - 1),
        }
        assert res["forecast_error_1h"] == {"0.1": 0.0, "0.5": 0.0, "0.9": 0.0, "0.99": 0.0}
        assert alex["burst_floor_rps"] == 400.0 and res["burst_floor_rps"] == 50.0  # the busiest reads of 600 s
        assert alex["ramp_floor_rps"] == res["ramp_floor_rps"] == 0.0  # one step up is no sustained rise
        assert alex["quantile"] == res["quantile"] == 0.999  # the feedback waits for an hour of samples
        plan = web.get(url + "/v1/plan").json()
        assert plan["headroom"] == {"alex": 1.0, "res": 0.5} and plan["forecast"] == {"alex": 800.0, "res": 75.0}
        metrics = web.get(url + "/metrics").text
        assert 'igniter_headroom_ratio{workload="alex"} 1.0' in metrics
        assert f'igniter_attainment_last_hour_ratio{{workload="alex"}} {alex["attainment_1h"]}' in metrics
        assert 'igniter_attainment_last_hour_ratio{workload="res"} 1.0' in metrics
        assert 'igniter_burst_floor_rps{workload="alex"} 400.0' in metrics
        assert 'igniter_ramp_floor_rps{workload="alex"} 0.0' in metrics
        assert 'igniter_headroom_quantile_ratio{workload="alex"} 0.999' in metrics
        assert f'igniter_forecast_error_ratio{{quantile="0.9",workload="alex"}} {400 / 150 - 1}' in metrics
        assert 'igniter_forecast_error_ratio{quantile="0.5",workload="alex"} 0.0' in metrics
        # alex's headroom sits at its cap: its target is out of reach, and the endpoint says so
        cond = {c["workload"]: c for c in body["conditions"]}
        assert cond["alex"]["status"] == "True" and cond["alex"]["reason"] == "CapReached"
        assert cond["res"]["status"] == "False"
        assert 'igniter_target_out_of_reach{cause="cap reached",workload="alex"} 1.0' in metrics
        assert 'igniter_target_out_of_reach{cause="",workload="res"} 0.0' in metrics
        state.set_leader({"role": "standby", "token": None}, changed=True)  # lost the lease: plans nothing
        assert web.get(url + "/v1/headroom").json() == {"workloads": {}, "role": "standby"}
    finally:
        server.close()


def test_p99_per_workload_is_its_worst_ready_servers() -> None:
    from autoscaler.loop.tick.observe import worst_p99
    from autoscaler.transport.base import AgentStatus, ServerStatus

    statuses = {
        "s0": AgentStatus(1, True, (ServerStatus("a0", "alex", "ready", latency_ms_p99=9.0),)),
        "s1": AgentStatus(
            1,
            True,
            (
                ServerStatus("a1", "alex", "ready", latency_ms_p99=14.0),
                ServerStatus("a2", "alex", "starting", latency_ms_p99=90.0),  # not serving yet: not counted
                ServerStatus("r0", "res", "ready"),  # no request in its last minute: no p99
            ),
        ),
    }
    assert worst_p99(statuses) == {"alex": 14.0}


def test_metrics_export_p99_per_workload_against_the_slo(tmp_path: Path) -> None:
    """igniter_latency_p99_seconds: the agents' p99 the SLO guard acts on, exported per workload (the
    dashboard's "p99 latency vs SLO" panel); gone again when no server reports one."""
    clock = Clock()
    ctl, _prov, tr, _ = make_controller(make_policy(tmp_path), clock)
    tr.p99.update(alex=12.5, res=80.0)
    state = StatusState()
    for _ in range(4):
        state.publish(ctl, ctl.tick())
        clock.advance(30)
    exported = generate_latest(state.metrics.registry).decode()  # what /metrics serves
    assert 'igniter_latency_p99_seconds{workload="alex"} 0.0125' in exported
    assert 'igniter_latency_p99_seconds{workload="res"} 0.08' in exported
    tr.p99.clear()
    state.publish(ctl, ctl.tick())
    assert 'igniter_latency_p99_seconds{workload="' not in generate_latest(state.metrics.registry).decode()
