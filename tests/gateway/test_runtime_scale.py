"""Issue 50 item 2: the gateway's runtime commands for a tick stay in one session, with no reload,
at 20,000 servers (a 2,000-instance fleet at ten servers an instance), through a real haproxy.

Before the session's input was written by a thread beside the reader, this deadlocked: haproxy
stops reading commands while its answers wait unread, and the answers to 60,000 commands outgrow
the socket's buffers, so the session timed out after its 10 s and nothing was routed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from autoscaler.core.routing.routes import AddServer, SetWeight
from autoscaler.gateway.base import GatewaySpec
from autoscaler.gateway.local import LocalHaproxy
from tests.kit.agent import free_port

pytestmark = pytest.mark.e2e

SERVERS = 20_000
WORKLOADS = tuple(f"w{i}" for i in range(400))  # 50 servers a backend


class Counted:
    """The gateway's runtime channel, counting the sessions it opens."""

    def __init__(self, inner: object) -> None:
        self.inner, self.sessions = inner, 0

    def __call__(self, data: bytes) -> bytes:
        self.sessions += 1
        return self.inner(data)  # type: ignore[operator]


@pytest.fixture()
def gateway(tmp_path: Path) -> Iterator[tuple[LocalHaproxy, GatewaySpec, Counted]]:
    gw = LocalHaproxy(tmp_path / "gw")
    # a slow health check: 20,000 checks every 0.2 s would be a load test of their own
    spec = GatewaySpec(listen=f"127.0.0.1:{free_port()}", workloads=WORKLOADS, check_interval_s=30)
    gw.ensure(spec)
    counted = Counted(gw.channel)
    gw.channel = counted  # type: ignore[assignment]
    yield gw, spec, counted
    gw.stop()


def test_twenty_thousand_servers_go_in_one_session_each_and_no_reload(
    gateway: tuple[LocalHaproxy, GatewaySpec, Counted],
) -> None:
    gw, spec, counted = gateway
    pid = gw.pid()
    adds = [
        AddServer(WORKLOADS[i % len(WORKLOADS)], f"s{i}", f"127.0.0.1:{20_000 + i % 1_000}") for i in range(SERVERS)
    ]
    assert gw.apply(adds) == []
    assert gw.apply([SetWeight(a.workload, a.name, 7) for a in adds]) == []
    assert counted.sessions == 2  # 60,000 commands in one connection, then 20,000 in one more
    assert gw.ensure(spec) is False and gw.pid() == pid  # the same spec: no reload
    view = gw.observe()
    assert len(view.servers) == SERVERS and {s.weight for s in view.servers.values()} == {7}
