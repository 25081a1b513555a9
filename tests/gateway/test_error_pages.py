"""The errors HAProxy answers by itself come in the KServe v2 error shape (`{"error": "..."}`,
application/json, an exact Content-Length), from the errorfiles gateway/config.py writes: checked
file by file, through `haproxy -c`, and on the wire from a real haproxy on 127.0.0.1."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import h11
import pytest

from autoscaler.gateway.base import GatewaySpec
from autoscaler.gateway.config import ERROR_STATUSES, Paths, error_files, render
from autoscaler.gateway.local import LocalHaproxy
from tests.kit import web
from tests.kit.agent import free_port


def _haproxy_version() -> tuple[int, int]:
    out = subprocess.run(["haproxy", "-v"], capture_output=True, text=True, check=True).stdout
    found = re.search(r"version (\d+)\.(\d+)", out)
    assert found, out
    return int(found[1]), int(found[2])


def _parse(raw: bytes) -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.1 response read with h11 (a strict parser): status, headers, body."""
    conn = h11.Connection(h11.CLIENT)
    conn.send(h11.Request(method="GET", target="/", headers=[("Host", "x")]))
    conn.receive_data(raw)
    head = conn.next_event()
    assert isinstance(head, h11.Response), head
    body = b""
    while isinstance(event := conn.next_event(), h11.Data):
        body += event.data
    assert isinstance(event, h11.EndOfMessage), event  # the body ends exactly at its Content-Length
    return head.status_code, {k.decode(): v.decode() for k, v in head.headers}, body


@pytest.mark.unit
def test_each_errorfile_is_a_whole_json_response_of_its_status() -> None:
    files = error_files()
    assert set(files) == {f"{s}.http" for s in ERROR_STATUSES}
    for name, text in files.items():
        status, headers, body = _parse(text.encode())
        assert status == int(name.removesuffix(".http"))
        assert headers["content-type"] == "application/json"
        assert int(headers["content-length"]) == len(body)
        assert json.loads(body) == {"error": ERROR_STATUSES[status][1]}


@pytest.mark.e2e
def test_haproxy_takes_every_errorfile_without_a_warning(tmp_path: Path) -> None:
    """`haproxy -c` warns (and ignores the file) for a status it cannot answer with an errorfile."""
    errors = tmp_path / "err ors"  # a space: the paths are quoted
    errors.mkdir()
    for name, text in error_files().items():
        (errors / name).write_text(text)
    (tmp_path / "st").write_text("1\n")  # an empty server-state file of format 1
    paths = Paths(socket=str(tmp_path / "s.sock"), state_file=str(tmp_path / "st"), errors=str(errors))
    cfg = tmp_path / "haproxy.cfg"
    cfg.write_text(render(GatewaySpec(listen=f"127.0.0.1:{free_port()}", workloads=("a",)), paths))
    done = subprocess.run(["haproxy", "-c", "-f", str(cfg)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "WARNING" not in done.stdout + done.stderr


@pytest.fixture()
def gateway(tmp_path: Path) -> Iterator[GatewaySpec]:
    gw = LocalHaproxy(tmp_path / "gw")
    spec = GatewaySpec(listen=f"127.0.0.1:{free_port()}", workloads=("a",), check_interval_s=0.2)
    gw.ensure(spec)
    assert sorted(p.name for p in (tmp_path / "gw" / "errors").iterdir()) == sorted(error_files())
    yield spec
    gw.stop()


def _raw(spec: GatewaySpec, request: bytes, wait_s: float = 15.0) -> bytes:
    """Send bytes as they are (no client would send these) and read until the gateway closes."""
    host, port = spec.listen.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=wait_s) as s:
        s.sendall(request)
        out = b""
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and (chunk := s.recv(65536)):
            out += chunk
            if b"\r\n\r\n" in out and _complete(out):
                break
    return out


def _complete(raw: bytes) -> bool:
    head, _, body = raw.partition(b"\r\n\r\n")
    found = re.search(rb"(?i)content-length:\s*(\d+)", head)
    return found is not None and len(body) >= int(found[1])


@pytest.mark.e2e
def test_a_workload_with_no_server_gets_the_json_503_errorfile(gateway: GatewaySpec) -> None:
    answer = web.post(f"http://{gateway.listen}/v2/models/a/infer", json={})
    assert answer.status_code == 503
    assert answer.headers["content-type"] == "application/json"
    assert answer.headers["cache-control"] == "no-cache"  # written by the errorfile, not by http-error
    assert answer.json() == {"error": ERROR_STATUSES[503][1]}


@pytest.mark.e2e
def test_a_body_that_never_arrives_gets_the_json_408_errorfile(gateway: GatewaySpec) -> None:
    """The gateway waits for the whole body (option http-buffer-request) for `timeout http-request`
    (10 s), then answers 408 from the stream: HAProxy's HTML page before the errorfiles."""
    status, headers, body = _parse(
        _raw(gateway, b"POST /v2/models/a/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{}")
    )
    assert status == 408 and headers["content-type"] == "application/json"
    assert json.loads(body) == {"error": ERROR_STATUSES[408][1]}


@pytest.mark.e2e
@pytest.mark.xfail(
    _haproxy_version() < (3, 2),
    reason="HAProxy before 3.2 answers a request its H1 layer cannot parse with its built-in HTML "
    "page and ignores the errorfile (haproxy/haproxy#3032)",
    strict=True,
)
@pytest.mark.parametrize(
    "request_bytes",
    [b"GARBAGE\r\n\r\n", b"GET /v2 HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n"],
    ids=["malformed-request-line", "70KB-header"],
)
def test_a_request_haproxy_cannot_parse_gets_a_json_400(gateway: GatewaySpec, request_bytes: bytes) -> None:
    status, headers, body = _parse(_raw(gateway, request_bytes))
    assert status == 400
    assert headers["content-type"] == "application/json"
    assert json.loads(body) == {"error": ERROR_STATUSES[400][1]}
