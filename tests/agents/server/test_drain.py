"""SIGTERM is a drain: readiness turns 503, new requests are refused, every accepted one is answered."""

from __future__ import annotations

import json
import math
import re
import signal
import socket
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
import torch

from tests.agents.server.helpers import Served, start_server, stop_server
from tests.kit import web
from tests.kit.agent import port_open, wait_until

pytestmark = pytest.mark.e2e


def infer_body(x: torch.Tensor) -> dict[str, list[dict[str, object]]]:
    return {"inputs": [{"name": "x", "shape": list(x.shape), "datatype": "FP32", "data": x.flatten().tolist()}]}


def infer(client: httpx.Client, served: Served, x: torch.Tensor) -> httpx.Response:
    return client.post(f"{served.url}/v2/models/{served.workload}/infer", json=infer_body(x), timeout=60)


def in_flight(url: str, workload: str) -> float:
    """The server's own count of requests accepted and not yet answered (its /metrics gauge)."""
    metrics = web.get(f"{url}/metrics", timeout=5).text
    match = re.search(rf'^igniter_requests_in_flight{{workload="{workload}"}} (\S+)$', metrics, re.M)
    return float(match.group(1)) if match else 0.0


def send_concurrently(
    served: Served, xs: list[torch.Tensor]
) -> tuple[list[Future[httpx.Response]], ThreadPoolExecutor]:
    client = httpx.Client(limits=httpx.Limits(max_connections=len(xs)))
    pool = ThreadPoolExecutor(len(xs))
    return [pool.submit(infer, client, served, x) for x in xs], pool


def held_request(served: Served, x: torch.Tensor) -> tuple[socket.socket, bytes]:
    """An infer request whose headers and first bytes of body are sent, the rest held back: the
    server counts it in flight (it reads the body inside the handler), so a drain waits for it.
    Returns the connection and the rest of the body."""
    body = json.dumps(infer_body(x)).encode()
    head = (
        f"POST /v2/models/{served.workload}/infer HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    conn = socket.create_connection(("127.0.0.1", served.port), timeout=30)
    conn.sendall(head + body[:16])
    return conn, body[16:]


def status_of(conn: socket.socket) -> int:
    """The status code of the response that comes on `conn`."""
    line = conn.makefile("rb").readline()
    return int(line.split()[1])


def test_sigterm_answers_all_64_queued_requests_refuses_new_ones_and_exits_0(tmp_path: Path, cnn_dir: Path) -> None:
    """64 requests wait in the batcher (a 10 s queue delay, batch 128) when SIGTERM arrives, and a
    65th is still arriving (its body held back by the client): the drain lasts until that one is
    answered too, so a new connection during it is certain to meet the draining server, however
    slowly this test gets to it."""
    served = start_server(tmp_path, cnn_dir, "d", batch=128, max_queue_delay_ms=10000.0)
    try:
        xs = [torch.randn(1, 3, 8, 8) for _ in range(65)]
        futures, pool = send_concurrently(served, xs[:64])
        held, rest = held_request(served, xs[64])
        wait_until(lambda: in_flight(served.url, "d") >= 65, 20, "65 requests in flight")
        served.proc.send_signal(signal.SIGTERM)
        with httpx.Client() as fresh:  # a new connection during the drain
            wait_until(lambda: fresh.get(f"{served.url}/v2/health/ready").status_code == 503, 5, "ready 503")
            refused = infer(fresh, served, xs[0])
        assert refused.status_code == 503 and "draining" in refused.json()["error"]
        replies = [f.result(30) for f in futures]
        pool.shutdown()
        assert [r.status_code for r in replies] == [200] * 64
        with held:
            held.sendall(rest)
            assert status_of(held) == 200  # accepted before the drain: answered
        for x, reply in zip(xs, replies):
            torch.testing.assert_close(torch.tensor(reply.json()["outputs"][0]["data"]).reshape(1, 5), served.model(x))
        assert served.proc.wait(15) == 0
        assert not port_open(served.port)
    finally:
        stop_server(served)


def _spins_for(served: Served, seconds: float) -> int:
    """How many of the Spin model's matmuls take about `seconds` in this server right now."""
    with httpx.Client() as client:
        for _ in range(3):  # TorchScript's profiling executor settles over the first calls
            infer(client, served, torch.tensor([[0.0]]))
        took = math.inf
        for _ in range(3):  # the fastest of three: a timing slowed by a busy machine would ask too few spins
            started = time.perf_counter()
            assert infer(client, served, torch.tensor([[5000.0]])).status_code == 200
            took = min(took, time.perf_counter() - started)
    return max(1, int(5000 * seconds / max(took, 1e-6)))


def test_the_drain_timeout_bounds_the_stop_and_queued_requests_get_503(tmp_path: Path, spin_dir: Path) -> None:
    """One request computes for about 1.5 s; three queue behind it (batch 1); the drain allows 0.2 s."""
    served = start_server(tmp_path, spin_dir, "t", "--drain-timeout", "0.2", batch=1, max_queue_delay_ms=0.0)
    try:
        spins = _spins_for(served, 1.5)
        xs = [torch.tensor([[float(spins)]]), *(torch.tensor([[0.0]]) for _ in range(3))]
        futures, pool = send_concurrently(served, xs[:1])
        wait_until(lambda: in_flight(served.url, "t") >= 1, 20, "the slow request in flight")
        rest, rest_pool = send_concurrently(served, xs[1:])
        wait_until(lambda: in_flight(served.url, "t") >= 4, 20, "4 requests in flight")
        started = time.monotonic()
        served.proc.send_signal(signal.SIGTERM)
        queued = [f.result(30) for f in rest]
        assert [r.status_code for r in queued] == [503] * 3
        assert {r.json()["error"] for r in queued} == {"server is shutting down"}
        assert futures[0].result(30).status_code == 200  # the batch that was running finishes
        assert served.proc.wait(15) == 0 and time.monotonic() - started < 10
        assert "drain timeout (0.2 s) with 4 request(s) in flight" in served.log.read_text()
        pool.shutdown()
        rest_pool.shutdown()
    finally:
        stop_server(served)


def test_a_server_without_requests_stops_at_once(tmp_path: Path, cnn_dir: Path) -> None:
    served = start_server(tmp_path, cnn_dir, "idle", "--drain-timeout", "30")
    try:
        started = time.monotonic()
        served.proc.send_signal(signal.SIGTERM)
        assert served.proc.wait(15) == 0 and time.monotonic() - started < 5
    finally:
        stop_server(served)
