"""One leader per fleet, with real `igniter run` processes on one fleet in moto's EC2, each with its
own state file: the lease in moto's DynamoDB, or an OS lock on this host.

Each process signs its AWS requests with its own access key, so the calls it makes are counted at
the server (tests/kit/awscalls.py), in the order they arrived; IGNITER_CALL_LOG counts the calls
that passed each process's fence on its own side. Agents are not contacted (moto's 10.x addresses).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml

from autoscaler.fleet.base import TAG_SLOT
from tests.fleet.test_ec2 import LOW, WORKLOADS, fleet_instances, policy_file, setup_templates, tags
from tests.kit.awscalls import AwsCalls
from tests.kit.backends import Moto, free_port
from tests.kit.control import REPO
from tests.loop.test_service import Running, wait_for

pytestmark = pytest.mark.e2e


INTERVAL_S = 2.0
LEASE_S = 6.0
TABLE = "igniter-leases"
HIGH = {w["name"]: float(w["rate_rps"]) for w in WORKLOADS}
MID = {"alex": 900.0, "res": 500.0, "vgg": 250.0}
PEAK = {"alex": 2400.0, "res": 1200.0, "vgg": 600.0}


class Node:
    """One `igniter run` process with its own state file, access key and call log."""

    def __init__(self, name: str, policy: Path, tmp_path: Path, **env: str) -> None:
        home = tmp_path / name
        home.mkdir()
        self.name, self.key = name, f"AKIDNODE{name.upper()}"
        self.call_log = home / "calls.jsonl"
        env |= {"AWS_ACCESS_KEY_ID": self.key, "IGNITER_CALL_LOG": str(self.call_log)}
        self.run = Running(policy, home / "state.sqlite", free_port(), env)

    def health(self) -> dict[str, Any]:
        return self.run.get("/healthz").json()

    def role(self) -> str | None:
        try:
            return str(self.health()["leader"]["role"])
        except Exception:
            return None

    def fenced_calls(self) -> list[dict[str, Any]]:
        if not self.call_log.exists():
            return []
        return [json.loads(line) for line in self.call_log.read_text().splitlines()]

    def metric(self, name: str) -> float:
        for line in self.run.get("/metrics").text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        raise AssertionError(f"no metric {name}")


@pytest.fixture()
def nodes() -> Iterator[list[Node]]:
    started: list[Node] = []
    yield started
    for node in started:
        if node.run.proc.poll() is None:
            node.run.proc.send_signal(signal.SIGCONT)
            node.run.proc.kill()
            node.run.proc.wait()


@pytest.fixture()
def aws(moto: Moto, tmp_path: Path) -> Iterator[AwsCalls]:
    setup_templates(moto)
    calls = AwsCalls(tmp_path / "moto-recording.jsonl")
    yield calls
    calls.close()


def lease_policy(tmp_path: Path, moto: Moto, kind: str) -> Path:
    path = policy_file(tmp_path, moto, interval_s=INTERVAL_S, settle_s=0)
    data = yaml.safe_load(path.read_text())
    if kind == "dynamodb":
        boto3.client("dynamodb", endpoint_url=moto.url, region_name="us-east-1").create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": "fleet", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "fleet", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        data["leader"] = {"kind": "dynamodb", "table": TABLE, "lease_s": LEASE_S}
    else:
        data["leader"] = {"kind": "local", "lock_dir": str(tmp_path / "locks")}
    path.write_text(yaml.safe_dump(data))
    return path


def set_rates(path: Path, rates: dict[str, float]) -> None:
    data = yaml.safe_load(path.read_text())
    data["workloads"] = [{**w, "rate_rps": rates[w["name"]]} for w in data["workloads"]]
    tmp = path.with_suffix(".tmp")
    tmp.write_text(yaml.safe_dump(data))
    os.replace(tmp, path)
    future = time.time() + 1  # a new mtime even within the same second: the reload check sees it
    os.utime(path, (future, future))


LAST: dict[str, Any] = {}


def matches_plan(node: Node, moto: Moto, rates: dict[str, float]) -> bool:
    """The fleet is exactly the node's current layout, planned for `rates` (its forecast: the policy's
    rates, as headroom is 0), with one instance a slot."""
    plan = node.run.get("/v1/plan").json()
    layout = plan.get("layout") or {}
    running = Counter(tags(i)[TAG_SLOT] for i in fleet_instances(moto))
    LAST.update(forecast=plan.get("forecast"), slots=[s["slot"] for s in layout.get("slots", [])], running=running)
    LAST.update(notes=plan.get("notes"), error=plan.get("error"))
    if not layout or plan.get("forecast") != rates:
        return False
    return sorted(running) == sorted(LAST["slots"]) and max(running.values()) == 1


def converge(node: Node, moto: Moto, rates: dict[str, float], what: str, still: Node | None = None) -> None:
    """Wait until the fleet matches `node`'s plan for `rates`; with `still`, that process must stay a
    standby (and `node` alive) at every look until then."""

    def check() -> bool:
        if still is not None:
            assert still.role() == "standby" and node.run.proc.poll() is None, f"{still.name} left standby"
        return matches_plan(node, moto, rates)

    try:
        wait_for(check, 90, what)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; last seen: {LAST}; log tail: {node.run.text()[-3000:]}") from None


def start_pair(policy: Path, tmp_path: Path, nodes: list[Node], **leader_env: str) -> tuple[Node, Node]:
    leader = Node("a", policy, tmp_path, **leader_env)
    nodes.append(leader)
    wait_for(lambda: leader.role() == "leader", 60, "the first process to lead")
    standby = Node("b", policy, tmp_path)
    nodes.append(standby)
    wait_for(lambda: standby.role() == "standby", 60, "the second process to stand by")
    return leader, standby


def mutating(aws: AwsCalls, node: Node) -> list[int]:
    """Positions, in server arrival order, of the node's mutating EC2 calls."""
    return [i for i, c in enumerate(aws.calls()) if c.key == node.key and c.service == "ec2" and c.mutating]


