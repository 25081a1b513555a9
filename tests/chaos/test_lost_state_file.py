"""A lost state file under load (issue 51 item 1): a fleet serves real requests through a real
haproxy; its leader stops, and a controller with a fresh, empty state file takes over the same
instances, agents and gateway (what a standby on another host, or an operator who lost the file,
does). Before, its first tick knew no server: it put every gateway server in maintenance and
deleted it (181 of 4,001 requests failed), and terminated the instances no slot of its plan kept
at once. Now the fresh start adopts what runs (core/fleet/adopt.py): the instances' tags, the
agents' status and the gateway's servers; it changes them only through the usual rollout.

Checked here: 0 failed requests while the new controller ticks, the gateway's servers untouched
where the plan keeps them, and an instance the new plan has no slot for leaves through a drain
(gateway drain, agent drain, then terminate), never at once. Real agents, servers and haproxy
(tests/kit/fleet.py)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from autoscaler.core.fleet.lifecycle import State
from autoscaler.loop.service.wiring import build_controller
from autoscaler.loop.tick.controller import Controller
from autoscaler.rates.reader import RateReader
from autoscaler.rates.static import ManualRates
from tests.chaos.report import record
from tests.kit.fleet import FixedPlanner, Load, converged, fleet_policy, infer_url

pytestmark = [pytest.mark.e2e, pytest.mark.chaos]

# An instance the new plan keeps, and a second (another server of `a`) that it has no slot for.
OLD = [("p3.8xlarge", [(0, "a", 20.0), (1, "b", 20.0)]), ("p3.2xlarge", [(0, "a", 20.0)])]
NEW = OLD[:1]


def _controller(policy: object, state: Path, shape: object) -> Controller:
    ctl = build_controller(policy, state)  # type: ignore[arg-type]
    ctl.deps.planner = FixedPlanner(shape)  # type: ignore[arg-type]
    ctl.deps.rates = RateReader(ManualRates({"a": 40.0, "b": 20.0}), 300)
    return ctl


def _tick_until(ctl: Controller, done: object, timeout: float) -> int:
    deadline, ticks, report = time.monotonic() + timeout, 0, None
    while time.monotonic() < deadline:
        report = ctl.tick()
        ticks += 1
        assert report.ok, report.error
        if done():  # type: ignore[operator]
            return ticks
        time.sleep(0.2)
    last = report.summary() if report else None
    raise AssertionError(f"timed out after {ticks} ticks; last tick {last}; records {ctl.store.open_records()}")


def _gateway_servers(ctl: Controller) -> set[str]:
    assert ctl.deps.gateway is not None
    return {s.name for s in ctl.deps.gateway.observe().servers.values()}


def test_a_fresh_state_file_adopts_the_fleet_under_load(
    tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("IGNITER_LOCK_DIR", str(tmp_path / "locks"))
    policy = fleet_policy(tmp_path, tiny_model_dir, ["a", "b"], drain_timeout_s=2)
    old = _controller(policy, tmp_path / "state.sqlite", OLD)
    new: Controller | None = None
    loads = [Load(infer_url(policy, w), threads=2, pace_s=0.1) for w in ("a", "b")]  # about 40 req/s
    try:
        _tick_until(old, lambda: converged(old), 40)
        before = _gateway_servers(old)
        assert len(before) == 3
        old.store.close()  # the leader stops; its state file is lost to the new one
        for load in loads:
            load.start()
            load.wait_for(20)
        new = _controller(policy, tmp_path / "fresh.sqlite", NEW)
        first = new.tick()
        assert first.ok, first.error
        deleted = [op for op in first.gateway.ops if op.startswith("del ")] if first.gateway else []
        assert deleted == [], f"the first tick of a fresh state file deleted gateway servers: {deleted}"
        assert new.store.history() and all(h["to"] != "terminating" for h in new.store.history())
        ticks = 1 + _tick_until(new, lambda: converged(new) and len(new.deps.provider.list_instances()) == 1, 20)
        for load in loads:
            load.close()
        history = new.store.history()
    finally:
        for load in loads:
            load.close()
        for inst in old.deps.provider.list_instances():
            old.deps.provider.terminate(inst.id)
        if old.deps.gateway is not None:
            old.deps.gateway.stop()
        if new is not None:
            new.store.close()
    sent, failed = sum(x.sent for x in loads), sum(x.failed for x in loads)
    ended = [h for h in history if h["to"] == State.TERMINATING.value]
    drained = {(h["slot"], h["attempt"]) for h in history if h["reason"] == "drain"}
    print(f"fresh state file: {ticks} ticks, {sent} requests sent, {failed} failed; ended {ended}")
    record("lost_state_file", ticks=ticks, sent=sent, failed=failed, terminated=len(ended))
    assert failed == 0, dict(sum((x.errors for x in loads), start=loads[0].errors.__class__()))
    assert len(ended) == 1, ended  # the instance the new plan has no slot for
    assert all((h["slot"], h["attempt"]) in drained for h in ended), f"terminated without a drain: {ended}"
