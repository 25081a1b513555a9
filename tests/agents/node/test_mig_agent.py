"""A real `igniter-agent run --no-gpu --fake-mig a100-80gb --fake-gpus 2` behind a real HAProxy
gateway: cut, serve, re-cut GPU 0 under load with a stand-in on GPU 1 (0 failed requests), then
kill -9 the agent in the middle of a re-cut, restart it, and check that it adopted its slices and
left no orphan slice and no orphan process. A slice it did not create is never touched."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agents.node.group import process_name
from agents.node.mig_fake import FAKE_FILE, FakeMig
from autoscaler.core.routing.routes import AddServer, DelServer, SetState, SetWeight
from autoscaler.gateway.base import GatewaySpec
from autoscaler.gateway.local import LocalHaproxy
from tests.kit import web
from tests.kit.agent import Agent, alive, free_port, wait_until
from tests.kit.fleet import Load

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


class Node:
    """The agent under test, the gateway in front of it, and the assignment it holds."""

    def __init__(self, tmp_path: Path, model_dir: Path) -> None:
        self.tmp_path, self.model_dir = tmp_path, model_dir
        self.state = tmp_path / "state"
        self.state.mkdir()
        fake = FakeMig.make(self.state / FAKE_FILE, "a100-80gb", gpus=2)
        self.foreign = fake.create(1, "1g.10gb", 6)  # someone else's slice: never ours to destroy
        self.agent = self.start_agent()
        self.gateway = LocalHaproxy(tmp_path / "gw")
        self.spec = GatewaySpec(listen=f"127.0.0.1:{free_port()}", workloads=("a", "b"), check_interval_s=0.2)
        self.gateway.ensure(self.spec)
        self.servers: dict[str, dict[str, Any]] = {}

    def start_agent(self) -> Agent:
        return Agent(self.state, "--fake-mig", "a100-80gb", "--fake-gpus", "2", "--backoff-initial", "0.2")

    def server(self, name: str, workload: str, gpu: int, profile: str, start: int) -> dict[str, Any]:
        spec = {"name": name, "workload": workload, "model_dir": str(self.model_dir), "batch": 8}
        return spec | {
            "mps_percent": 100.0,
            "port": free_port(),
            "gpu_index": gpu,
            "mig_profile": profile,
            "mig_start": start,
            "drain_timeout_s": 10,
        }

    def assign(self, *servers: dict[str, Any], wait: float | None = 60.0) -> None:
        self.servers = {s["name"]: s for s in servers}
        self.agent.apply(list(servers), wait=wait)

    def route(self, *names: str) -> None:
        """Put these servers in the gateway at full weight, once their health checks pass."""
        self.gateway.apply(
            [AddServer(self.servers[n]["workload"], n, f"127.0.0.1:{self.servers[n]['port']}") for n in names]
        )
        wait_until(lambda: set(names) <= self.gateway.observe().healthy(), 20, f"{names} healthy in the gateway")
        self.gateway.apply([SetWeight(self.servers[n]["workload"], n, 256) for n in names])

    def unroute(self, workload: str, *names: str) -> None:
        """Drain in the gateway first (no new requests), then delete once idle."""
        self.gateway.apply([SetState(workload, n, "drain") for n in names])

        def idle() -> bool:
            view = self.gateway.observe()
            return all(view.servers[(workload, n)].sessions == 0 for n in names)

        wait_until(idle, 20, "sessions to end")

    def forget(self, workload: str, *names: str) -> None:
        wait_until(lambda: self.gateway.apply([DelServer(workload, n) for n in names]) == [], 20, "deletes")

    def slices(self) -> dict[int, set[tuple[str, int]]]:
        fake = FakeMig(self.state / FAKE_FILE)
        return {g: {(s.profile, s.start) for s in fake.slices(g)} for g in (0, 1)}

    def mig_status(self) -> dict[str, Any]:
        return self.agent.status()["mig"]

    def close(self) -> None:
        self.agent.close()
        self.gateway.stop()


@pytest.fixture
def node(tmp_path: Path, tiny_model_dir: Path) -> Iterator[Node]:
    running = Node(tmp_path, tiny_model_dir)
    yield running
    running.close()


def _server_pids(state: Path) -> set[int]:
    """Every inference server process started for this state directory (alive ones)."""
    out = set()
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmd = (proc / "cmdline").read_bytes()
            except OSError:
                continue
            if b"agents.server" in cmd and str(state).encode() in cmd and alive(int(proc.name)):
                out.add(int(proc.name))
    return out


def test_re_cut_under_load_then_kill_9_mid_re_cut_and_adopt(node: Node) -> None:
    # generation 1: GPU 0 cut 3g@0 (a) + 3g@4 (b)
    a0, b0 = node.server("a-0", "a", 0, "3g.40gb", 0), node.server("b-0", "b", 0, "3g.40gb", 4) | {"processes": 2}
    node.assign(a0, b0)
    node.route("a-0", "b-0")
    _two_processes_share_the_slice_and_the_port(node, b0)
    assert node.slices() == {0: {("3g.40gb", 0), ("3g.40gb", 4)}, 1: {("1g.10gb", 6)}}
    gpu0 = node.mig_status()["gpus"][0]
    assert gpu0["mig_mode"] == "enabled" and {
        (s["profile"], s["start"], tuple(s["servers"])) for s in gpu0["slices"]
    } == {
        ("3g.40gb", 0, ("a-0",)),
        ("3g.40gb", 4, ("b-0",)),
    }
    uuid_of = {s["servers"][0]: s["uuid"] for s in gpu0["slices"]}
    env = node.agent.servers()["a-0"]["gpu_env"]  # a forked server's own: its /proc/PID/environ is the zygote's
    assert env["CUDA_VISIBLE_DEVICES"] == uuid_of["a-0"]
    assert env["CUDA_MPS_PIPE_DIRECTORY"].endswith("/mps/g0i1/pipe")

    # paced (4 x 20 req/s at most): a closed loop spent its CPU on requests while the re-cut's
    # servers started; every request still goes through the re-cut, and none may fail
    load = Load(f"http://{node.spec.listen}/v2/models/a/infer", threads=4, pace_s=0.05).start()
    try:
        load.wait_for(50)
        # re-cut GPU 0 to 4g@0 (a): first a stand-in on GPU 1's free units, then the old slice goes
        stand_in = node.server("a-s", "a", 1, "3g.40gb", 0)
        node.assign(a0, b0, stand_in)
        node.route("a-s")
        node.unroute("a", "a-0")
        a1 = node.server("a-1", "a", 0, "4g.40gb", 0)
        node.assign(b0, stand_in, a1)  # a-0 drains, 3g@0 is destroyed, 4g@0 made, a-1 starts
        node.forget("a", "a-0")
        node.route("a-1")
        node.unroute("a", "a-s")
        node.assign(b0, a1)
        node.forget("a", "a-s")
        wait_until(lambda: node.slices()[1] == {("1g.10gb", 6)}, 30, "the stand-in slice to go")
        load.wait_for(load.sent + 50)
    finally:
        load.close()
    print(f"re-cut under load: {load.ok} requests ok, {load.failed} failed")  # shown with -s
    assert load.failed == 0, load.errors
    assert load.ok > 100
    assert node.slices() == {0: {("4g.40gb", 0), ("3g.40gb", 4)}, 1: {("1g.10gb", 6)}}

    # re-cut again, and kill -9 the agent in the middle: 4g@0 gone, 2g@0 + 2g@2 not made yet
    FakeMig.inject(node.state / FAKE_FILE, "create", "insufficient_resources", times=10_000)
    a2, a3 = node.server("a-2", "a", 0, "2g.20gb", 0), node.server("a-3", "a", 0, "2g.20gb", 2)
    node.assign(b0, a2, a3, wait=None)
    wait_until(lambda: ("4g.40gb", 0) not in node.slices()[0], 30, "4g@0 to be destroyed")
    wanted = {
        ("create", "2g.20gb@0 on GPU 0", "insufficient_resources"),
        ("create", "2g.20gb@2 on GPU 0", "insufficient_resources"),
    }

    def errors() -> set[tuple[str, str, str]]:
        return {(e["op"], e["slice"], e["code"]) for e in node.mig_status()["errors"]}

    wait_until(lambda: errors() == wanted, 30, "the create errors in status")
    node.agent.proc.kill()
    node.agent.proc.wait(timeout=10)
    wait_until(lambda: not _server_pids(node.state), 15, "no server to outlive its agent")
    _clear_faults(node.state / FAKE_FILE)
    node.agent.log.close()
    node.agent = node.start_agent()
    node.agent.generation = 3
    wait_until(lambda: _all_ready(node, {"b-0", "a-2", "a-3"}), 60, "the restarted agent to serve generation 4")
    assert node.slices() == {0: {("3g.40gb", 4), ("2g.20gb", 0), ("2g.20gb", 2)}, 1: {("1g.10gb", 6)}}
    status = node.agent.status()
    owned = {(s["profile"], s["start"]): s for g in status["mig"]["gpus"] for s in g["slices"]}
    assert owned[("3g.40gb", 4)]["uuid"] == uuid_of["b-0"]  # adopted, not re-made
    assert not owned[("1g.10gb", 6)]["owned"] and owned[("1g.10gb", 6)]["uuid"] == node.foreign.uuid
    assert _server_pids(node.state) == {p for s in status["servers"] for p in s["pids"]}  # no orphan process
    assert status["mig"]["errors"] == []


def _all_ready(node: Node, names: set[str]) -> bool:
    servers = node.agent.servers()
    return set(servers) == names and all(s["state"] == "ready" for s in servers.values())


def _clear_faults(path: Path) -> None:
    import json

    doc = json.loads(path.read_text())
    doc["faults"] = []
    path.write_text(json.dumps(doc))


def _two_processes_share_the_slice_and_the_port(node: Node, spec: dict[str, Any]) -> None:
    """`processes: 2`: two server processes in one slice, one port (SO_REUSEPORT), one status entry."""
    import json

    from tests.kit.fleet import BODY

    [entry] = [s for s in node.agent.status()["servers"] if s["name"] == spec["name"]]
    assert entry["processes"] == 2 and len(entry["pids"]) == 2 and entry["state"] == "ready"
    [uuid] = {s["uuid"] for g in node.mig_status()["gpus"] for s in g["slices"] if spec["name"] in s["servers"]}
    names = [process_name(spec["name"], i) for i in range(2)]
    copies = [json.loads((node.state / "run" / f"{name}.stats.json").read_text()) for name in names]
    assert sorted(c["pid"] for c in copies) == sorted(entry["pids"])
    assert [c["gpu_env"]["CUDA_VISIBLE_DEVICES"] for c in copies] == [uuid, uuid]
    for _ in range(60):  # a new connection each: the kernel spreads them over both processes
        assert web.post(f"http://127.0.0.1:{spec['port']}/v2/models/b/infer", json=BODY).status_code == 200

    def served() -> list[int]:
        files = [node.state / "run" / f"{spec['name']}{suffix}.stats.json" for suffix in ("", "~1")]
        return [json.loads(f.read_text()).get("requests_total", 0) for f in files]

    wait_until(lambda: sum(served()) >= 60, 10, "both stats files to count the requests")
    assert min(served()) > 0, served()