def takeover_s(standby: Node, timeout: float) -> float:
    start = time.monotonic()
    wait_for(lambda: standby.role() == "leader", timeout, "the standby to take over")
    return time.monotonic() - start


@pytest.fixture(params=["dynamodb", "local"])
def pair(
    request: pytest.FixtureRequest, moto: Moto, aws: AwsCalls, tmp_path: Path, nodes: list[Node]
) -> tuple[str, Path, Node, Node]:
    """(lease kind, policy, leader, standby): two `igniter run` processes on one fleet, the first
    leading; moto's recording (`aws`) begins before either starts."""
    policy = lease_policy(tmp_path, moto, request.param)
    return (request.param, policy, *start_pair(policy, tmp_path, nodes))


def test_standby_makes_no_call_while_the_leader_works(
    moto: Moto, aws: AwsCalls, pair: tuple[str, Path, Node, Node]
) -> None:
    kind, policy, leader, standby = pair
    assert "standby:" in standby.run.text() and "acts on nothing" in standby.run.text()
    health = standby.health()
    assert health["status"] == "standby" and health["leader"]["holder"].split(":")[1] == str(leader.run.proc.pid)
    assert standby.metric("igniter_leader") == 0.0 and leader.metric("igniter_leader") == 1.0
    # rates change three times (dynamodb: through several renewals of the lease, a lease and more) or
    # twice (local): the leader brings the fleet to each plan in turn, and all the while the standby
    # stays still
    schedule = [HIGH, MID, LOW, PEAK] if kind == "dynamodb" else [MID, LOW]
    for rates in schedule:
        set_rates(policy, rates)
        converge(leader, moto, rates, "the fleet to match the leader's plan", still=standby)
    assert mutating(aws, standby) == [] and standby.fenced_calls() == []
    assert 0 < len(mutating(aws, leader)) <= len(leader.fenced_calls())  # every one went through the fence
    assert {c["token"] for c in leader.fenced_calls()} == {1}


