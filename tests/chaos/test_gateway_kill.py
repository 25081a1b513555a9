"""kill -9 of the local gateway under load: `igniter run`'s leader finds it gone within
GATEWAY_WATCH_S, starts it again with the servers it routed to, and the workload is served
again within 5 s. Real haproxy, agents and servers (tests/kit/fleet.py); the service's gateway
check runs on a thread at the interval the scheduler gives it."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import httpx
import pytest

from autoscaler.loop.service import GATEWAY_WATCH_S, Service
from autoscaler.rates.reader import RateReader
from autoscaler.rates.static import ManualRates
from tests.chaos.report import record, trials
from tests.kit.agent import wait_until
from tests.kit.fleet import BODY, FixedPlanner, Load, converged, fleet_policy, infer_url

pytestmark = [pytest.mark.e2e, pytest.mark.chaos]
KILLS = trials(1)
SHAPE = [("p3.8xlarge", [(0, "w", 300.0), (1, "w", 100.0)])]


def _served(url: str) -> bool:
    try:
        return httpx.post(url, json=BODY, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _every(stop: threading.Event, job: object) -> None:
    """The scheduler's interval job, on a thread (Service.run needs the main thread's signals)."""
    assert callable(job)
    while not stop.wait(GATEWAY_WATCH_S):
        job()


def _kill_and_wait(gateway: object, url: str) -> float:
    """kill -9 the haproxy; seconds until a request is served again."""
    os.kill(int(gateway.pid()), signal.SIGKILL)  # type: ignore[attr-defined]
    killed = time.monotonic()
    wait_until(lambda: not _served(url), 5, "the gateway to go", poll=0.01)
    wait_until(lambda: _served(url), 5, "the gateway to serve again", poll=0.02)
    return time.monotonic() - killed


def test_a_killed_gateway_serves_again_within_5_s(
    tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("IGNITER_LOCK_DIR", str(tmp_path / "locks"))
    policy = fleet_policy(tmp_path, tiny_model_dir, ["w"])
    assert policy.source is not None
    svc = Service(Path(policy.source), tmp_path / "state.sqlite", None)
    ctl = svc.controller
    ctl.deps.planner = FixedPlanner(SHAPE)
    ctl.deps.rates = RateReader(ManualRates({"w": 400.0}), 300)
    gateway = ctl.deps.gateway
    assert gateway is not None
    stop = threading.Event()
    watch = threading.Thread(target=_every, args=(stop, svc.gateway_job), daemon=True)
    url = infer_url(policy, "w")
    try:
        deadline = time.monotonic() + 150
        svc.tick_job()
        while not converged(ctl) and time.monotonic() < deadline:
            time.sleep(0.3)
            svc.tick_job()
        assert converged(ctl)
        watch.start()
        load = Load(url, threads=8, pace_s=0.02).start()
        backs: list[float] = []
        try:
            load.wait_for(400)
            for _ in range(KILLS):
                backs.append(_kill_and_wait(gateway, url))
                at, refused = load.sent, load.failed
                load.wait_for(at + 1500)
        finally:
            load.close()
    finally:
        stop.set()
        if watch.is_alive():
            watch.join(10)
        for inst in ctl.deps.provider.list_instances():
            ctl.deps.provider.terminate(inst.id)
        gateway.stop()
        svc.close()
    print(f"gateway kill -9 x{KILLS}: served again after {backs} s; {load.failed} of {load.sent} refused or failed")
    record("gateway_kill", kills=KILLS, back_s_max=max(backs), refused=load.failed, sent=load.sent)
    assert max(backs) <= 5.0
    assert load.failed - refused <= 0.005 * (load.sent - at), load.errors  # once back, it serves
