"""An instance going away behind a real gateway: real haproxy on 127.0.0.1, real agents and
inference servers (the local provider), the real controller, real requests through the gateway.
The interruption notice comes from the fake interruption source (the SQS queue and its parsing are
tested against moto in tests/fleet).

- A rebalance recommendation (no deadline): the same tick launches the replacement; the going
  server keeps serving until the replacement's serves (under its own name, `m-0.a1`), then drains
  in HAProxy, and only then is its instance terminated. None of 2000+ concurrent requests fails.
- A spot warning whose deadline is within drain_timeout_s: the going server drains at once in the
  same tick, while its replacement boots; the workload's other server takes the requests, and
  again none fails.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from autoscaler.core.fleet.lifecycle import State
from autoscaler.fleet.base import Notice
from autoscaler.fleet.fake import FakeInterruptions
from autoscaler.loop.tick.controller import Controller, TickReport
from tests.kit.fleet import Load, converged, fleet_policy, infer_url, local_fleet, tick_until

pytestmark = pytest.mark.e2e


def ticks_until(ctl: Controller, done: Any, timeout: float = 150.0) -> list[TickReport]:
    """tick_until, keeping every tick's report (the gateway's operations, the actions done)."""
    reports: list[TickReport] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        reports.append(ctl.tick())
        assert reports[-1].ok, reports[-1].error
        if done():
            return reports
        time.sleep(0.3)
    raise AssertionError(f"timed out; last tick: {ctl.store.actions()[-4:]}")


def events(reports: list[TickReport]) -> list[str]:
    """The gateway's operations and the fleet's actions, in the order they were made."""
    out: list[str] = []
    for r in reports:
        out += list(r.outcome.done) + (r.gateway.ops if r.gateway else [])
    return out


def first(items: list[str], text: str) -> int:
    return next(i for i, e in enumerate(items) if text in e)


def notice(kind: str, instance_id: str, deadline: float | None) -> Notice:
    return Notice(kind=kind, instance_ids=(instance_id,), at=time.time(), deadline=deadline, token="m-1")  # type: ignore[arg-type]


def gone(ctl: Controller, instance_id: str) -> bool:
    return all(i.id != instance_id for i in ctl.deps.provider.list_instances())


def test_a_rebalanced_instance_serves_until_its_replacement_does(tmp_path: Path, tiny_model_dir: Path) -> None:
    policy = fleet_policy(tmp_path, tiny_model_dir, ["m"], drain_timeout_s=20)
    with local_fleet(policy, tmp_path, [("p3.2xlarge", [(0, "m", 200.0)])]) as (ctl, _):
        source = FakeInterruptions()
        ctl.deps.interruptions = source
        tick_until(ctl, lambda: converged(ctl))
        (victim,) = ctl.deps.provider.list_instances()
        load = Load(infer_url(policy, "m"), threads=8).start()
        try:
            load.wait_for(300)
            source.push(notice("rebalance", victim.id, None))
            reports = [ctl.tick()]
            going = [r for r in ctl.store.open_records() if r.instance_id == victim.id]
            assert [r.state for r in going] == [State.GOING_AWAY] and source.pending == []
            assert any(d.startswith(f"launch {victim.slot}") for d in reports[0].outcome.done)  # the same tick
            assert ctl.deps.gateway is not None and "m-0" in ctl.deps.gateway.observe().serving()
            reports += ticks_until(ctl, lambda: gone(ctl, victim.id) and converged(ctl))
            load.wait_for(max(2000, load.sent + 300))
        finally:
            load.close()
        history = [h["reason"] for h in ctl.store.history(victim.slot) if h["instance_id"] == victim.id]
    print(f"rebalance behind the gateway: {load.failed} of {load.sent} requests failed")
    assert load.sent >= 2000 and load.failed == 0, (load.sent, load.failed, load.errors)
    assert "rebalance" in history and "let_go" in history
    seq = events(reports)
    served = first(seq, "set server m/m-0.a1 weight 256")  # the replacement serves, under its own name
    assert served < first(seq, "set server m/m-0 state drain") < first(seq, f"terminate {victim.slot} {victim.id}")


def test_an_instance_about_to_be_taken_drains_at_once(tmp_path: Path, tiny_model_dir: Path) -> None:
    policy = fleet_policy(tmp_path, tiny_model_dir, ["m"], drain_timeout_s=20)
    shape = [("p3.2xlarge", [(0, "m", 100.0)]), ("p3.2xlarge", [(0, "m", 100.0)])]
    with local_fleet(policy, tmp_path, shape) as (ctl, _):
        source = FakeInterruptions()
        ctl.deps.interruptions = source
        tick_until(ctl, lambda: converged(ctl))
        applied = ctl.store.applied()
        victim = next(i for i in ctl.deps.provider.list_instances() if applied[(i.slot, i.attempt)][1][0].name == "m-0")
        load = Load(infer_url(policy, "m"), threads=8).start()
        try:
            load.wait_for(300)
            source.push(notice("interruption", victim.id, time.time() + 15))  # taken in 15 s: drain now
            reports = [ctl.tick()]
            assert "set server m/m-0 state drain" in (reports[0].gateway.ops if reports[0].gateway else [])
            reports += ticks_until(ctl, lambda: gone(ctl, victim.id) and converged(ctl))
            load.wait_for(max(2000, load.sent + 300))
        finally:
            load.close()
    print(f"spot warning behind the gateway: {load.failed} of {load.sent} requests failed")
    assert load.sent >= 2000 and load.failed == 0, (load.sent, load.failed, load.errors)
    seq = events(reports)
    assert first(seq, "set server m/m-0 state drain") < first(seq, f"terminate {victim.slot} {victim.id}")
