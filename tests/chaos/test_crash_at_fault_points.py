"""kill -9 of `igniter run --once` at its fault points, against EC2 in moto's server mode: at
`after_launch` (RunInstances answered, nothing recorded) while scaling out and at
`after_terminate` (TerminateInstances sent, nothing recorded) while scaling in, the rates drawn at
random per trial (seeded). A scale-in retires its surplus once the new layout serves
(make-before-break), a run or two later: the faulty run is repeated (at most FAULTY_RUNS) until
the process dies at its point, so both points are reached in every trial (asserted); then two
clean runs. Counted: slots
with two instances (duplicates), running instances no live record of the state file claims
(orphans: the autoscaler would never retire them; a terminating record's instance still running
counts), tracebacks."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest
import yaml

from autoscaler.core.fleet.lifecycle import LIVE
from autoscaler.loop.state.store import Store
from tests.chaos.report import record, trials
from tests.fleet.test_ec2 import LOW, WORKLOADS, fleet_instances, policy_file, setup_templates, tags
from tests.kit.backends import Moto
from tests.kit.forkrun import ForkRunner, once

pytestmark = [pytest.mark.e2e, pytest.mark.chaos, pytest.mark.slow]
HIGH = {w["name"]: float(w["rate_rps"]) for w in WORKLOADS}
TRIALS = max(1, trials(1) // 4)  # each trial is six igniter runs or more: make chaos's 20 give 5
FAULTY_RUNS = 4


def _set_rates(path: Path, rates: dict[str, float]) -> None:
    data = yaml.safe_load(path.read_text())
    data["workloads"] = [{**w, "rate_rps": rates[w["name"]]} for w in data["workloads"]]
    path.write_text(yaml.safe_dump(data))


def _count(moto: Moto, state: Path) -> tuple[int, int]:
    running = fleet_instances(moto)
    slots = Counter(tags(i)["igniter:slot"] for i in running)
    store = Store(state)
    try:
        known = {r.instance_id for r in store.open_records() if r.state in LIVE}  # not terminating
    finally:
        store.close()
    return sum(n - 1 for n in slots.values()), sum(i["InstanceId"] not in known for i in running)


def test_kill_9_at_fault_points_leaves_no_duplicate_or_orphan(moto: Moto, forked: ForkRunner, tmp_path: Path) -> None:
    rng = random.Random(32)
    totals = Counter[str]()
    for n in range(TRIALS):
        moto.reset()
        setup_templates(moto)
        home = tmp_path / str(n)
        home.mkdir()
        path, state = policy_file(home, moto), home / "state.sqlite"
        scale = rng.choice([1.0, 1.25, 1.5])  # at least two slots: LOW (one) retires one or more
        for rates, fault in (({w: r * scale for w, r in HIGH.items()}, "after_launch"), (LOW, "after_terminate")):
            _set_rates(path, rates)
            for _ in range(FAULTY_RUNS):
                crashed = once(forked, path, state, fault)
                totals["tracebacks"] += crashed.stderr.count("Traceback")
                if crashed.returncode == -9:
                    totals[f"crashes_{fault}"] += 1
                    break
                assert crashed.returncode == 0, crashed.stderr
            for _ in range(2):
                again = once(forked, path, state)
                assert again.returncode == 0, again.stderr
                totals["tracebacks"] += again.stderr.count("Traceback")
            duplicates, orphans = _count(moto, state)
            totals["duplicates"] += duplicates
            totals["orphans"] += orphans
    record("crash_at_fault_points", trials=TRIALS, **totals)
    print(f"\nkill -9 at fault points over {TRIALS} trial(s): {dict(totals)}")
    assert totals["crashes_after_launch"] == TRIALS and totals["crashes_after_terminate"] == TRIALS
    assert totals["duplicates"] == 0 and totals["orphans"] == 0 and totals["tracebacks"] == 0
