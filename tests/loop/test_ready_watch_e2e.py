"""Event ticks on real components: `igniter run` with the local provider (real agents, an inference
server, haproxy) and a clock that would not tick again for ten minutes: interval_s and boot_s 600,
settle_s 0 (no early tick from a clock at all). The fleet still serves, and /healthz says ok, within
a minute or two: each step (the instance up, its agent answering, the server ready, the gateway
serving it) ticks at once, as scaling.ready_watch promises. With `ready_watch.enabled: false` the
second tick would come at 600 s and the wait below would time out."""

from __future__ import annotations

import re
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


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[tuple[int, Running]]:
    """`igniter run`, then `igniter down` (its instances and gateway outlive it, as VMs do)."""
    gateway = free_port()
    write(tmp_path / "model", TINY)
    path = write_policy(
        tmp_path / "policy.yaml",
        fleet=f"events-{tmp_path.name[-8:].lower().replace('_', '-')}".rstrip("-"),
        instance_types=[{"name": "p3.2xlarge", "gpu": "v100", "gpus": 1, "price_per_hour": 3.06}],
        workloads=[
            {"name": "alex", "model": "alexnet", "slo_ms": 30, "rate_rps": 50, "model_dir": str(tmp_path / "model")}
        ],
        provider={"kind": "local", "base_port": free_base(), "state_root": str(tmp_path / "instances")},
        agents={"transport": "local", "command_timeout_s": 30},
        gateway={"kind": "haproxy", "listen": f"127.0.0.1:{gateway}", "check_interval_s": 0.3},
        scaling={"interval_s": 600, "boot_s": 600, "settle_s": 0, "headroom": 0.0, "forecast": "last"},
        leader={"kind": "local", "lock_dir": str(tmp_path / "locks")},
    )
    run = Running(path, tmp_path / "state.sqlite", free_port())
    try:
        yield gateway, run
    finally:
        run.stop()
        down = [sys.executable, "-m", "autoscaler", "down", str(path), "--state", str(tmp_path / "state.sqlite")]
        subprocess.run(down, cwd=REPO, capture_output=True, timeout=120)


def _serving_event(log: str) -> bool:
    return any("serving: " in line for line in log.splitlines() if "event tick: " in line)


def test_each_step_of_a_bring_up_ticks_at_once_not_at_the_interval(fleet: tuple[int, Running]) -> None:
    gateway, run = fleet
    try:
        wait_for(lambda: run.get("/healthz").json()["status"] == "ok", 150, "health ok long before the 600 s interval")
    except AssertionError as exc:  # say why: the health reasons and the service's log
        raise AssertionError(f"{exc}\n{run.get('/healthz').text}\n{run.text()[-6000:]}") from None
    assert web.get(f"http://127.0.0.1:{gateway}/v2/health/ready", timeout=5).status_code == 200
    # The gateway serving the server ticks too, at once: the tick that raised its weight observed
    # the gateway before it did, and a replaced server's drain waits on a tick that sees the new one
    # served. /healthz no longer waits for that tick (it reads the gateway after routing), so the
    # event may come just after health said ok: wait for it, well inside the 600 s interval.
    wait_for(lambda: _serving_event(run.text()), 30, "an event tick for the gateway serving it")
    log = run.text()
    events = [line for line in log.splitlines() if "event tick: " in line]
    assert any("answered: " in e for e in events), events
    # The server's step ticks at once, noticed by whichever signal the watcher reads first: its
    # agent's ready report, or the gateway's check passing (a clean-clone run on a slower VM read
    # the agent a moment before the server was ready and the gateway a moment after; that event
    # tick then saw it ready). tests/loop/test_ready_watch.py checks the agent's report alone.
    assert any("ready: " in e or "healthy: " in e for e in events), events
    assert any("serving: " in e for e in events), events
    counted = re.search(r"^igniter_event_ticks_total (\S+)$", run.get("/metrics").text, re.M)
    assert counted is not None and float(counted.group(1)) >= len(events)
    assert run.stop() == 0
