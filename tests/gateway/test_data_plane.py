"""The data plane end to end: real haproxy on 127.0.0.1, real agents and inference servers (the
local provider), the real controller, real requests through the gateway.

- A workload split over two servers with planned rates 300 and 100 gets 75 % / 25 % of 3000
  requests, within 5 % (absolute), as counted by the servers themselves.
- kill -9 of one server under load: at most 0.5 % of requests fail (the gateway retries on the
  other server), the killed server leaves the pool, the next tick (its agent reports it not ready)
  takes its weight, and it comes back once it is ready again.
- tritonclient (HTTP; JSON and binary tensors) gets the outputs torch computes, through the gateway.
- GET /v1/gateway and /metrics show the servers, their weights, planned rates and counters.
- A plan change that moves a workload to a new instance and retires the old one fails none of
  2000+ concurrent requests (make-before-break through the gateway: drain, then stop), and the old
  server stays while a request it is answering is still open (the drain waits on sessions, not a
  tick): that request, held open across the drain, is answered.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

from autoscaler.loop.status.server import StatusServer, StatusState
from autoscaler.loop.tick.controller import Controller
from autoscaler.transport.base import parse_status
from tests.kit import openapi, web
from tests.kit.agent import load_scripted, wait_until
from tests.kit.fleet import (
    BODY,
    FixedPlanner,
    Load,
    converged,
    fleet_policy,
    infer_url,
    local_fleet,
    send,
    server_counts,
    shares,
    tick_until,
)

# the module's tests share one costly module-scoped fixture: under --dist loadgroup they run on one worker
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("test_data_plane")]


SPLIT = [("p3.8xlarge", [(0, "w", 300.0), (1, "w", 100.0)])]
# The load across a kill or a plan change: 8 threads of 33 requests/s at most. An unpaced closed
# loop spent its CPU on requests while the servers it waits for started (torch) on the same cores;
# the requests still span the whole change, and a kill fails the same few of them either way.
PACE_S = 0.03


@pytest.fixture(scope="module")
def split(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> Iterator[Controller]:
    tmp = tmp_path_factory.mktemp("split")
    policy = fleet_policy(tmp, tiny_model_dir, ["w"])
    with local_fleet(policy, tmp, SPLIT) as (ctl, _):
        tick_until(ctl, lambda: converged(ctl))
        yield ctl


def weights_by_rate(ctl: Controller) -> dict[str, float]:
    layout = ctl.store.current_layout()
    assert layout is not None
    return {s.name: s.rate_rps for _, s in layout.servers()}


def test_each_server_receives_its_planned_share(split: Controller) -> None:
    planned = shares({k: int(v) for k, v in weights_by_rate(split).items()})
    before = server_counts(split)
    load = send(infer_url(split.policy, "w"), 3000)
    assert load.failed == 0, load.errors

    def counted() -> dict[str, int] | None:  # servers publish their counters every half second
        after = server_counts(split)
        delta = {n: after[n] - before.get(n, 0) for n in planned}
        return delta if sum(delta.values()) >= load.ok >= 3000 else None

    got = shares(wait_until(counted, 10, "the servers to count every request"))
    print(f"shares over {load.sent} requests: got {got}, planned {planned}")
    for name, share in planned.items():
        assert abs(got[name] - share) <= 0.05, (got, planned)


def test_status_endpoint_shows_the_gateway(split: Controller) -> None:
    # its own traffic: under xdist this test may get a fixture no other test has sent requests to
    load = send(infer_url(split.policy, "w"), 3000)
    assert load.failed == 0, load.errors
    state = StatusState()
    state.publish(split, split.tick())
    server = StatusServer(state, 0).start()
    try:
        body = web.get(f"http://127.0.0.1:{server.port}/v1/gateway", timeout=5).json()
        metrics = web.get(f"http://127.0.0.1:{server.port}/metrics", timeout=5).text
        doc = web.get(f"http://127.0.0.1:{server.port}/openapi.json", timeout=5).json()
    finally:
        server.close()
    openapi.check(doc, "/v1/gateway", body)  # the description holds for a real haproxy's answer
    w = body["workloads"]["w"]
    assert body["ok"] and body["listen"] == split.policy.gateway.listen
    assert sorted(s["planned_rate_rps"] for s in w["servers"]) == [100.0, 300.0]
    assert sorted(s["weight"] for s in w["servers"]) == [85, 256]
    for s in w["servers"]:
        assert {"name", "address", "state", "weight", "planned_rate_rps", "requests_total", "current_sessions"} <= set(
            s
        )
        assert s["state"] == "ready" and s["address"].startswith("127.0.0.1:") and s["requests_total"] > 0
    assert w["requests_total"] >= 3000 and w["errors_5xx"] == 0 and "request_rate_rps" in w
    assert (
        "igniter_gateway_server_weight{server=" in metrics and 'igniter_gateway_requests_total{workload="w"}' in metrics
    )
    assert "igniter_gateway_up 1.0" in metrics


def test_tritonclient_gets_torchs_outputs_through_the_gateway(split: Controller, tiny_model_dir: Path) -> None:
    import tritonclient.http as triton

    client = triton.InferenceServerClient(url=split.policy.gateway.listen)
    assert client.is_server_live() and client.is_server_ready() and client.is_model_ready("w")
    assert client.get_model_metadata("w")["inputs"][0]["name"] == "x"
    x = np.random.default_rng(3).standard_normal((3, 8)).astype(np.float32)
    with torch.no_grad():
        want = load_scripted(tiny_model_dir)(torch.from_numpy(x)).numpy()
    for binary in (False, True):
        inp = triton.InferInput("x", list(x.shape), "FP32")
        inp.set_data_from_numpy(x, binary_data=binary)
        out = triton.InferRequestedOutput("y", binary_data=binary)
        result = client.infer("w", [inp], outputs=[out])
        np.testing.assert_allclose(result.as_numpy("y"), want, rtol=1e-5, atol=1e-6, err_msg=f"binary={binary}")
    with pytest.raises(Exception, match="unknown model"):
        client.infer("nope", [triton.InferInput("x", [1, 8], "FP32").set_data_from_numpy(x[:1])])


def test_kill_9_a_server_mid_load(split: Controller) -> None:
    ctl = split
    victim = max(weights_by_rate(ctl), key=lambda n: weights_by_rate(ctl)[n])  # the busier one
    load = Load(infer_url(ctl.policy, "w"), pace_s=PACE_S).start()
    try:
        load.wait_for(300)
        os.kill(_pid_of(ctl, victim), signal.SIGKILL)
        gone = wait_until(lambda: victim not in _serving(ctl), 10, f"{victim} to leave the pool", poll=0.02)
        left_at = load.sent
        # Tick once its agent has seen the crash: the restart waits 1 s before the server boots
        # again, so the tick reads the agent's word while the server is not ready (after the
        # gateway's check, which a restarted server may already pass by then, it could not).
        wait_until(lambda: _state_of(ctl, victim) != "ready", 10, f"{victim}'s agent to see the crash", poll=0.02)
        report = ctl.tick()
        assert report.ok and report.ready_servers == {"w": 1}, report.summary()  # its agent: not ready
        assert report.gateway is not None and f"set server w/{victim} weight 0" in report.gateway.ops, report.summary()
        assert _weight(ctl, victim) == 0 and victim not in _serving(ctl)  # only a later tick weights it again
        tick_until(ctl, lambda: victim in _serving(ctl), timeout=90)  # ready again: back in the pool
        load.wait_for(left_at + 1000)
    finally:
        load.close()
    print(f"kill -9: {load.failed} of {load.sent} requests failed")
    assert gone and load.sent >= 1300
    assert load.failed <= 0.005 * load.sent, (load.failed, load.sent, load.errors)
    assert _weight(ctl, victim) == 256


def _pid_of(ctl: Controller, name: str) -> int:
    for inst in ctl.deps.provider.list_instances():
        for s in parse_status(ctl.deps.transport.status(inst)).servers:
            if s.name == name and s.pid:
                return int(s.pid)
    raise AssertionError(f"no pid for {name}")


def _state_of(ctl: Controller, name: str) -> str | None:
    """The server's state as its agent reports it (ready, starting, ...)."""
    for inst in ctl.deps.provider.list_instances():
        for s in parse_status(ctl.deps.transport.status(inst)).servers:
            if s.name == name:
                return str(s.state)
    return None


