"""The warm pool on EC2 through boto3, against moto's server mode on 127.0.0.1: members are
launched with the fleet's tags and `igniter:pool=member`, stopped once initialised (agents are not
contacted here, `agents.transport: none`, so running is the provider's whole readiness step),
started (StartInstances, claimed with the slot's tags) by a scale-out before any new instance is
launched, and refilled by the next normal tick; a fast tick never refills. A kill -9 of
`igniter run --once` after a member's launch, after its stop, between its claim (the slot's tags)
and its start, and after its start leaves no member twice, no instance twice for a slot, and
nothing the fleet does not know (a member the crash left claimed is started by the rerun, not
another one). A scale-in stops the instance it retires into a pool below its target instead of
terminating it (reuse_on_scale_in: re-tagged as a member, then StopInstances), and a kill -9
between the re-tag and the stop leaves a running member that the rerun stops."""

from __future__ import annotations

import functools
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from autoscaler.fleet.base import POOL_CLAIMED, POOL_MEMBER, TAG_FLEET, TAG_POOL, TAG_SLOT
from autoscaler.loop.state.store import Store
from tests.chaos.test_crash_at_fault_points import _set_rates
from tests.fleet.test_ec2 import LOW, WORKLOADS, controller, ec2, policy_file, setup_templates, tags
from tests.fleet.test_ec2_terminate_crash import terminating_and_running
from tests.kit.backends import Moto
from tests.kit.control import Clock
from tests.kit.forkrun import ForkRunner, once

pytestmark = pytest.mark.e2e
HIGH = {w["name"]: float(w["rate_rps"]) for w in WORKLOADS}
POOL = {"size": 1, "refill_delay_s": 0}  # refilled by launches at once (the reuse tests keep the default wait)


@pytest.fixture(scope="module")
def forked() -> Iterator[ForkRunner]:
    """The `igniter run --once` processes of this module, forked from one that imported the product."""
    runner = ForkRunner()
    yield runner
    runner.close()


@functools.cache
def _client(url: str) -> Any:
    """One boto3 client per moto server: each new one cost 0.2 s of CPU (its service model), and
    the kill tests look at the fleet after every run."""
    return ec2(Moto(url))


def everything(moto: Moto) -> list[dict[str, Any]]:
    """Every instance of the fleet that is not gone: members (stopped ones too) and the fleet."""
    states = ["pending", "running", "stopping", "stopped"]
    filters = [{"Name": f"tag:{TAG_FLEET}", "Values": ["prod"]}, {"Name": "instance-state-name", "Values": states}]
    pages = _client(moto.url).get_paginator("describe_instances").paginate(Filters=filters)
    return [i for p in pages for r in p["Reservations"] for i in r["Instances"]]


def members(moto: Moto) -> list[dict[str, Any]]:
    return [i for i in everything(moto) if tags(i).get(TAG_POOL) == POOL_MEMBER]


def state(inst: dict[str, Any]) -> str:
    return str(inst["State"]["Name"])


def test_pool_is_filled_stopped_started_for_a_scale_out_and_refilled(moto: Moto, tmp_path: Path) -> None:
    setup_templates(moto)
    path = policy_file(tmp_path, moto, warm_pool=POOL)
    clock = Clock()
    ctl, calls, rates = controller(path, tmp_path / "state.sqlite", clock)
    rates.set(**LOW)
    first = ctl.tick()
    assert first.ok and first.warm_pool is not None
    pool = members(moto)
    assert Counter(i["InstanceType"] for i in pool) == {"p3.2xlarge": 1, "p3.8xlarge": 1}  # one per type
    assert all(tags(i)[TAG_FLEET] == "prod" and tags(i)[TAG_SLOT].startswith("pool-prod-") for i in pool)
    assert not {i["InstanceId"] for i in pool} & {i.id for i in ctl.deps.provider.list_instances()}  # not the fleet's

    assert first.warm_pool.target == {"p3.2xlarge": 1, "p3.8xlarge": 1}

    clock.advance(30)
    n = len(calls.ops)
    second = ctl.tick()
    assert second.ok and second.warm_pool is not None and second.warm_pool.members == {"running": 2}
    assert sorted(state(i) for i in members(moto)) == ["stopped", "stopped"]  # initialised: stopped
    assert calls.mutating().count("StopInstances") == 1  # both members in one request (pool_stop_many)
    # one listing a tick: the members come from the fleet's DescribeInstances (before: one more)
    assert calls.ops[n:] == ["DescribeInstances", "StopInstances"]

    clock.advance(30)
    before = {i["InstanceId"] for i in members(moto)}
    n = len(calls.ops)
    rates.set(**HIGH)
    fast = ctl.tick(fast=True)  # a scale-out between ticks: starts members, refills nothing
    assert fast.ok and fast.outcome.warm_starts >= 1 and fast.warm_pool is None
    ops = calls.ops[n:]
    assert ops.index("StartInstances") < ops.index("RunInstances") if "RunInstances" in ops else "StartInstances" in ops
    claimed = [i for i in everything(moto) if i["InstanceId"] in before and tags(i)[TAG_POOL] == POOL_CLAIMED]
    assert len(claimed) == fast.outcome.warm_starts and all(state(i) == "running" for i in claimed)
    records = {r.instance_id: r for r in ctl.store.open_records()}
    assert all(records[i["InstanceId"]].slot == tags(i)[TAG_SLOT] for i in claimed)  # a fleet instance now

    clock.advance(30)
    assert ctl.tick().ok  # the normal tick refills
    assert len(members(moto)) == 2
    slots = Counter(tags(i)[TAG_SLOT] for i in everything(moto))
    assert max(slots.values()) == 1  # no slot and no member twice