def test_standby_takes_over_from_a_killed_leader(moto: Moto, aws: AwsCalls, pair: tuple[str, Path, Node, Node]) -> None:
    kind, policy, leader, standby = pair
    converge(leader, moto, HIGH, "the first fleet", still=standby)  # for the new leader to find by its tags
    assert mutating(aws, standby) == [] and {c["token"] for c in leader.fenced_calls()} == {1}
    leader.run.proc.kill()  # kill -9: no release, the lease must run out (dynamodb) or the lock go
    leader.run.proc.wait()
    took = takeover_s(standby, LEASE_S + INTERVAL_S + 30)
    bound = (LEASE_S if kind == "dynamodb" else 0.0) + INTERVAL_S
    print(f"\ntakeover after kill -9 ({kind}): {took:.2f} s (bound {bound} s)")
    assert took <= bound, f"took over after {took:.1f} s, more than lease_s + one tick ({bound} s)"
    assert "leader:" in standby.run.text() and standby.metric("igniter_leader") == 1.0
    set_rates(policy, PEAK)
    converge(standby, moto, PEAK, "the new leader to converge from the tags")
    assert any(c["token"] == 2 for c in standby.fenced_calls())
    running = Counter(tags(i)[TAG_SLOT] for i in fleet_instances(moto))
    assert max(running.values()) == 1  # no slot was launched twice
    assert "Traceback" not in standby.run.text()


@pytest.mark.parametrize("kind", ["dynamodb", "local"])
def test_a_paused_leader_makes_no_call_after_the_new_leaders_first(
    moto: Moto, aws: AwsCalls, tmp_path: Path, nodes: list[Node], kind: str
) -> None:
    """The leader is paused in the middle of a tick, between planning launches and making them
    (its act step sleeps 3 s: the slow_act fault point), and resumed after the new leader acted."""
    policy = lease_policy(tmp_path, moto, kind)
    leader, standby = start_pair(policy, tmp_path, nodes, IGNITER_FAULT="slow_act", IGNITER_FAULT_SLEEP_S="3")
    converge(leader, moto, HIGH, "the first fleet")
    layouts = leader.run.text().count("new layout")
    set_rates(policy, PEAK)  # work that only a leader may do
    wait_for(lambda: leader.run.text().count("new layout") > layouts, 30, "the leader to plan the launches")
    leader.run.proc.send_signal(signal.SIGSTOP)  # now asleep in act, its launches not made yet
    if kind == "local":
        # the OS lock belongs to the paused process as long as it lives: nobody takes over. The
        # standby tries the lock three times a tick, and would take it at its first try once free:
        # three ticks are nine tries.
        time.sleep(3 * INTERVAL_S)
        assert standby.role() == "standby" and mutating(aws, standby) == []
        leader.run.proc.send_signal(signal.SIGCONT)
        converge(leader, moto, PEAK, "the resumed leader to carry on")
        assert mutating(aws, standby) == [] and standby.fenced_calls() == [] and standby.role() == "standby"
        return
    took = takeover_s(standby, LEASE_S + INTERVAL_S + 30)
    print(f"\ntakeover after SIGSTOP ({kind}): {took:.2f} s (bound {LEASE_S + INTERVAL_S} s)")
    assert took <= LEASE_S + INTERVAL_S, f"took over after {took:.1f} s"
    wait_for(lambda: mutating(aws, standby), 60, "the new leader's first mutating call")
    first_new = mutating(aws, standby)[0]
    resumed = time.time()
    leader.run.proc.send_signal(signal.SIGCONT)  # wakes up past its term, about to launch
    refused = re.compile(r"launch prod-\S+ refused: not the leader")
    wait_for(lambda: refused.search(leader.run.text()), 30, "the old leader's fence to refuse its launches")
    wait_for(lambda: leader.role() == "standby", 30, "the old leader to see it lost the lease")
    converge(standby, moto, PEAK, "the new leader to converge")
    time.sleep(3 * INTERVAL_S)  # ticks the old leader might have made, had its fence let it
    late = [i for i in mutating(aws, leader) if i > first_new]
    assert late == [], f"the old leader made {len(late)} mutating call(s) after the new leader's first"
    assert all(c["token"] == 1 and c["t"] < resumed for c in leader.fenced_calls())  # none passed after
    # its lease thread learns who holds the lease now. The standby line's reason varies: SIGSTOP
    # may land between a renewal's reply and its grant, and the line then names the run-out term.
    new_owner = standby.health()["leader"]["owner"]
    wait_for(lambda: leader.health()["leader"]["holder"] == new_owner, 30, "the old leader to name the new holder")
    assert "standby:" in leader.run.text()
    assert leader.metric("igniter_leader") == 0.0


