"""Gateway hosts over SSH: OpenSSH's sshd on 127.0.0.1 stands for a gateway host, where haproxy
runs in master-worker mode as Terraform's igniter-gateway.service runs it; the autoscaler drives
its runtime API through SSH (host key pinned) and `socat`, never through a network admin port."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from autoscaler.config.policy import AgentsConfig, GatewayConfig
from autoscaler.core.layout.layout_types import PlannedServer
from autoscaler.core.routing.routes import BackendSeen, GatewayView, Readiness, ServerSeen, desired_routes
from autoscaler.gateway.base import GatewayError, GatewaySpec, spec_from
from autoscaler.gateway.config import Paths, render
from autoscaler.gateway.remote import HostKeyPin, RemoteGateway, discover_hosts, merge
from autoscaler.transport.ssh import SshTransport
from tests.gateway.test_haproxy import addr, stubs  # noqa: F401  (fixture)
from tests.kit import web
from tests.kit.agent import free_port, wait_until
from tests.kit.backends import Moto, Sshd, launch_image


@pytest.fixture()
def host(sshd: Sshd) -> Iterator[tuple[GatewayConfig, AgentsConfig]]:
    """A "gateway host": haproxy -W with the bootstrap configuration cloud-init writes."""
    remote = Path(tempfile.mkdtemp(prefix="igw-", dir="/tmp"))
    listen = f"127.0.0.1:{free_port()}"
    paths = Paths(socket=f"{remote}/admin.sock", state_file=f"{remote}/servers.state")
    (remote / "haproxy.cfg").write_text(
        "# igniter-spec bootstrap\n" + render(GatewaySpec(listen=listen, workloads=()), paths)
    )
    cmd = [
        "haproxy",
        "-W",
        "-D",
        "-f",
        f"{remote}/haproxy.cfg",
        "-p",
        f"{remote}/haproxy.pid",
        "-S",
        f"{remote}/master.sock",
    ]
    subprocess.run(cmd, check=True, capture_output=True, cwd=remote)
    wait_until(lambda: (remote / "admin.sock").exists(), 60, "the host's runtime socket")
    host_key = (sshd.dir / "host_ed25519.pub").read_text().split()
    cfg = GatewayConfig(
        kind="haproxy",
        listen=listen,
        hosts=["127.0.0.1"],
        host_key=" ".join(host_key[:2]),
        remote_dir=str(remote),
        check_interval_s=0.2,
    )
    agents = AgentsConfig(transport="ssh", user=sshd.user, key_file=str(sshd.key_file), port=sshd.port)
    try:
        yield cfg, agents
    finally:
        master = int((remote / "haproxy.pid").read_text().split()[0])
        subprocess.run(["kill", str(master)], check=False)
        wait_until(lambda: not Path(f"/proc/{master}").exists(), 60, "the host's haproxy to stop")


def server(name: str, address: str, rate: float) -> PlannedServer:
    return PlannedServer(
        name=name, workload="a", model="alexnet", gpu_index=0, index=0, batch=4, mps_percent=30.0,
        rate_rps=rate, predicted_latency_ms=5.0, predicted_throughput_rps=rate, model_dir="/m",
        max_queue_delay_ms=5.0, address=address,
    )  # fmt: skip


@pytest.mark.e2e
def test_a_gateway_host_is_driven_over_ssh(host: tuple[GatewayConfig, AgentsConfig], stubs: list) -> None:  # noqa: F811
    cfg, agents = host
    gw = RemoteGateway(cfg, SshTransport(agents, HostKeyPin(cfg.host_key or "")))  # type: ignore[arg-type]
    try:
        spec = spec_from(cfg, ["a", "b"])
        assert gw.ensure(spec) is True  # the bootstrap configuration is replaced, by a reload
        assert gw.ensure(spec) is False
        assert set(gw.observe().backends) == {"a", "b"}
        servers = (server("a-0", addr(stubs[0]), 300.0), server("a-1", addr(stubs[1]), 100.0))

        def routed() -> bool:
            """One routing round as the controller's gateway step makes it: add (weight 0), then
            weight once the host's checks pass; true once both serve."""
            view = gw.observe()
            routes = desired_routes(
                layout=None,
                applied={"s0": servers},
                readiness=Readiness(ready=frozenset({"a-0", "a-1"}), healthy=view.healthy()),
                draining=frozenset(),
            )
            _, errors = gw.route(routes, view)
            assert errors == []
            return view.serving() == {"a-0", "a-1"}

        wait_until(routed, 90, "both servers to serve (the host's checks, then weights)", poll=0.2)
        assert gw.observe().serving() == {"a-0", "a-1"}
        assert {s.name: s.weight for s in gw.observe().servers.values()} == {"a-0": 256, "a-1": 85}
        reply = web.post(f"http://{cfg.listen}/v2/models/a/infer", json={}, timeout=30)
        assert reply.status_code == 200
        gw.stop()
        assert gw.observe().servers == {}
    finally:
        gw.close()