def _leaks(moto: Moto, state_file: Path) -> tuple[int, int]:
    """(names or slots held by two instances, instances neither a member nor an open record's)."""
    alive = everything(moto)
    twice = sum(n - 1 for n in Counter(tags(i)[TAG_SLOT] for i in alive).values())
    store = Store(state_file)
    try:
        known = {r.instance_id for r in store.open_records()}
    finally:
        store.close()
    unknown = [i for i in alive if tags(i).get(TAG_POOL) != POOL_MEMBER and i["InstanceId"] not in known]
    return twice, len(unknown)


def test_kill_9_at_each_step_of_the_pool_leaks_and_doubles_nothing(
    moto: Moto, forked: ForkRunner, tmp_path: Path
) -> None:
    setup_templates(moto)
    path, state_file = policy_file(tmp_path, moto, warm_pool=POOL), tmp_path / "state.sqlite"
    crashes = Counter[str]()
    steps = ((LOW, "after_pool_launch"), (LOW, "after_stop"), (HIGH, "after_claim"), (LOW, None), (HIGH, "after_start"))
    for rates, fault in steps:
        _set_rates(path, rates)
        crashed = once(forked, path, state_file, fault)
        crashes[fault or "none"] += crashed.returncode == -9
        assert "Traceback" not in crashed.stderr
        assert _leaks(moto, state_file)[0] == 0, fault  # its instance may wait for the rerun to be recorded
        again = once(forked, path, state_file)
        assert again.returncode == 0, again.stderr
        assert _leaks(moto, state_file) == (0, 0), fault
        assert not terminating_and_running(moto, state_file), fault
    assert crashes == {"after_pool_launch": 1, "after_stop": 1, "after_claim": 1, "none": 0, "after_start": 1}
    for _ in range(2):  # settles: the pool is full again, every member stopped
        assert once(forked, path, state_file).returncode == 0
    pool = members(moto)
    assert len(pool) == 2 and {state(i) for i in pool} == {"stopped"}
    started = [i for i in everything(moto) if tags(i).get(TAG_POOL) == POOL_CLAIMED]
    assert started and all(state(i) == "running" for i in started)
    assert _leaks(moto, state_file) == (0, 0)


def _scale_out_then_in(ctl: Any, rates: Any, clock: Clock) -> set[str]:
    """Fill and stop the pool, start its members for a scale-out, then fall back: the instances the
    scale-out started or launched (the ones the scale-in retires)."""
    rates.set(**LOW)
    for _ in range(2):
        assert ctl.tick().ok
        clock.advance(30)
    before = {r.instance_id for r in ctl.store.open_records()}
    rates.set(**HIGH)
    for _ in range(3):
        assert ctl.tick().ok
        clock.advance(30)
    return {r.instance_id for r in ctl.store.open_records()} - before


