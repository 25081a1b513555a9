"""`igniter run` as a real process: APScheduler ticks, status endpoint, reload, SIGTERM, exit codes.

EC2 is moto on 127.0.0.1 and agents are not contacted, so nothing but loopback is reached.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from autoscaler.loop.state.store import Store
from tests.fleet.test_ec2 import LOW, WORKLOADS, fleet_instances, policy_file, setup_templates
from tests.kit import web
from tests.kit.backends import Moto, free_port
from tests.kit.control import REPO

pytestmark = pytest.mark.e2e


def wait_for(check: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = check()
        except (httpx.HTTPError, OSError):
            value = None
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


class Running:
    def __init__(self, policy: Path, state: Path, port: int, env: dict[str, str] | None = None) -> None:
        self.log = state.parent / "igniter.log"
        self.url = f"http://127.0.0.1:{port}"
        cmd = [
            sys.executable,
            "-m",
            "autoscaler",
            "run",
            str(policy),
            "--state",
            str(state),
            "--status-port",
            str(port),
        ]
        self.proc = subprocess.Popen(
            cmd, cwd=REPO, env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL, stderr=open(self.log, "wb")
        )

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def get(self, path: str) -> httpx.Response:
        return web.get(self.url + path, timeout=5)

    def stop(self, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise


@pytest.fixture()
def running() -> Iterator[list[Running]]:
    started: list[Running] = []
    yield started
    for r in started:
        if r.proc.poll() is None:
            r.proc.kill()
            r.proc.wait()


def test_serves_status_reloads_policy_and_stops_on_sigterm(moto: Moto, tmp_path: Path, running: list[Running]) -> None:
    setup_templates(moto)
    path = policy_file(tmp_path, moto, interval_s=1)
    svc = Running(path, tmp_path / "state.sqlite", free_port())
    running.append(svc)
    plan = wait_for(lambda: (p := svc.get("/v1/plan").json())["layout"] and p, 60, "a first plan")
    slots = len(plan["layout"]["slots"])
    assert svc.get("/healthz").status_code == 200
    fleet = wait_for(lambda: (f := svc.get("/v1/fleet").json())["instances"] and f, 30, "the fleet")
    assert fleet["fleet"] == "prod" and any(t[1] == "launched" for t in fleet["transitions"])
    metrics = wait_for(lambda: m if 'state="ready"' in (m := svc.get("/metrics").text) else None, 30, "ready")
    for name in (
        "igniter_fleet_cost_per_hour",
        "igniter_instances{",
        'igniter_planned_capacity_rps{workload="res"}',
        'igniter_forecast_rps{workload="alex"} 1500.0',
        "igniter_tick_duration_seconds_bucket",
        'igniter_ticks_total{result="ok"}',
        "igniter_target_attainment_ratio 0.999",  # the policy's own thresholds (deploy/prometheus/alerts.yaml)
        'igniter_workload_slo_seconds{workload="alex"}',
    ):
        assert name in metrics, name
    assert svc.get("/nope").status_code == 404

    data = yaml.safe_load(path.read_text())
    broken = {**data, "workloads": [{**WORKLOADS[0], "slo_ms": -1}]}
    path.write_text(yaml.safe_dump(broken))
    wait_for(lambda: "policy reload rejected" in svc.text(), 20, "the rejection")
    assert "workloads[0].slo_ms" in svc.text() and svc.proc.poll() is None
    assert svc.get("/healthz").status_code == 200

    data["workloads"] = [{**w, "rate_rps": LOW[w["name"]]} for w in data["workloads"]]
    path.write_text(yaml.safe_dump(data))
    svc.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: "policy reloaded" in svc.text(), 20, "the reload")
    wait_for(lambda: len(svc.get("/v1/plan").json()["layout"]["slots"]) < slots, 30, "scale-in after the reload")
    wait_for(lambda: len(fleet_instances(moto)) < slots, 30, "terminated instances")
    assert svc.stop() == 0
    assert "Traceback" not in svc.text()


def test_sigterm_finishes_the_tick_in_progress(moto: Moto, tmp_path: Path, running: list[Running]) -> None:
    setup_templates(moto)
    path = policy_file(tmp_path, moto, interval_s=30)
    state = tmp_path / "state.sqlite"
    release = tmp_path / "release"  # the act step holds until the test creates it (faults.py)
    env = {"IGNITER_FAULT": "slow_act", "IGNITER_FAULT_SLEEP_S": "120", "IGNITER_FAULT_RELEASE": str(release)}
    svc = Running(path, state, free_port(), env)
    running.append(svc)
    wait_for(lambda: "fault point slow_act: holding" in svc.text(), 120, "the first tick to reach act")
    svc.proc.send_signal(signal.SIGTERM)
    wait_for(lambda: "stopping: finishing the tick in progress" in svc.text(), 60, "the signal to be taken")
    assert "tick 1:" not in svc.text()  # the tick is still held in its act step
    release.touch()
    assert svc.stop() == 0
    log = svc.text()
    assert log.index("stopping: finishing the tick in progress") < log.index("tick 1:")  # signal came mid-tick
    store = Store(state)
    with store._tx() as db:
        ticks = db.execute("SELECT finished_at, ok FROM ticks").fetchall()
    assert len(ticks) == 1 and ticks[0][0] is not None and ticks[0][1] == 1
    assert store.actions() and all(a["status"] == "done" for a in store.actions())
    assert len(fleet_instances(moto)) == len(store.current_layout().slots)  # type: ignore[union-attr]
    store.close()


def test_once_runs_one_tick(moto: Moto, tmp_path: Path) -> None:
    setup_templates(moto)
    path = policy_file(tmp_path, moto)
    state = tmp_path / "state.sqlite"
    cmd = [sys.executable, "-m", "autoscaler", "run", str(path), "--once", "--state", str(state)]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    store = Store(state)
    with store._tx() as db:
        assert db.execute("SELECT COUNT(*) FROM ticks WHERE ok=1").fetchone()[0] == 1
    store.close()


def test_bad_policy_exits_2_without_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        yaml.safe_dump(
            {
                "instance_types": [{"name": "p3.2xlarge", "gpu": "v100", "price_per_hour": 3}],
                "workloads": [{"name": "a", "model": "alexnet", "slo_ms": 15}],
                "scaling": {"interval_s": -5},
            }
        )
    )
    done = subprocess.run(
        [sys.executable, "-m", "autoscaler", "run", str(bad), "--once", "--state", str(tmp_path / "s.sqlite")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert f"{bad}: scaling.interval_s:" in done.stderr and "Traceback" not in done.stderr


def test_ec2_without_launch_template_exits_2(moto: Moto, tmp_path: Path) -> None:
    path = policy_file(tmp_path, moto)
    data = yaml.safe_load(path.read_text())
    data["provider"]["launch_templates"] = {"p3.2xlarge": "gpu-p3"}
    path.write_text(yaml.safe_dump(data))
    done = subprocess.run(
        [sys.executable, "-m", "autoscaler", "run", str(path), "--once", "--state", str(tmp_path / "s.sqlite")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "provider.launch_templates" in done.stderr and "p3.8xlarge" in done.stderr


def test_status_port_in_use_exits_2(moto: Moto, tmp_path: Path) -> None:
    import socket

    path = policy_file(tmp_path, moto)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "autoscaler",
                "run",
                str(path),
                "--state",
                str(tmp_path / "s"),
                "--status-port",
                str(port),
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 2 and "scaling.status_port" in done.stderr and "Traceback" not in done.stderr