def _serving(ctl: Controller) -> frozenset[str]:
    assert ctl.deps.gateway is not None
    return ctl.deps.gateway.observe().serving()


def _weight(ctl: Controller, name: str) -> int:
    assert ctl.deps.gateway is not None
    seen = ctl.deps.gateway.observe().server(name)
    assert seen is not None
    return seen.weight


def test_a_plan_change_fails_no_request(tmp_path: Path, tiny_model_dir: Path) -> None:
    # buffer_kb 16: a request whose body is larger reaches its server before the body is all sent
    policy = fleet_policy(tmp_path, tiny_model_dir, ["m"], drain_timeout_s=30, buffer_kb=16)
    with local_fleet(policy, tmp_path, [("p3.2xlarge", [(0, "m", 200.0)])]) as (ctl, planner):
        tick_until(ctl, lambda: converged(ctl))
        (old,) = _serving(ctl)
        old_slots = {i.slot for i in ctl.deps.provider.list_instances()}
        load = Load(infer_url(policy, "m"), threads=8, pace_s=PACE_S).start()
        held: HeldRequest | None = None
        try:
            load.wait_for(300)
            held = HeldRequest(policy.gateway.listen, "m")  # a session the old server holds until its body ends
            wait_until(lambda: _sessions(ctl, old) >= 1, 10, "the held request to reach the old server")
            assert isinstance(planner, FixedPlanner)
            planner.shape = [("p3.8xlarge", [(2, "m", 200.0)])]  # a new instance; the old one is surplus
            _tick_until_draining(ctl, old)
            for _ in range(2):  # a session still open: the drain waits (drain_timeout_s 30), the old server stays
                report = ctl.tick()
                assert report.gateway is not None and old in report.gateway.draining, report.summary()
                assert old_slots <= {i.slot for i in ctl.deps.provider.list_instances()} and _sessions(ctl, old) >= 1
            assert held.finish() == 200  # answered by the old server, after its drain began
            tick_until(ctl, lambda: converged(ctl) and old not in _serving(ctl) and _old_gone(ctl, old_slots))
            load.wait_for(max(2000, load.sent + 300))
        finally:
            if held is not None:
                held.close()
            load.close()
        history = [h["reason"] for h in ctl.store.history()]
        actions = [a["kind"] for a in ctl.store.actions()]
    print(
        f"plan change: {load.failed} of {load.sent} requests failed; a request held open {held.held_s if held else 0.0:.1f} s"
    )
    assert load.sent >= 2000 and load.failed == 0, (load.sent, load.failed, load.errors)
    assert "drain" in history and "scale_in" in history
    assert "drain" in actions and "terminate" in actions


