"""`igniter run --advisory` against moto's server, beside a real leader: every AWS request the
server receives is attributed to the access key that signed it (tests/kit/awscalls.py), so what
the advisory process called is counted at the server, not by the code under test. It makes read
calls only (no EC2, SQS or DynamoDB mutation: no launch, no lease, not even a ReceiveMessage on the
interruption queue), and publishes on /v1/advice and in its log the launches it would make once
the rates rise and the leader is gone, while the fleet stays as it was."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import boto3
import httpx
import pytest
import yaml

from agents.samples import TINY, write
from autoscaler.config.policy import load_policy
from autoscaler.loop.service.wiring import make_provider, make_transport
from autoscaler.transport.base import parse_status
from tests.fleet.test_ec2 import fleet_instances
from tests.kit import web
from tests.kit.awscalls import AwsCalls
from tests.kit.backends import Moto, free_port
from tests.kit.control import REPO
from tests.loop.test_health_e2e import policy as health_policy
from tests.loop.test_leader_e2e import HIGH, PEAK, Node, aws, converge, lease_policy, nodes, set_rates  # noqa: F401
from tests.loop.test_service import Running, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
KEY = "AKIDADVISORY"


class Advisor:
    def __init__(self, policy: Path, tmp_path: Path, state: Path | None = None) -> None:
        self.url = f"http://127.0.0.1:{free_port()}"
        self.log = tmp_path / "advisory.log"
        cmd = [sys.executable, "-m", "autoscaler", "run", str(policy), "--advisory"]
        cmd += ["--state", str(state or tmp_path / "advisory.sqlite"), "--status-port", self.url.rsplit(":", 1)[1]]
        env = {**os.environ, "AWS_ACCESS_KEY_ID": KEY}
        self.proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=open(self.log, "wb"))

    def get(self, path: str) -> httpx.Response:
        return web.get(self.url + path, timeout=5)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=30)


def test_advisory_reads_and_advises_and_changes_nothing(
    moto: Moto,
    aws: AwsCalls,  # noqa: F811  (the fixture, from test_leader_e2e)
    tmp_path: Path,
    nodes: list[Node],  # noqa: F811
) -> None:
    queue = boto3.client("sqs", endpoint_url=moto.url, region_name="us-east-1").create_queue(QueueName="notices")
    policy = lease_policy(tmp_path, moto, "dynamodb")
    data = yaml.safe_load(policy.read_text())
    data["scaling"]["spot"] = {"interruption_queue": queue["QueueUrl"]}
    policy.write_text(yaml.safe_dump(data))
    leader = Node("a", policy, tmp_path)
    nodes.append(leader)
    converge(leader, moto, HIGH, "the leader's fleet")
    advisor = Advisor(policy, tmp_path)
    try:
        agreed = wait_for(
            lambda: (a := advisor.get("/v1/advice").json()).get("tick", 0) >= 2 and a, 60, "the advisor's advice"
        )
        assert agreed["counts"]["launch"] == 0 and agreed["counts"]["terminate"] == 0, agreed  # it agrees
        assert advisor.get("/v1/leader").json()["role"] == "advisory"
        leader.run.stop()  # gives the lease up: nobody leads now, and the advisor must not take it
        fleet = sorted(i["InstanceId"] for i in fleet_instances(moto))
        set_rates(policy, PEAK)
        advice = wait_for(
            lambda: (a := advisor.get("/v1/advice").json())["counts"]["launch"] > 0 and a, 60, "launches advised"
        )
        tick = advice["tick"]
        wait_for(lambda: advisor.get("/v1/advice").json()["tick"] >= tick + 2, 30, "two more advisory ticks")
        again = advisor.get("/v1/advice").json()
        assert again["counts"]["launch"] == advice["counts"]["launch"], "advised again: nothing was launched"
        assert advisor.get("/healthz").status_code == 200
        assert "igniter_leader 0.0" in advisor.get("/metrics").text
        assert sorted(i["InstanceId"] for i in fleet_instances(moto)) == fleet
    finally:
        assert advisor.stop() == 0
    mine = [c for c in aws.calls() if c.key == KEY]
    assert [c for c in mine if c.mutating] == [], [c for c in mine if c.mutating]
    assert {c.service for c in mine} == {"ec2"} and any(c.action == "DescribeInstances" for c in mine)
    text = advisor.log.read_text()
    assert "advice: would launch prod-p3" in text and "leader:" not in text  # no lease taken, none asked for


def agent_generations(policy_path: Path, state: Path) -> dict[str, int | None]:
    """Each local instance's agent: the assignment generation it holds (read as the autoscaler does)."""
    policy = load_policy(policy_path)
    provider, (transport, _) = make_provider(policy, state), make_transport(policy)
    try:
        return {i.id: parse_status(transport.status(i)).assignment_generation for i in provider.list_instances()}
    finally:
        transport.close()


def test_advisory_beside_a_local_fleet_tells_no_agent_anything(tmp_path: Path) -> None:
    """Real agents, servers and haproxy: after the leader stops, the advisor advises more servers
    and new assignments, and no agent's assignment changes (no `igniter-agent apply` was run)."""
    gateway = free_port()
    path = health_policy(tmp_path, tmp_path / "model", gateway)
    write(tmp_path / "model", TINY)
    state = tmp_path / "state.sqlite"
    leader = Running(path, state, free_port())
    advisor: Advisor | None = None
    try:
        wait_for(lambda: leader.get("/healthz").json()["status"] == "ok", 180, "the leader's fleet to serve")
        leader.stop()
        before = agent_generations(path, state)
        assert before and all(g for g in before.values()), before
        data = yaml.safe_load(path.read_text())
        # more than its one server carries (about 970 req/s): 400 it carried already, and an advisor that
        # adopts what runs (issue 51) rightly advised nothing for it
        data["workloads"][0]["min_rate_rps"] = data["workloads"][0]["rate_rps"] = 2500
        path.write_text(yaml.safe_dump(data))
        advisor = Advisor(path, tmp_path, state=tmp_path / "state-advisory.sqlite")
        advice = wait_for(
            lambda: (a := advisor.get("/v1/advice").json()).get("tick", 0) >= 3 and a["counts"]["assign"] and a,
            120,
            "assignments advised",
        )
        assert advice["counts"]["launch"] + advice["counts"]["assign"] > 0, advice
        deletes = [i for i in advice["actions"] if i["action"] == "gateway" and i["change"].startswith("del ")]
        assert deletes == [], f"it adopts the gateway's servers, and advises deleting none (issue 51): {deletes}"
        assert advisor.get("/v1/gateway").json()["ok"], "it reads the leader's gateway"
        assert agent_generations(path, state) == before  # no agent was told anything
        assert web.get(f"http://127.0.0.1:{gateway}/v2/health/ready", timeout=5).status_code == 200
    finally:
        if advisor is not None:
            advisor.stop()
        leader.stop()
        down = [sys.executable, "-m", "autoscaler", "down", str(path), "--state", str(state)]
        subprocess.run(down, cwd=REPO, capture_output=True, timeout=120)