@pytest.mark.e2e
def test_a_host_presenting_another_key_is_refused(host: tuple[GatewayConfig, AgentsConfig]) -> None:
    cfg, agents = host
    other = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
    gw = RemoteGateway(cfg, SshTransport(agents, HostKeyPin(other)))  # type: ignore[arg-type]
    with pytest.raises(GatewayError, match=r"gateway host 127\.0\.0\.1: .*host key mismatch") as err:
        gw.observe()
    assert not err.value.retryable
    gw.close()


@pytest.mark.unit
def test_views_of_several_hosts_merge_conservatively() -> None:
    def seen(weight: int, ok: bool = True, sessions: int = 0, admin: str = "ready") -> ServerSeen:
        return ServerSeen(
            workload="a", name="a-0", address="10.0.0.1:1", admin=admin, status="UP",  # type: ignore[arg-type]
            check_ok=ok, weight=weight, sessions=sessions, requests_total=10,
        )  # fmt: skip

    def view(*servers: ServerSeen) -> GatewayView:
        b = BackendSeen(workload="a", requests_total=100, errors_5xx=1, sessions=2, servers_up=1)
        return GatewayView({"a": b}, {("a", s.name): s for s in servers})

    both = merge([view(seen(256, sessions=1)), view(seen(256, sessions=2))])
    s = both.servers[("a", "a-0")]
    assert (s.weight, s.sessions, s.requests_total, s.check_ok) == (256, 3, 20, True) and both.serving() == {"a-0"}
    assert both.backends["a"].requests_total == 200 and both.backends["a"].errors_5xx == 2
    one_behind = merge([view(seen(256)), view(seen(0))])
    assert one_behind.servers[("a", "a-0")].weight == 0  # diffed again: every host gets its weight
    missing = merge([view(seen(256)), view()])
    assert missing.serving() == frozenset() and missing.servers[("a", "a-0")].weight == 0
    failing = merge([view(seen(256)), view(seen(256, ok=False))])
    assert failing.serving() == frozenset()
    draining = merge([view(seen(0, admin="drain")), view(seen(0, admin="ready", sessions=1))])
    assert draining.servers[("a", "a-0")].admin == "drain" and draining.servers[("a", "a-0")].sessions == 1


@pytest.mark.e2e
def test_gateway_hosts_are_discovered_by_tag(moto: Moto) -> None:
    import boto3

    ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=moto.url)
    image = launch_image(ec2)
    tags = [{"ResourceType": "instance", "Tags": [{"Key": "igniter:gateway", "Value": "prod"}]}]
    mine = ec2.run_instances(ImageId=image, MinCount=2, MaxCount=2, TagSpecifications=tags)["Instances"]
    other = [{"ResourceType": "instance", "Tags": [{"Key": "igniter:gateway", "Value": "staging"}]}]
    ec2.run_instances(ImageId=image, MinCount=1, MaxCount=1, TagSpecifications=other)
    found = discover_hosts("prod", "us-east-1", moto.url)()  # addresses only: nothing connects to 10.x here
    assert sorted((h.id, h.address) for h in found) == sorted((i["InstanceId"], i["PrivateIpAddress"]) for i in mine)
    ec2.terminate_instances(InstanceIds=[mine[0]["InstanceId"]])
    assert [h.id for h in discover_hosts("prod", "us-east-1", moto.url)()] == [mine[1]["InstanceId"]]


class _Gate:
    def __init__(self, pinned: set[str]) -> None:
        self.pinned, self.seen = pinned, []  # type: ignore[var-annotated]

    def refresh(self, instances) -> None:  # type: ignore[no-untyped-def]
        self.seen.append(sorted(i.id for i in instances))

    def reachable(self, instance) -> bool:  # type: ignore[no-untyped-def]
        return instance.id in self.pinned


class _Shell:
    def __init__(self) -> None:
        self.hosts: list[str] = []

    def run(self, instance, command, stdin, what="command"):  # type: ignore[no-untyped-def]
        self.hosts.append(instance.id)
        return (
            0,
            "\n> # pxname,svname,status,req_tot\nwl_a,BACKEND,UP,0\n\n> 1\n# be_id be_name srv_id srv_name\n\n> ",
            "",
        )

    def close(self) -> None:
        return None


@pytest.mark.unit
def test_discovered_hosts_are_driven_only_once_their_host_keys_are_pinned() -> None:
    from autoscaler.fleet.base import Instance

    hosts = [
        Instance(id=i, instance_type="c6i.large", slot="gateway", state="running", launched_at=0.0, address=a)
        for i, a in (("i-a", "10.0.1.5"), ("i-b", "10.0.1.6"))
    ]
    gate, shell = _Gate({"i-b"}), _Shell()
    gw = RemoteGateway(GatewayConfig(kind="haproxy", discover=True), shell, lambda: hosts, gate)  # type: ignore[arg-type]
    gw.observe()
    assert gate.seen == [["i-a", "i-b"]] and set(shell.hosts) == {"i-b"}  # i-a booting: its keys not pinned yet
    gate.pinned = set()
    with pytest.raises(GatewayError, match="no gateway host to drive yet"):
        gw.observe()
