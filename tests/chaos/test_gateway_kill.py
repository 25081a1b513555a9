"""kill -9 of the local gateway under load: the leader holds the listening socket, so the kernel
queues the connections that come while no haproxy runs; its keeper (loop/service/keeper.py), blocked on
the haproxy's exit, starts a new one on the same socket at once, and it accepts them. What is lost
are the requests inside the killed process (at most one per client thread here), not the clients
that connect meanwhile (before, when haproxy alone held the port: a median of 22 to 32 % of the
requests in the 5 s after a kill were refused, benchmarks/gateway_kill.py; with the port bound by
haproxy again but the same keeper, this test counts about 5 %: it fails).

Bounds: the issue's targets, served again within BACK_S (5 s) and at most REFUSED (1 %) of the
WINDOW requests after each kill failed. Both hold with room on a loaded 2-core machine: at load
averages 10 to 20 it was back in 0.15 to 0.9 s and lost 1 to 8 of 2,000 (0.4 % at most: the
requests in flight, one per client thread). make chaos records this probe's figures;
benchmarks/gateway_kill.py measures before and after. Real haproxy, agents and servers (tests/kit/fleet.py); the service's keeper runs
on its own thread, as in `igniter run`."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import httpx
import pytest

from autoscaler.loop.service.scheduler import Service
from autoscaler.rates.reader import RateReader
from autoscaler.rates.static import ManualRates
from tests.chaos.report import record, trials
from tests.kit import web
from tests.kit.agent import wait_until
from tests.kit.fleet import BODY, FixedPlanner, Load, converged, fleet_policy, infer_url

pytestmark = [pytest.mark.e2e, pytest.mark.chaos]
KILLS = trials(1)
BACK_S = 5.0
REFUSED = 0.01
WINDOW = 2000  # requests after each kill counted (5 s of the 400 req/s offered)
SHAPE = [("p3.8xlarge", [(0, "w", 300.0), (1, "w", 100.0)])]


def _served(url: str) -> bool:
    try:
        return web.post(url, json=BODY, timeout=30).status_code == 200
    except httpx.HTTPError:
        return False


def _kill_and_wait(gateway: object, url: str) -> float:
    """kill -9 the haproxy; seconds until a request sent after the kill is answered."""
    pid = int(gateway.pid())  # type: ignore[attr-defined]
    os.kill(pid, signal.SIGKILL)
    killed = time.monotonic()
    wait_until(lambda: _served(url), BACK_S, "the gateway to serve again", poll=0.01)
    back = time.monotonic() - killed
    assert gateway.pid() not in (None, pid)  # type: ignore[attr-defined]  # a new process answered
    return back


def test_a_killed_gateway_serves_again(tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IGNITER_LOCK_DIR", str(tmp_path / "locks"))
    policy = fleet_policy(tmp_path, tiny_model_dir, ["w"])
    assert policy.source is not None
    svc = Service(Path(policy.source), tmp_path / "state.sqlite", None)
    ctl = svc.controller
    ctl.deps.planner = FixedPlanner(SHAPE)
    ctl.deps.rates = RateReader(ManualRates({"w": 400.0}), 300)
    gateway = ctl.deps.gateway
    assert gateway is not None and svc.keeper is not None
    url = infer_url(policy, "w")
    backs: list[float] = []
    counted: list[tuple[int, int]] = []  # (sent, failed) in each kill's window
    try:
        deadline = time.monotonic() + 150
        svc.tick_job()
        while not converged(ctl) and time.monotonic() < deadline:
            time.sleep(0.3)
            svc.tick_job()
        assert converged(ctl)
        assert gateway.holds_listener()
        svc.keeper.start()
        load = Load(url, threads=8, pace_s=0.02).start()
        try:
            load.wait_for(400)
            for _ in range(KILLS):
                sent, failed = load.sent, load.failed
                backs.append(_kill_and_wait(gateway, url))
                load.wait_for(sent + WINDOW)
                counted.append((load.sent - sent, load.failed - failed))
        finally:
            load.close()
    finally:
        svc.keeper.close()
        for inst in ctl.deps.provider.list_instances():
            ctl.deps.provider.terminate(inst.id)
        gateway.stop()
        svc.close()
    worst = max(f / max(1, n) for n, f in counted)
    print(f"gateway kill -9 x{KILLS}: served again after {backs} s; failed (of sent) per kill window {counted}")
    record(
        "gateway_kill",
        kills=KILLS,
        back_s_max=max(backs),
        sent=sum(n for n, _ in counted),
        failed=sum(f for _, f in counted),
        failed_share_max=worst,
    )
    assert svc.keeper.revived >= KILLS
    assert max(backs) <= BACK_S
    assert worst <= REFUSED, load.errors