def test_scale_in_stops_the_instances_it_retires_into_the_pool(moto: Moto, tmp_path: Path) -> None:
    setup_templates(moto)
    path = policy_file(tmp_path, moto, warm_pool={"size": 1})
    clock = Clock()
    ctl, calls, rates = controller(path, tmp_path / "state.sqlite", clock)
    grown = _scale_out_then_in(ctl, rates, clock)
    kept = {i["InstanceId"] for i in members(moto)}
    assert grown and len(kept) < 2  # members started; the refill waits (refill_delay_s) for the scale-in
    rates.set(**LOW)
    n = len(calls.ops)
    for _ in range(6):
        assert ctl.tick().ok
        clock.advance(30)
    pool = members(moto)
    returned = {i["InstanceId"] for i in pool} - kept
    assert len(pool) == 2 and returned and returned <= grown  # refilled by the instances the scale-in retired
    assert all(tags(i)[TAG_SLOT].startswith("pool-prod-") and tags(i)[TAG_FLEET] == "prod" for i in pool)
    assert {state(i) for i in pool} <= {"stopping", "stopped"}
    ops = calls.ops[n:]
    assert "RunInstances" not in ops and ops.count("StopInstances") == len(returned)  # no launch, no warm-up
    assert not returned & {r.instance_id for r in ctl.store.open_records()}  # no longer the fleet's
    rates.set(**HIGH)
    assert ctl.tick(fast=True).outcome.warm_starts >= len(returned)  # they serve the next burst
    assert _leaks(moto, tmp_path / "state.sqlite") == (0, 0)


def _scale_in_until_killed(moto: Moto, forked: ForkRunner, path: Path, state_file: Path, fault: str) -> None:
    """Fill and stop the pool, start its members for a scale-out, then scale in with `fault` set
    until the run is killed there (the scale-in drains first, then returns each retiring instance)."""
    for rates in (LOW, LOW, HIGH, HIGH, HIGH):
        _set_rates(path, rates)
        assert once(forked, path, state_file).returncode == 0
    _set_rates(path, LOW)
    for _ in range(6):
        run = once(forked, path, state_file, fault)
        assert "Traceback" not in run.stderr
        assert _leaks(moto, state_file) == (0, 0)
        if run.returncode == -9:
            return
        assert run.returncode == 0, run.stderr
    raise AssertionError(f"never killed at {fault}")


def test_kill_9_between_return_and_stop_leaks_nothing(moto: Moto, forked: ForkRunner, tmp_path: Path) -> None:
    setup_templates(moto)
    path, state_file = policy_file(tmp_path, moto, warm_pool={"size": 1}), tmp_path / "state.sqlite"
    _scale_in_until_killed(moto, forked, path, state_file, "after_return")  # after a re-tag, before its StopInstances
    assert any(state(i) == "running" for i in members(moto))  # a running member, not a fleet instance
    for _ in range(4):
        assert once(forked, path, state_file).returncode == 0
        assert _leaks(moto, state_file) == (0, 0)
    pool = members(moto)
    assert len(pool) == 2 and {state(i) for i in pool} == {"stopped"}  # the rerun stopped it


def test_kill_9_between_terminating_and_return_still_returns_it(
    moto: Moto, forked: ForkRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The record moved to TERMINATING, the pool return never sent: the instance still runs as the
    fleet's. The rerun re-sends the return under the name booked for it, through the leader fence
    (the call log holds it with its token), so the instance ends a stopped member (not terminated,
    not running on forever, no second member of that name)."""
    setup_templates(moto)
    path, state_file = policy_file(tmp_path, moto, warm_pool={"size": 1}), tmp_path / "state.sqlite"
    _scale_in_until_killed(moto, forked, path, state_file, "before_return")
    stuck = terminating_and_running(moto, state_file)
    assert len(stuck) == 1  # what the crash leaves: its record terminating, the instance serving on
    calls = tmp_path / "calls.jsonl"
    monkeypatch.setenv("IGNITER_CALL_LOG", str(calls))  # the reruns' fenced calls
    for _ in range(4):
        assert once(forked, path, state_file).returncode == 0
        assert _leaks(moto, state_file) == (0, 0)
        assert not terminating_and_running(moto, state_file)
    pool = members(moto)
    assert stuck <= {i["InstanceId"] for i in pool}  # returned after all, not terminated
    assert len(pool) == 2 and {state(i) for i in pool} == {"stopped"}
    sent = [json.loads(line) for line in calls.read_text().splitlines()]
    resent = [c for c in sent if c["target"] in stuck]
    assert resent and {c["kind"] for c in resent} == {"pool_return"} and all(c["token"] for c in resent)
