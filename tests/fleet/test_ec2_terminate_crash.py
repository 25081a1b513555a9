"""kill -9 of `igniter run --once` between a record's move to TERMINATING and its TerminateInstances
(fault point `before_terminate`), against EC2 in moto's server mode on 127.0.0.1: the crash leaves
a terminating record whose instance still runs, and the next run must terminate it (reconcile
re-sends the terminate of a listed instance no live record claims; terminating twice is harmless),
so that no instance runs on, billed, with nothing left to stop it."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from autoscaler.core.fleet.lifecycle import LIVE, State
from autoscaler.fleet.base import POOL_MEMBER, TAG_POOL, TAG_SLOT
from autoscaler.loop.state.store import Store
from tests.chaos.test_crash_at_fault_points import _set_rates
from tests.fleet.test_ec2 import LOW, WORKLOADS, fleet_instances, policy_file, setup_templates, tags
from tests.kit.backends import Moto
from tests.kit.forkrun import ForkRunner, once

pytestmark = pytest.mark.e2e
HIGH = {w["name"]: float(w["rate_rps"]) for w in WORKLOADS}


def terminating_and_running(moto: Moto, state_file: Path) -> set[str]:
    """Fleet instances (not warm-pool members) still pending or running whose record is
    TERMINATING: what a terminate that never reached EC2 leaves, and what must not outlive the
    next run."""
    store = Store(state_file)
    try:
        ending = {r.instance_id for r in store.open_records() if r.state is State.TERMINATING}
    finally:
        store.close()
    return {i["InstanceId"] for i in fleet_instances(moto) if tags(i).get(TAG_POOL) != POOL_MEMBER} & ending


def test_kill_9_between_terminating_and_terminate_leaks_nothing(moto: Moto, forked: ForkRunner, tmp_path: Path) -> None:
    setup_templates(moto)
    path, state_file = policy_file(tmp_path, moto), tmp_path / "state.sqlite"
    for _ in range(2):  # launched, then running (agents are not contacted: running is ready)
        assert once(forked, path, state_file).returncode == 0
    _set_rates(path, LOW)
    for _ in range(6):  # the scale-in drains first, then terminates
        run = once(forked, path, state_file, "before_terminate")
        assert "Traceback" not in run.stderr
        if run.returncode == -9:
            break
        assert run.returncode == 0, run.stderr
    else:
        raise AssertionError("never killed at before_terminate")
    stuck = terminating_and_running(moto, state_file)
    assert len(stuck) == 1  # what the crash leaves: its record terminating, the instance running on
    assert once(forked, path, state_file).returncode == 0
    assert not terminating_and_running(moto, state_file)
    gone = {i["InstanceId"] for i in fleet_instances(moto, states=("shutting-down", "terminated"))}
    assert stuck <= gone  # terminated by the rerun
    assert once(forked, path, state_file).returncode == 0
    running = fleet_instances(moto)
    store = Store(state_file)
    try:
        live = {r.instance_id for r in store.open_records() if r.state in LIVE}
    finally:
        store.close()
    assert {i["InstanceId"] for i in running} == live  # every running instance has a live record
    assert max(Counter(tags(i)[TAG_SLOT] for i in running).values()) == 1  # no slot twice
