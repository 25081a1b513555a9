"""The HAProxy driver against a real haproxy on 127.0.0.1, with stand-in servers (threads that
answer like an inference server): configuration, routing by path, runtime operations, the process
that outlives its driver, reloads that drop nothing, the rate source, and errors."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from autoscaler.core.routing.routes import AddServer, DelServer, SetState, SetWeight
from autoscaler.gateway.base import GatewayError, GatewaySpec
from autoscaler.gateway.local import LocalHaproxy, alerts, socket_path
from autoscaler.rates.gateway import GatewayRates
from tests.kit import web
from tests.kit.agent import free_port, wait_until


class Stub(BaseHTTPRequestHandler):
    """A KServe-ish server: ready unless told otherwise, answers which port it is."""

    protocol_version = "HTTP/1.1"
    ready = True

    def log_message(self, *args: object) -> None:
        return None

    def do_GET(self) -> None:
        code = 200 if self.server.ready or self.path != "/v2/health/ready" else 503  # type: ignore[attr-defined]
        self._send(code, {"port": self.server.server_address[1], "path": self.path})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if getattr(self.server, "stopping", False):  # as a draining inference server answers what it did not accept
            self.close_connection = True
            self._send(503, {"error": "server is draining: it accepts no new requests"})
            return
        if getattr(self.server, "slow", 0):
            time.sleep(self.server.slow)  # type: ignore[attr-defined]
        self._send(200, {"port": self.server.server_address[1]})

    def _send(self, code: int, body: dict[str, object]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        return None  # a connection the gateway closes (a reload, a purge) is not an error here


@pytest.fixture()
def stubs() -> Iterator[list[ThreadingHTTPServer]]:
    servers = []
    for _ in range(3):
        httpd = QuietServer(("127.0.0.1", 0), Stub)
        httpd.ready = True  # type: ignore[attr-defined]
        httpd.slow = 0.0  # type: ignore[attr-defined]
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        servers.append(httpd)
    yield servers
    for httpd in servers:
        httpd.shutdown()
        httpd.server_close()


def addr(httpd: ThreadingHTTPServer) -> str:
    return f"127.0.0.1:{httpd.server_address[1]}"


@pytest.fixture()
def gw(tmp_path: Path) -> Iterator[tuple[LocalHaproxy, GatewaySpec]]:
    gateway = LocalHaproxy(tmp_path / "gw")
    spec = GatewaySpec(listen=f"127.0.0.1:{free_port()}", workloads=("a", "b"), check_interval_s=0.2)
    gateway.ensure(spec)
    yield gateway, spec
    gateway.stop()
    assert gateway.pid() is None


def url(spec: GatewaySpec, path: str) -> str:
    return f"http://{spec.listen}{path}"


@pytest.mark.e2e
def test_routes_by_path_and_answers_for_the_fleet(gw: tuple[LocalHaproxy, GatewaySpec], stubs: list) -> None:
    gateway, spec = gw
    assert web.get(url(spec, "/v2/health/live")).status_code == 200
    ready = web.get(url(spec, "/v2/health/ready"))
    assert ready.status_code == 503 and "workload a" in ready.json()["error"]
    unknown = web.post(url(spec, "/v2/models/zz/infer"), json={})
    assert unknown.status_code == 404 and unknown.json() == {"error": "unknown model zz"}
    assert web.get(url(spec, "/nowhere")).json()["error"].startswith("no route GET")
    assert "binary_tensor_data" in web.get(url(spec, "/v2")).json()["extensions"]
    empty = web.post(url(spec, "/v2/models/a/infer"), json={})
    assert empty.status_code == 503 and "error" in empty.json()  # KServe-style JSON, not HAProxy's HTML
    assert gateway.apply([AddServer("a", "a-0", addr(stubs[0])), AddServer("b", "b-0", addr(stubs[1]))]) == []
    wait_until(lambda: gateway.observe().healthy() == {"a-0", "b-0"}, 10, "health checks to pass")
    assert gateway.observe().serving() == set()  # added with weight 0: nothing routed before the weight
    assert gateway.apply([SetWeight("a", "a-0", 256), SetWeight("b", "b-0", 256)]) == []
    assert web.get(url(spec, "/v2/health/ready")).status_code == 200
    for path, port in (("/v2/models/a/infer", stubs[0]), ("/v2/models/b/versions/1/infer", stubs[1])):
        assert web.post(url(spec, path), json={}).json()["port"] == port.server_address[1]
    assert web.get(url(spec, "/v2/models/a/ready")).json()["path"] == "/v2/models/a/ready"


@pytest.mark.e2e
def test_weights_state_and_deletion_through_the_runtime_api(gw: tuple[LocalHaproxy, GatewaySpec], stubs: list) -> None:
    gateway, spec = gw
    gateway.apply([AddServer("a", f"a-{i}", addr(s)) for i, s in enumerate(stubs[:2])])
    wait_until(lambda: len(gateway.observe().healthy()) == 2, 10, "health checks")
    gateway.apply([SetWeight("a", "a-0", 256), SetWeight("a", "a-1", 64)])
    with httpx.Client() as c:
        got = Counter(c.post(url(spec, "/v2/models/a/infer"), json={}).json()["port"] for _ in range(320))
    assert got == {stubs[0].server_address[1]: 256, stubs[1].server_address[1]: 64}  # weighted round robin
    view = gateway.observe()
    assert view.backends["a"].requests_total == 320 and view.servers[("a", "a-0")].requests_total == 256
    gateway.apply([SetState("a", "a-0", "drain")])
    assert gateway.observe().servers[("a", "a-0")].admin == "drain"
    with httpx.Client() as c:
        assert {c.post(url(spec, "/v2/models/a/infer"), json={}).json()["port"] for _ in range(20)} == {
            stubs[1].server_address[1]
        }
    failed = gateway.apply([DelServer("a", "a-9")])
    assert len(failed) == 1 and "No such server" in failed[0]
    wait_until(lambda: gateway.apply([DelServer("a", "a-0")]) == [], 15, "a-0's idle connections to close")
    assert set(gateway.observe().servers) == {("a", "a-1")}


@pytest.mark.e2e
def test_a_server_that_fails_its_check_leaves_the_pool(gw: tuple[LocalHaproxy, GatewaySpec], stubs: list) -> None:
    gateway, spec = gw
    gateway.apply([AddServer("a", "a-0", addr(stubs[0])), AddServer("a", "a-1", addr(stubs[1]))])
    wait_until(lambda: len(gateway.observe().healthy()) == 2, 10, "health checks")
    gateway.apply([SetWeight("a", "a-0", 256), SetWeight("a", "a-1", 256)])
    stubs[1].ready = False  # e.g. draining or reloading its model: /v2/health/ready answers 503
    wait_until(lambda: gateway.observe().servers[("a", "a-1")].status == "DOWN", 10, "a-1 to fail its checks")
    assert "a-1" not in gateway.observe().serving()
    ports = {web.post(url(spec, "/v2/models/a/infer"), json={}).json()["port"] for _ in range(10)}
    assert ports == {stubs[0].server_address[1]}
    stubs[1].ready = True
    wait_until(lambda: "a-1" in gateway.observe().serving(), 10, "a-1 to pass again")


@pytest.mark.e2e
def test_a_dead_server_is_retried_on_another(gw: tuple[LocalHaproxy, GatewaySpec], stubs: list, tmp_path: Path) -> None:
    gateway, spec = gw
    dead = free_port()  # nothing listens there: connection refused
    gateway.apply([AddServer("a", "a-0", addr(stubs[0])), AddServer("a", "a-1", f"127.0.0.1:{dead}")])
    wait_until(lambda: "a-0" in gateway.observe().healthy(), 10, "a-0's check")
    # weight the dead one by hand, as if it had died after its last check: every request must still succeed
    gateway.apply([SetWeight("a", "a-0", 256), SetWeight("a", "a-1", 256)])
    with httpx.Client() as c:
        codes = Counter(c.post(url(spec, "/v2/models/a/infer"), json={}).status_code for _ in range(50))
    assert codes == {200: 50}


@pytest.mark.e2e
def test_a_request_that_meets_a_stopping_server_is_retried_on_another(
    gw: tuple[LocalHaproxy, GatewaySpec], stubs: list
) -> None:
    """A server the agent stops answers 503 to new requests until its check notices; the gateway
    retries those on another server of the workload (retry-on ... 503, option redispatch)."""
    gateway, spec = gw
    gateway.apply([AddServer("a", "a-0", addr(stubs[0])), AddServer("a", "a-1", addr(stubs[1]))])
    wait_until(lambda: gateway.observe().healthy() == {"a-0", "a-1"}, 10, "health checks")
    gateway.apply([SetWeight("a", "a-0", 256), SetWeight("a", "a-1", 256)])
    stubs[1].stopping = True  # its readiness still passes: as if it began stopping after its last check
    with httpx.Client() as c:
        answers = [c.post(url(spec, "/v2/models/a/infer"), json={}) for _ in range(50)]
    assert Counter(r.status_code for r in answers) == {200: 50}
    assert {r.json()["port"] for r in answers} == {stubs[0].server_address[1]}
    assert gateway.observe().server("a-1").requests_total > 0  # type: ignore[union-attr]  # it was tried


@pytest.mark.e2e
def test_a_request_a_hung_server_holds_past_the_timeout_is_retried_on_another(tmp_path: Path, stubs: list) -> None:
    """A server that accepts and never answers (an MPS client whose daemon died may hang rather
    than exit) costs the request `timeout_s`, not the request itself (retry-on response-timeout)."""
    gateway = LocalHaproxy(tmp_path / "gw")
    spec = GatewaySpec(listen=f"127.0.0.1:{free_port()}", workloads=("a",), check_interval_s=0.2, timeout_s=0.5)
    try:
        gateway.ensure(spec)
        gateway.apply([AddServer("a", "a-0", addr(stubs[0])), AddServer("a", "a-1", addr(stubs[1]))])
        wait_until(lambda: gateway.observe().healthy() == {"a-0", "a-1"}, 10, "health checks")
        gateway.apply([SetWeight("a", "a-0", 256), SetWeight("a", "a-1", 256)])
        stubs[1].slow = 30.0  # its readiness still passes (GET is not slowed)
        with httpx.Client(timeout=10) as c:
            answers = [c.post(url(spec, "/v2/models/a/infer"), json={}) for _ in range(6)]
        assert Counter(r.status_code for r in answers) == {200: 6}
        assert {r.json()["port"] for r in answers} == {stubs[0].server_address[1]}
        assert gateway.observe().server("a-1").requests_total > 0  # type: ignore[union-attr]  # it was tried
    finally:
        gateway.stop()


@pytest.mark.e2e
def test_the_gateway_outlives_its_driver_and_reloads_without_dropping(tmp_path: Path, stubs: list) -> None:
    spec = GatewaySpec(listen=f"127.0.0.1:{free_port()}", workloads=("a",), check_interval_s=0.2)
    first = LocalHaproxy(tmp_path / "gw")
    try:
        assert first.ensure(spec) is True
        first.apply([AddServer("a", "a-0", addr(stubs[0]))])
        wait_until(lambda: "a-0" in first.observe().healthy(), 10, "a-0's check")
        first.apply([SetWeight("a", "a-0", 200)])
        pid = first.pid()
        second = LocalHaproxy(tmp_path / "gw")  # a later `igniter run`: finds and keeps the same process
        assert second.ensure(spec) is False and second.pid() == pid
        stubs[0].slow = 0.05
        codes: Counter[int] = Counter()
        stop = threading.Event()

        def client() -> None:
            with httpx.Client(timeout=10) as c:
                while not stop.is_set():
                    try:
                        codes[c.post(url(spec, "/v2/models/a/infer"), json={}).status_code] += 1
                    except httpx.HTTPError as exc:
                        codes[type(exc).__name__] += 1  # type: ignore[index]

        threads = [threading.Thread(target=client) for _ in range(6)]
        for t in threads:
            t.start()
        time.sleep(0.5)
        assert second.ensure(GatewaySpec(listen=spec.listen, workloads=("a", "b"), check_interval_s=0.2)) is True
        time.sleep(1.0)
        stop.set()
        for t in threads:
            t.join()
        view = second.observe()
        assert second.pid() != pid and set(view.backends) == {"a", "b"}
        assert view.servers[("a", "a-0")].weight == 200 and view.servers[("a", "a-0")].admin == "ready"
        assert set(codes) == {200} and codes[200] > 20, codes  # no request refused or cut by the reload
    finally:
        first.stop()


@pytest.mark.unit
def test_a_gateway_that_cannot_start_says_why_and_leaves_nothing(tmp_path: Path) -> None:
    port = free_port()
    holder = socket.socket()
    holder.bind(("127.0.0.1", port))
    holder.listen()
    try:
        gateway = LocalHaproxy(tmp_path / "gw")
        with pytest.raises(GatewayError, match=f"cannot listen on 127.0.0.1:{port}: Address already in use"):
            gateway.ensure(GatewaySpec(listen=f"127.0.0.1:{port}", workloads=("a",)))
        assert not (tmp_path / "gw").exists()
    finally:
        holder.close()
    missing = LocalHaproxy(tmp_path / "gw", command="/nonexistent/haproxy")
    with pytest.raises(GatewayError, match="not installed") as err:
        missing.ensure(GatewaySpec(listen=f"127.0.0.1:{free_port()}", workloads=("a",)))
    assert not err.value.retryable and not (tmp_path / "gw").exists()


@pytest.mark.unit
def test_long_state_paths_get_a_short_private_socket(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    path = socket_path(deep)
    assert len(str(path)) < 100 and path.parent.stat().st_mode & 0o777 == 0o700
    for length in (98, 100):  # fits sun_path, but past the 97 bytes haproxy takes for a stats socket
        at = tmp_path / ("f" * (length - len(str(tmp_path)) - len("/admin.sock") - 1))
        assert len(str(at / "admin.sock")) == length and len(str(socket_path(at))) <= 97
    assert alerts("[NOTICE] x\n[ALERT]    (12) : Starting frontend kserve: cannot bind socket\n") == (
        "Starting frontend kserve: cannot bind socket"
    )


@pytest.mark.e2e
def test_gateway_rates_see_the_busiest_second_a_mean_smooths_away(
    gw: tuple[LocalHaproxy, GatewaySpec], stubs: list
) -> None:
    """A one-second burst, then a quiet trickle: the read over the burst's 4 s has a mean a
    fraction of its busiest second, which the peak reports (HAProxy's rate_max); the maxima are
    cleared after each read, so the next read's peak is the trickle's, while the request counter
    (what the mean is made of) is untouched by the clearing."""
    gateway, spec = gw
    gateway.apply([AddServer("a", "a-0", addr(stubs[0]))])
    wait_until(lambda: "a-0" in gateway.observe().healthy(), 10, "a-0's check")
    gateway.apply([SetWeight("a", "a-0", 256)])
    source = GatewayRates(gateway.observe, gateway.clear_maxima)
    source.read(time.monotonic(), ["a"])
    start = time.monotonic()

    def burst() -> None:
        with httpx.Client(timeout=5) as c:
            while time.monotonic() < start + 1.0:
                c.post(url(spec, "/v2/models/a/infer"), json={})

    senders = [threading.Thread(target=burst) for _ in range(4)]
    for t in senders:
        t.start()
    for t in senders:
        t.join()
    time.sleep(max(0.0, start + 4.0 - time.monotonic()))
    mean = source.read(time.monotonic(), ["a"])["a"]
    peak = source.peaks(0.0, ["a"])["a"]
    assert mean is not None and peak is not None
    assert peak >= 2.5 * mean > 0, (peak, mean)
    with httpx.Client(timeout=5) as c:
        for _ in range(6):
            c.post(url(spec, "/v2/models/a/infer"), json={})
            time.sleep(0.5)
    calm = source.read(time.monotonic(), ["a"])["a"]
    calm_peak = source.peaks(0.0, ["a"])["a"]
    assert calm is not None and calm_peak is not None
    assert calm_peak <= 4 and calm_peak < peak / 4, (calm_peak, peak)
    assert 0.5 <= calm <= 3.0  # 6 requests in about 3 s: the counter kept counting through the clear


@pytest.mark.e2e
def test_gateway_rates_track_a_stepped_load(gw: tuple[LocalHaproxy, GatewaySpec], stubs: list) -> None:
    """Paced load at 20, then 60, then 35 req/s (four senders); each 2 s reading is within 10 % of
    what the clients sent in the same window."""
    gateway, spec = gw
    gateway.apply([AddServer("a", "a-0", addr(stubs[0]))])
    wait_until(lambda: "a-0" in gateway.observe().healthy(), 10, "a-0's check")
    gateway.apply([SetWeight("a", "a-0", 256)])
    source = GatewayRates(gateway.observe)
    sent: list[float] = []
    lock = threading.Lock()
    stop = threading.Event()

    def pace(rate_of: dict[str, float]) -> None:
        with httpx.Client(timeout=5) as c:
            next_at = time.monotonic()
            while not stop.is_set():
                c.post(url(spec, "/v2/models/a/infer"), json={})
                with lock:
                    sent.append(time.monotonic())
                next_at += 1.0 / rate_of["now"]
                time.sleep(max(0.0, next_at - time.monotonic()))

    rate = {"now": 5.0}
    senders = [threading.Thread(target=pace, args=(rate,)) for _ in range(4)]
    for t in senders:
        t.start()
    readings: list[tuple[float, float]] = []
    try:
        source.read(time.monotonic(), ["a"])
        for step in (20.0, 60.0, 35.0):
            rate["now"] = step / len(senders)
            time.sleep(1.0)  # let the step settle before measuring
            source.read(time.monotonic(), ["a"])
            for _ in range(2):
                start = time.monotonic()
                time.sleep(2.0)
                now = time.monotonic()
                got = source.read(now, ["a"])["a"]
                with lock:
                    truth = sum(1 for t in sent if start <= t <= now) / (now - start)
                assert got is not None
                readings.append((got, truth))
    finally:
        stop.set()
        for t in senders:
            t.join()
    for got, truth in readings:
        assert abs(got - truth) <= 0.1 * truth, readings
    assert readings[2][1] > 1.5 * readings[0][1] and readings[4][1] < 0.8 * readings[2][1]  # the load stepped
