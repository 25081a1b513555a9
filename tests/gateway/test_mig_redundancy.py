"""scaling.redundancy min_servers 2 on a MIG GPU type, end to end: the real planner cuts workload
`a`'s two slices on the two fake A100s of one instance (`igniter-agent run --no-gpu --fake-mig`,
the local provider's flags for a MIG type), real inference servers run in them, a real haproxy
routes real requests, and under a bounded load through the gateway a kill -9 of one of a's
servers fails no request (the gateway retries on the server in the other GPU's slice)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from autoscaler.config.policy import Policy, load_policy
from autoscaler.loop.tick.controller import Controller
from tests.gateway.test_redundancy import servers, serving
from tests.kit.agent import free_port, wait_until
from tests.kit.control import write_policy
from tests.kit.fleet import Load, converged, free_base, infer_url, local_fleet, tick_until
from tests.kit.mig import import_a100, needs_shared

pytestmark = [pytest.mark.e2e, needs_shared, pytest.mark.xdist_group("test_mig_redundancy")]


def mig_policy(tmp: Path, model_dir: Path) -> Policy:
    """One workload on resnet50's measured A100 rows (served by the tiny model), two GPUs per
    instance, min_servers 2; the test's fast timings (tests/kit/fleet.py fleet_policy)."""
    import_a100(tmp / "profiles")
    path = write_policy(
        tmp / "policy.yaml",
        fleet=f"mig-red-{tmp.name[-8:].lower().replace('_', '-')}".rstrip("-"),
        profiles_dir="profiles",
        instance_types=[{"name": "a100-2", "gpu": "a100-80gb", "gpus": 2, "price_per_hour": 10.14, "max_instances": 2}],
        workloads=[{"name": "a", "model": "resnet50", "slo_ms": 200, "rate_rps": 50, "model_dir": str(model_dir)}],
        provider={"kind": "local", "base_port": free_base(), "state_root": str(tmp / "instances")},
        agents={"transport": "local", "command_timeout_s": 30},
        scaling={
            "interval_s": 1,
            "settle_s": 0.2,
            "headroom": 0.0,
            "forecast": "last",
            "scale_down_delay_s": 0,
            "redundancy": {"min_servers": 2},
        },
        gateway={
            "kind": "haproxy",
            "listen": f"127.0.0.1:{free_port()}",
            "check_interval_s": 0.3,
            "drain_timeout_s": 10,
        },
    )
    return load_policy(path)


@pytest.fixture
def fleet(tmp_path: Path, tiny_model_dir: Path) -> Iterator[Controller]:
    with local_fleet(mig_policy(tmp_path, tiny_model_dir), tmp_path, None) as (ctl, _):
        tick_until(ctl, lambda: converged(ctl), timeout=60)
        yield ctl


def test_kill_9_of_a_mig_slice_s_server_fails_no_request(fleet: Controller) -> None:
    ctl = fleet
    placed = [s for s in servers(ctl) if s["workload"] == "a"]
    assert len(placed) == 2 and len({s["gpu_index"] for s in placed}) == 2, placed  # two GPUs, one instance
    assert all(s.get("mig_profile") for s in placed), placed  # each in a MIG slice
    assert len(ctl.deps.provider.list_instances()) == 1
    victim = placed[0]
    load = Load(infer_url(ctl.policy, "a"), threads=4, pace_s=0.01).start()  # at most ~400 req/s
    try:
        load.wait_for(100)
        os.kill(int(victim["pid"]), signal.SIGKILL)
        wait_until(lambda: victim["name"] not in serving(ctl), 10, "the killed server to leave the pool", poll=0.02)
        load.wait_for(load.sent + 150)  # all on the server in the other GPU's slice
    finally:
        load.close()
    print(f"kill -9 of {victim['name']} ({_where(victim)}): {load.failed} of {load.sent} requests failed")
    assert load.sent >= 250
    assert load.failed == 0, (load.failed, load.sent, load.errors)
    tick_until(ctl, lambda: converged(ctl) and victim["name"] in serving(ctl), timeout=60)
    back = next(s for s in servers(ctl) if s["name"] == victim["name"])
    assert back["pid"] != victim["pid"] and back["gpu_index"] == victim["gpu_index"]  # restarted in its slice


def _where(server: dict[str, Any]) -> str:
    return f"GPU {server['gpu_index']} {server.get('mig_profile')}@{server.get('mig_start')}"
