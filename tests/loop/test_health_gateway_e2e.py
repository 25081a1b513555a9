"""/healthz against the gateway's own readiness, on real components (`igniter run` with the local
provider, real agents, inference servers and haproxy). The tick that raises a server's weight
makes the gateway answer ready at once; health judged from that tick's view, read before its
routing, said "no ready server the gateway sends requests to" until the next tick (issue 51).
With event ticks off and a 2 s interval, that lag is most of an interval; it must be the rest
of the routing tick only."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agents.samples import TINY, write
from tests.kit import web
from tests.kit.agent import free_port
from tests.kit.control import REPO
from tests.loop.test_health_e2e import policy
from tests.loop.test_service import Running, wait_for

pytestmark = [pytest.mark.e2e]

INTERVAL_S = 2.0
BOUND_S = 1.0  # the routing tick's remainder, and a probe's round trip; an interval's wait fails it
GATEWAY_REASON = "no ready server the gateway sends requests to"


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[tuple[int, Running]]:
    """`igniter run` of one workload whose model exists, then `igniter down`."""
    write(tmp_path / "model", TINY)
    gateway = free_port()
    path = policy(
        tmp_path,
        tmp_path / "model",
        gateway,
        prefix="hgw",
        interval_s=INTERVAL_S,
        settle_s=INTERVAL_S,  # the settle tick after a weight is raised comes no sooner
        ready_watch={"enabled": False},  # else an event tick would mask the stale view
    )
    run = Running(path, tmp_path / "state.sqlite", free_port())
    try:
        yield gateway, run
    finally:
        run.stop()
        down = [sys.executable, "-m", "autoscaler", "down", str(path), "--state", str(tmp_path / "state.sqlite")]
        subprocess.run(down, cwd=REPO, capture_output=True, timeout=120)


def test_health_is_not_degraded_for_the_gateway_once_the_gateway_answers_ready(
    fleet: tuple[int, Running],
) -> None:
    gateway, run = fleet
    ready_url = f"http://127.0.0.1:{gateway}/v2/health/ready"
    wait_for(lambda: run.get("/healthz").json()["status"] == "degraded", 15, "health to wait for the fleet")

    def gateway_ready() -> float | None:
        return time.monotonic() if web.get(ready_url, timeout=2).status_code == 200 else None

    ready_at = wait_for(gateway_ready, 15, "the gateway to answer ready")

    def judged() -> dict | None:  # type: ignore[type-arg]
        body = run.get("/healthz").json()
        reasons = body.get("checks", {}).get("workloads", {}).get("reasons", [])
        return None if any(GATEWAY_REASON in r for r in reasons) else body

    body = wait_for(judged, 3 * INTERVAL_S, "health to see what the gateway serves")
    lag = time.monotonic() - ready_at
    assert lag < BOUND_S, (lag, body)
    assert body["checks"]["workloads"]["ok"], body
