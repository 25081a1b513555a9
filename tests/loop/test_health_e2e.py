"""Health on real components: `igniter run` with the local provider (real agents, inference servers
and haproxy) for a workload whose model directory does not exist. The agent refuses its
assignment, so /healthz must say `degraded` and why (it said "ok" while the gateway answered 503
to every request), /readyz fails naming the check, and the log has one line for the change. Once
the policy points at a model, the fleet serves and health says ok again."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agents.samples import TINY, write
from tests.kit import web
from tests.kit.agent import free_port
from tests.kit.control import REPO, write_policy
from tests.kit.fleet import free_base
from tests.loop.test_service import Running, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def policy(tmp_path: Path, model_dir: Path, gateway_port: int, *, prefix: str = "health", **scaling: object) -> Path:
    """One workload (alexnet on `model_dir`) on a local fleet behind a local haproxy; `scaling`
    overrides the fast timings below."""
    return write_policy(
        tmp_path / "policy.yaml",
        fleet=f"{prefix}-{tmp_path.name[-8:].lower().replace('_', '-')}".rstrip("-"),
        instance_types=[{"name": "p3.2xlarge", "gpu": "v100", "gpus": 1, "price_per_hour": 3.06}],
        workloads=[
            {
                "name": "alex",
                "model": "alexnet",
                "slo_ms": 30,
                "rate_rps": 50,
                "min_rate_rps": 50,
                "model_dir": str(model_dir),
            }
        ],
        provider={"kind": "local", "base_port": free_base(), "state_root": str(tmp_path / "instances")},
        agents={"transport": "local", "command_timeout_s": 30},
        gateway={"kind": "haproxy", "listen": f"127.0.0.1:{gateway_port}", "check_interval_s": 0.3},
        scaling={"interval_s": 1, "settle_s": 0.2, "headroom": 0.0, "forecast": "last", "boot_s": 1} | scaling,
        leader={"kind": "local", "lock_dir": str(tmp_path / "locks")},
    )


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[tuple[Path, int, Running]]:
    """`igniter run`, then `igniter down` (its instances and gateway outlive it, as VMs do)."""
    gateway = free_port()
    path = policy(tmp_path, tmp_path / "missing", gateway)
    run = Running(path, tmp_path / "state.sqlite", free_port())
    try:
        yield path, gateway, run
    finally:
        run.stop()
        down = [sys.executable, "-m", "autoscaler", "down", str(path), "--state", str(tmp_path / "state.sqlite")]
        subprocess.run(down, cwd=REPO, capture_output=True, timeout=120)


def test_a_refused_assignment_is_degraded_until_the_policy_is_fixed(
    tmp_path: Path, fleet: tuple[Path, int, Running]
) -> None:
    path, gateway, run = fleet

    def refused() -> dict | None:  # type: ignore[type-arg]
        body = run.get("/healthz").json()
        agents = body.get("checks", {}).get("agents", {})
        return body if any("does not exist" in r for r in agents.get("reasons", [])) else None

    body = wait_for(refused, 120, "health to name the refused assignment")
    assert run.get("/healthz").status_code == 200 and body["status"] == "degraded"
    assert "workloads: alex: no ready server the gateway sends requests to" in body["reasons"]
    ready = run.get("/readyz")
    assert ready.status_code == 503 and "[-]agents failed: health-" in ready.text and "missing/model.pt" in ready.text
    assert run.get("/livez").text == "ok\n"
    assert web.get(f"http://127.0.0.1:{gateway}/v2/health/ready", timeout=5).status_code == 503  # the truth it tells
    metrics = run.get("/metrics").text
    assert 'igniter_health_status{status="degraded"} 1.0' in metrics
    assert 'igniter_health_check{check="agents"} 0.0' in metrics

    write(tmp_path / "model", TINY)
    path.write_text(path.read_text().replace(str(tmp_path / "missing"), str(tmp_path / "model")))  # reloaded
    wait_for(lambda: run.get("/healthz").json()["status"] == "ok", 180, "health to be ok once the model exists")
    assert run.get("/readyz").text == "ok\n"
    assert web.get(f"http://127.0.0.1:{gateway}/v2/health/ready", timeout=5).status_code == 200
    assert 'igniter_health_status{status="ok"} 1.0' in run.get("/metrics").text
    log = run.text()
    changes = [line for line in log.splitlines() if " health: " in line]
    ticks = log.count(" tick ")
    assert changes[-1].endswith("health: ok") and any("missing/model.pt does not exist" in c for c in changes)
    assert len(changes) <= 5 < ticks, (changes, ticks)  # one line per change, not one per tick
    assert run.stop() == 0
