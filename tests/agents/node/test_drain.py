"""Make-before-break on the agent: a removed server drains (every accepted request answered) and is
never listed as a server again; an old and a new server of one workload run side by side."""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
import torch

from agents.node.daemon import server_changes
from agents.spec import ServerSpec
from tests.agents.server.test_drain import in_flight
from tests.kit.agent import (
    Agent,
    alive,
    free_port,
    load_scripted,
    port_open,
    server_argv,
    server_spec,
    wait_until,
)


def _infer(client: httpx.Client, port: int, workload: str, x: torch.Tensor) -> httpx.Response:
    body = {"inputs": [{"name": "x", "shape": list(x.shape), "datatype": "FP32", "data": x.flatten().tolist()}]}
    return client.post(f"http://127.0.0.1:{port}/v2/models/{workload}/infer", json=body, timeout=60)


def _outcome(client: httpx.Client, port: int, workload: str) -> str:
    """What one request met: served, refused (503 while draining, or no listener), or anything else."""
    try:
        reply = _infer(client, port, workload, torch.zeros(1, 3, 8, 8))
    except httpx.ConnectError:
        return "refused"
    except httpx.HTTPError as exc:  # a reset or an empty answer: a request lost, which must not happen
        return f"failed {type(exc).__name__}"
    if reply.status_code == 503 and "draining" in reply.json().get("error", ""):
        return "refused"
    return "served" if reply.status_code == 200 else f"failed {reply.status_code}"


@pytest.mark.e2e
def test_a_server_removed_with_64_requests_in_flight_answers_all_and_is_never_listed_again(
    agent: Agent, cnn_dir: Path
) -> None:
    spec = server_spec("old", cnn_dir, free_port(), batch=128, max_queue_delay_ms=3000.0)
    agent.apply([spec])
    pid, url = agent.servers()["old"]["pid"], f"http://127.0.0.1:{spec['port']}"
    xs = [torch.randn(1, 3, 8, 8) for _ in range(64)]
    client = httpx.Client(limits=httpx.Limits(max_connections=64))
    with ThreadPoolExecutor(64) as pool:
        futures = [pool.submit(_infer, client, spec["port"], "old-w", x) for x in xs]
        wait_until(lambda: in_flight(url, "old-w") >= 64, 20, "64 requests in flight")
        agent.apply([])  # the server leaves the assignment while its 64 requests wait for their batch
        status = agent.status()
        replies = [f.result(30) for f in futures]
    assert [s["name"] for s in status["servers"]] == []  # nothing routes to it from here on
    assert all((d["name"], d["state"]) == ("old", "draining") for d in status["draining"])  # if still there
    assert _outcome(httpx.Client(), spec["port"], "old-w") == "refused"  # the next request goes nowhere
    model = load_scripted(cnn_dir)
    assert [r.status_code for r in replies] == [200] * 64
    for x, reply in zip(xs, replies):
        torch.testing.assert_close(torch.tensor(reply.json()["outputs"][0]["data"]).reshape(1, 5), model(x))
    wait_until(lambda: not agent.status()["draining"], 20, "the drain to end")
    assert not alive(pid) and not port_open(spec["port"])
    assert "server old: drained, exited with code 0" in agent.read_log()


@pytest.mark.e2e
def test_old_and_new_server_of_one_workload_run_side_by_side_and_the_swap_loses_nothing(
    agent: Agent, cnn_dir: Path
) -> None:
    """The autoscaler's resize: the new server (new name and port) starts beside the old one, both
    serve, then the old one leaves. Clients keep sending to the old one until it refuses them (as
    a gateway does once the health check fails), then go to the new one: every request is served
    or cleanly refused, none is lost."""
    old = dict(server_spec("w-0", cnn_dir, free_port(), batch=2), workload="w")
    new = dict(server_spec("w-1", cnn_dir, free_port(), batch=4), workload="w")
    agent.apply([old])
    first = agent.servers()["w-0"]
    agent.apply([old, new])
    both = agent.servers()
    assert both["w-0"]["pid"] == first["pid"] and {s["state"] for s in both.values()} == {"ready"}
    with httpx.Client() as client:
        assert _outcome(client, old["port"], "w") == "served" and _outcome(client, new["port"], "w") == "served"
    outcomes: dict[int, Counter[str]] = {old["port"]: Counter(), new["port"]: Counter()}
    stop = threading.Event()

    def client_of_the_workload() -> None:
        port = old["port"]
        with httpx.Client() as client:
            while not stop.is_set():
                outcome = _outcome(client, port, "w")
                outcomes[port][outcome] += 1
                port = new["port"] if outcome == "refused" else port

    threads = [threading.Thread(target=client_of_the_workload) for _ in range(4)]
    for thread in threads:
        thread.start()
    try:
        wait_until(lambda: outcomes[old["port"]]["served"] >= 20, 30, "load on the old server")
        agent.apply([new])
        wait_until(lambda: not agent.status()["draining"], 30, "the old server to drain")
        wait_until(lambda: outcomes[new["port"]]["served"] >= 20, 30, "load on the new server")
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
    assert set(outcomes[old["port"]]) == {"served", "refused"}, outcomes
    assert set(outcomes[new["port"]]) == {"served"}, outcomes
    after = agent.servers()
    assert list(after) == ["w-1"] and after["w-1"]["pid"] == both["w-1"]["pid"]


@pytest.mark.e2e
def test_a_port_handed_to_a_new_server_waits_for_the_old_one_to_drain(agent: Agent, cnn_dir: Path) -> None:
    port = free_port()
    agent.apply([server_spec("a", cnn_dir, port)])
    old_pid = agent.servers()["a"]["pid"]
    agent.apply([server_spec("b", cnn_dir, port)])
    servers = agent.servers()
    assert servers["b"]["state"] == "ready" and servers["b"]["restarts"] == 0 and not alive(old_pid)
    assert _outcome(httpx.Client(), port, "b-w") == "served"


def _spec(**extra: object) -> ServerSpec:
    return ServerSpec.model_validate(
        {"name": "a", "workload": "w", "model_dir": "/m", "batch": 1, "mps_percent": 10, "port": 1, **extra}
    )


@pytest.mark.unit
def test_a_new_drain_timeout_alone_restarts_nothing() -> None:
    changes = server_changes({"a": _spec()}, {"a": _spec(drain_timeout_s=5.0)})
    assert (changes.keep, changes.restart) == (("a",), ())
    assert server_changes({"a": _spec()}, {"a": _spec(batch=2)}).restart == (_spec(batch=2),)


@pytest.mark.e2e
def test_the_assignment_drain_timeout_reaches_the_server_and_overrides_the_agent_flag(
    make_agent, cnn_dir: Path
) -> None:
    running = make_agent("--drain-timeout", "7")
    running.apply([server_spec("a", cnn_dir, free_port()), server_spec("b", cnn_dir, free_port(), drain_timeout_s=2.5)])
    argv = {name: server_argv(s["pid"]) for name, s in running.servers().items()}
    assert argv["a"][argv["a"].index("--drain-timeout") + 1] == "7"
    assert argv["b"][argv["b"].index("--drain-timeout") + 1] == "2.5"