def _tick_until_draining(ctl: Controller, name: str, timeout: float = 120.0) -> None:
    """Tick until the gateway step reports `name` draining (its replacement serves)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        report = ctl.tick()
        assert report.ok, report.error
        if report.gateway is not None and name in report.gateway.draining:
            return
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {name} to drain; last tick: {ctl.store.actions()[-4:]}")


def _sessions(ctl: Controller, name: str) -> int:
    assert ctl.deps.gateway is not None
    seen = ctl.deps.gateway.observe().server(name)
    return seen.sessions if seen is not None else 0


class HeldRequest:
    """One inference request through the gateway whose body is sent in two parts: the first is
    more than HAProxy's buffer, so HAProxy picks a server and opens a session on it; the session
    stays open until `finish` sends the rest (JSON whitespace) and reads the answer."""

    def __init__(self, listen: str, workload: str, pad: int = 48 * 1024) -> None:
        host, port = listen.rsplit(":", 1)
        body = json.dumps(BODY).encode()
        self.rest = b" " * 1024 + body[-1:]  # the closing brace last
        data = body[:-1] + b" " * pad + self.rest
        head = (
            f"POST /v2/models/{workload}/infer HTTP/1.1\r\nHost: {listen}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
        ).encode()
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.sock.sendall(head + data[: -len(self.rest)])
        self.opened = time.monotonic()
        self.held_s = 0.0

    def finish(self) -> int:
        """Send the rest of the body; the answer's HTTP status."""
        self.held_s = time.monotonic() - self.opened
        self.sock.sendall(self.rest)
        reply = self.sock.makefile("rb").readline().split()
        return int(reply[1])

    def close(self) -> None:
        self.sock.close()


def _old_gone(ctl: Controller, old_slots: set[str]) -> bool:
    time.sleep(0.1)
    return not old_slots & {i.slot for i in ctl.deps.provider.list_instances()}
