"""kill -9 of `igniter run --once` at `after_apply` (an agent took its assignment, nothing recorded
yet), on a real local fleet (agents and servers are processes here, so assignments are applied
for real). The faulty run repeats (at most FAULTY_RUNS) until the process dies at that point;
then two clean runs and `igniter down`. Counted: slots with two instances (duplicates), instances
no open record knows (orphans), servers the agents run that the layout does not plan, tracebacks."""

from __future__ import annotations

import os
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from autoscaler.config.policy import load_policy
from autoscaler.fleet.local import LocalProvider
from autoscaler.loop.state.store import Store
from autoscaler.transport.base import parse_status
from autoscaler.transport.local import LocalTransport
from tests.chaos.report import record
from tests.kit.control import write_policy
from tests.kit.fleet import free_base
from tests.kit.forkrun import ForkRunner

pytestmark = [pytest.mark.e2e, pytest.mark.chaos, pytest.mark.slow]
FAULTY_RUNS = 6


def test_kill_9_after_an_apply_leaves_no_duplicate_orphan_or_stray_server(
    forked: ForkRunner, tmp_path: Path, tiny_model_dir: Path
) -> None:
    def _once(*args: object, fault: str | None = None) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if k != "IGNITER_FAULT"}
        if fault:
            env["IGNITER_FAULT"] = fault
        return forked.run([str(a) for a in args], env)

    path = write_policy(
        tmp_path / "policy.yaml",
        fleet="applycrash",
        workloads=[{"name": "w", "model": "alexnet", "slo_ms": 30, "rate_rps": 50, "model_dir": str(tiny_model_dir)}],
        provider={"kind": "local", "base_port": free_base(), "state_root": str(tmp_path / "instances")},
        agents={"transport": "local", "command_timeout_s": 30},
        scaling={"interval_s": 5, "settle_s": 0, "headroom": 0.0, "forecast": "last"},
    )
    policy = load_policy(path)
    state = tmp_path / "state.sqlite"
    provider = LocalProvider(policy.fleet, tmp_path / "instances", policy.provider.base_port)
    totals = Counter[str]()
    try:
        for _ in range(FAULTY_RUNS):
            crashed = _once("run", path, "--once", "--state", state, fault="after_apply")
            totals["tracebacks"] += crashed.stderr.count("Traceback")
            if crashed.returncode == -9:
                totals["crashes_after_apply"] += 1
                break
            assert crashed.returncode == 0, crashed.stderr
        for _ in range(2):
            again = _once("run", path, "--once", "--state", state)
            assert again.returncode == 0, again.stderr
            totals["tracebacks"] += again.stderr.count("Traceback")
        listed = provider.list_instances()
        store = Store(state)
        try:
            known = {r.instance_id for r in store.open_records()}
            layout = store.current_layout()
        finally:
            store.close()
        planned = {s.name for _, s in layout.servers()} if layout else set()
        transport = LocalTransport(policy.agents.agent_command, policy.agents.state_dir, 30)
        running = {s.name for i in listed for s in parse_status(transport.status(i)).servers}
        totals["duplicates"] = sum(n - 1 for n in Counter(i.slot for i in listed).values())
        totals["orphans"] = sum(i.id not in known for i in listed)
        totals["stray_servers"] = len(running - planned)
        down = _once("down", path, "--state", state)
        assert down.returncode == 0, down.stderr
        totals["left_after_down"] = len(provider.list_instances())
    finally:
        for inst in provider.list_instances():
            provider.terminate(inst.id)
    record("crash_at_apply", **totals)
    print(f"\nkill -9 at after_apply: {dict(totals)}")
    assert totals["crashes_after_apply"] == 1 and planned and running == planned
    assert totals["duplicates"] == totals["orphans"] == totals["stray_servers"] == totals["tracebacks"] == 0
    assert totals["left_after_down"] == 0
