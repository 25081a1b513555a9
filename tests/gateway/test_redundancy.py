"""scaling.redundancy min_servers 2 end to end: the real planner places each workload on two
GPUs of a four-GPU instance, real agents (`igniter-agent --fake-mps run --no-gpu`) run real
inference servers, a real haproxy routes real requests, and under load through the gateway

- kill -9 of one server fails no request (the gateway retries on the workload's other server);
- "the MPS daemon of a GPU crashes" (the fake MPS daemon's fault, agents/node/mps_fake.py: every
  server on that GPU dies at once, two workloads' servers here) fails no request of either
  workload; the servers come back once the agent has restarted the daemon and them.
"""

from __future__ import annotations

import os
import shlex
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agents.launch import resolve_agent_command
from autoscaler.loop.tick.controller import Controller
from tests.kit.agent import wait_until
from tests.kit.fleet import Load, converged, fleet_policy, infer_url, local_fleet, tick_until

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("test_redundancy")]

WORKLOADS = ["a", "b"]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> Iterator[tuple[Controller, Path]]:
    tmp = tmp_path_factory.mktemp("redundant")
    policy = fleet_policy(
        tmp,
        tiny_model_dir,
        WORKLOADS,
        instance_types=[{"name": "p3.8xlarge", "gpu": "v100", "gpus": 4, "price_per_hour": 12.24}],
        agents={"agent_command": shlex.join([*resolve_agent_command("igniter-agent"), "--fake-mps"])},
        scaling={"redundancy": {"min_servers": 2, "spread": "gpu"}},
    )
    with local_fleet(policy, tmp, None) as (ctl, _):
        tick_until(ctl, lambda: converged(ctl))
        yield ctl, tmp


def servers(ctl: Controller) -> list[dict[str, Any]]:
    """Every server the agents run, as their status reports it (name, workload, gpu_index, pid, state)."""
    out = []
    for inst in ctl.deps.provider.list_instances():
        if inst.state == "running":
            out += ctl.deps.transport.status(inst)["servers"]
    return out


def serving(ctl: Controller) -> frozenset[str]:
    assert ctl.deps.gateway is not None
    return ctl.deps.gateway.observe().serving()


def test_the_plan_puts_each_workload_on_two_gpus(fleet: tuple[Controller, Path]) -> None:
    ctl, _ = fleet
    placed = servers(ctl)
    for w in WORKLOADS:
        gpus = [s["gpu_index"] for s in placed if s["workload"] == w]
        assert len(gpus) == 2 and len(set(gpus)) == 2, placed


def test_kill_9_of_one_server_fails_no_request(fleet: tuple[Controller, Path]) -> None:
    ctl, _ = fleet
    victim = next(s for s in servers(ctl) if s["workload"] == "a")
    load = Load(infer_url(ctl.policy, "a")).start()
    try:
        load.wait_for(300)
        os.kill(int(victim["pid"]), signal.SIGKILL)
        wait_until(lambda: victim["name"] not in serving(ctl), 10, "the killed server to leave the pool", poll=0.02)
        left_at = load.sent
        tick_until(ctl, lambda: converged(ctl) and victim["name"] in serving(ctl), timeout=120)
        load.wait_for(left_at + 500)
    finally:
        load.close()
    print(f"kill -9 of {victim['name']}: {load.failed} of {load.sent} requests failed")
    assert load.sent >= 800
    assert load.failed == 0, (load.failed, load.sent, load.errors)


def test_an_mps_daemon_crash_kills_a_gpus_servers_and_fails_no_request(fleet: tuple[Controller, Path]) -> None:
    ctl, tmp = fleet
    gpu = next(s["gpu_index"] for s in servers(ctl) if s["workload"] == "a")
    doomed = {s["name"]: int(s["pid"]) for s in servers(ctl) if s["gpu_index"] == gpu}
    spared = {s["name"]: int(s["pid"]) for s in servers(ctl) if s["gpu_index"] != gpu}
    assert {s["workload"] for s in servers(ctl) if s["name"] in spared} == set(WORKLOADS)
    (pid_file,) = tmp.glob(f"instances/**/mps/gpu{gpu}/pipe/daemon.pid")
    daemon = int(pid_file.read_text())
    loads = {w: Load(infer_url(ctl.policy, w), threads=4).start() for w in WORKLOADS}
    try:
        for load in loads.values():
            load.wait_for(200)
        os.kill(daemon, signal.SIGUSR1)  # the fault: a fatal exception on that GPU
        wait_until(lambda: not any(_alive(p) for p in doomed.values()), 10, "the GPU's servers to die", poll=0.02)
        assert all(_alive(p) for p in spared.values())
        left_at = {w: load.sent for w, load in loads.items()}
        tick_until(ctl, lambda: converged(ctl) and set(doomed) <= serving(ctl) and _back(ctl, doomed), timeout=120)
        for w, load in loads.items():
            load.wait_for(left_at[w] + 300)
    finally:
        for load in loads.values():
            load.close()
    for w, load in loads.items():
        print(f"MPS crash on GPU {gpu} ({sorted(doomed)}): {w}: {load.failed} of {load.sent} requests failed")
        assert load.sent >= 500
        assert load.failed == 0, (w, load.failed, load.sent, load.errors)
    restarted = {s["name"]: int(s["pid"]) for s in servers(ctl) if s["name"] in doomed}
    assert restarted.keys() == doomed.keys() and not set(restarted.values()) & set(doomed.values())
    assert not _alive(daemon) and int(pid_file.read_text()) != daemon  # a new daemon serves the GPU


def _back(ctl: Controller, doomed: dict[str, int]) -> bool:
    """Every doomed server ready again in a new process. The gateway's pool alone does not say so:
    until a health check fails, it still lists a server that died a moment ago."""
    now = {s["name"]: s for s in servers(ctl) if s["name"] in doomed}
    return now.keys() == doomed.keys() and all(
        s["state"] == "ready" and s["pid"] not in (None, doomed[n]) and _alive(int(s["pid"])) for n, s in now.items()
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (dead, not yet reaped by its agent) counts as dead
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return False