def once(policy: Path, state: Path, key: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AWS_ACCESS_KEY_ID": key}
    cmd = [sys.executable, "-m", "autoscaler", "run", str(policy), "--once", "--state", str(state)]
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("kind", ["dynamodb", "local"])
def test_once_acts_only_as_the_leader(moto: Moto, aws: AwsCalls, tmp_path: Path, nodes: list[Node], kind: str) -> None:
    policy = lease_policy(tmp_path, moto, kind)
    leader = Node("a", policy, tmp_path)
    nodes.append(leader)
    converge(leader, moto, HIGH, "the first fleet")
    set_rates(policy, PEAK)
    started = time.monotonic()
    standby = once(policy, tmp_path / "once.sqlite", "AKIDONCE")
    assert standby.returncode == 0, standby.stderr
    assert "standby:" in standby.stderr and "this --once run did nothing" in standby.stderr
    assert [c for c in aws.calls() if c.key == "AKIDONCE" and c.service == "ec2" and c.mutating] == []
    if kind == "dynamodb":  # it waited for the leader's next renewal, not a whole lease
        assert time.monotonic() - started < LEASE_S + 10
    assert leader.run.stop() == 0  # SIGTERM: the leader gives the lease up as it exits
    set_rates(policy, {w: 1.5 * r for w, r in PEAK.items()})  # work for the next --once
    lead = once(policy, tmp_path / "once.sqlite", "AKIDONCE")
    assert lead.returncode == 0 and "tick 1:" in lead.stderr, lead.stderr
    assert [c for c in aws.calls() if c.key == "AKIDONCE" and c.service == "ec2" and c.mutating]
    again = once(policy, tmp_path / "once.sqlite", "AKIDONCE")  # and --once released it in turn
    assert again.returncode == 0 and "tick 2:" in again.stderr, again.stderr


def test_a_missing_lease_table_exits_2_before_anything(moto: Moto, aws: AwsCalls, tmp_path: Path) -> None:
    path = policy_file(tmp_path, moto)
    data = yaml.safe_load(path.read_text())
    data["leader"] = {"kind": "dynamodb", "table": "no-such-table"}
    path.write_text(yaml.safe_dump(data))
    serve = [sys.executable, "-m", "autoscaler", "run", str(path), "--no-status", "--state", str(tmp_path / "s.sqlite")]
    runs = [
        once(path, tmp_path / "s.sqlite", "AKIDNOTABLE"),
        subprocess.run(serve, cwd=REPO, capture_output=True, text=True, timeout=120),
    ]
    for done in runs:
        assert done.returncode == 2, done.stderr
        assert f"{path}: leader.table: DynamoDB table 'no-such-table': ResourceNotFoundException" in done.stderr
        assert "Traceback" not in done.stderr
    assert [c for c in aws.calls() if c.service == "ec2" and c.mutating] == []
