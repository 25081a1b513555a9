"""kill -9 of an inference server, then of a whole agent (its servers die with it: PR_SET_PDEATHSIG),
under load through the gateway, on a real local fleet: one workload served by two servers on two
instances (two agents). Counted: failed requests per kill (the gateway retries a refused request on
the other server), server processes that outlived their killed agent (orphans), and how the fleet
came back (the server restarted by its agent; the agent's instance replaced by the controller)."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from autoscaler.fleet.procs import alive
from autoscaler.loop.tick.controller import Controller
from autoscaler.transport.base import parse_status
from tests.chaos.report import record
from tests.kit.fleet import Load, converged, fleet_policy, infer_url, local_fleet, serving, tick_until

pytestmark = [pytest.mark.e2e, pytest.mark.chaos, pytest.mark.slow]
TWO = [("p3.2xlarge", [(0, "w", 200.0)]), ("p3.2xlarge", [(0, "w", 200.0)])]
BOUND = 0.01  # at most 1 % of the requests sent across a kill fail
PACE_S = 0.05


def _server_pids(ctl: Controller) -> dict[str, tuple[int, str]]:
    """Each serving server's pid and the id of the instance it runs on."""
    out: dict[str, tuple[int, str]] = {}
    for inst in ctl.deps.provider.list_instances():
        for s in parse_status(ctl.deps.transport.status(inst)).servers:
            if s.pid:
                out[s.name] = (int(s.pid), inst.id)
    return out


def _agent_pid(ctl: Controller, instance_id: str) -> int:
    inst = next(i for i in ctl.deps.provider.list_instances() if i.id == instance_id)
    assert inst.state_dir is not None
    return int(json.loads((Path(inst.state_dir) / "instance.json").read_text())["pid"])


def _wait(check: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def _across(load: Load, kill: Callable[[], None], recover: Callable[[], None]) -> tuple[int, int]:
    """Failed and sent requests from just before `kill` to 300 requests after `recover`."""
    failed, sent = load.failed, load.sent
    kill()
    recover()
    load.wait_for(load.sent + 300)
    return load.failed - failed, load.sent - sent


def test_killed_server_and_killed_agent_under_load(tmp_path: Path, tiny_model_dir: Path) -> None:
    policy = fleet_policy(tmp_path, tiny_model_dir, ["w"])
    with local_fleet(policy, tmp_path, TWO) as (ctl, _):
        tick_until(ctl, lambda: converged(ctl))
        pids = _server_pids(ctl)
        assert len(pids) == 2 and len({i for _, i in pids.values()}) == 2
        (server, (server_pid, _)), (_, (other_pid, agent_instance)) = sorted(pids.items())
        agent_pid = _agent_pid(ctl, agent_instance)
        # paced (8 x 20 req/s at most): an unpaced closed loop spent most of the test's CPU on
        # requests and slowed the recovery it waits for; a kill fails the same few requests either way
        load = Load(infer_url(policy, "w"), pace_s=PACE_S).start()
        try:
            load.wait_for(300)

            def server_back() -> None:
                _wait(lambda: server not in serving(ctl), 10, f"{server} to leave the pool")
                tick_until(ctl, lambda: server in serving(ctl) and converged(ctl), timeout=120)

            server_failed, server_sent = _across(load, lambda: os.kill(server_pid, signal.SIGKILL), server_back)

            def agent_replaced() -> None:
                _wait(lambda: not alive(agent_pid), 10, "the agent to die")
                tick_until(ctl, lambda: converged(ctl) and agent_instance not in _instances(ctl), timeout=150)

            agent_failed, agent_sent = _across(load, lambda: os.kill(agent_pid, signal.SIGKILL), agent_replaced)
        finally:
            load.close()
        orphans = int(alive(other_pid))  # its agent died: the server must have died with it
        if orphans:  # a failing run leaves no process behind
            os.kill(other_pid, signal.SIGKILL)
    record(
        "killed_agent_and_server",
        server_kill_failed=server_failed,
        server_kill_sent=server_sent,
        agent_kill_failed=agent_failed,
        agent_kill_sent=agent_sent,
        orphans=orphans,
    )
    print(
        f"\nkill -9 of a server: {server_failed} of {server_sent} requests failed; "
        f"of an agent: {agent_failed} of {agent_sent}; orphaned servers: {orphans}; errors: {dict(load.errors)}"
    )
    assert orphans == 0
    assert server_failed <= BOUND * server_sent and agent_failed <= BOUND * agent_sent, dict(load.errors)


def _instances(ctl: Controller) -> set[str]:
    return {i.id for i in ctl.deps.provider.list_instances()}
