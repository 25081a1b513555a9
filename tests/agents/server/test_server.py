"""A real inference server process on 127.0.0.1, checked against torch running the same model."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
import torch

from tests.agents.server.helpers import Served, start_server, stop_server
from tests.kit import web
from tests.kit.agent import alive, free_port, port_open, wait_until

# the module's tests share one costly module-scoped fixture: under --dist loadgroup they run on one worker
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("test_server")]


@pytest.fixture(scope="module")
def cnn(tmp_path_factory: pytest.TempPathFactory, cnn_dir: Path) -> Iterator[Served]:
    served = start_server(
        tmp_path_factory.mktemp("srv"), cnn_dir, "cnn", "--max-request-items", "12", max_queue_delay_ms=20.0
    )
    yield served
    stop_server(served)


@pytest.fixture(scope="module")
def heads(tmp_path_factory: pytest.TempPathFactory, two_heads_dir: Path) -> Iterator[Served]:
    served = start_server(tmp_path_factory.mktemp("srv"), two_heads_dir, "heads", batch=4, max_queue_delay_ms=1.0)
    yield served
    stop_server(served)


def _infer_cnn(client: httpx.Client, served: Served, x: torch.Tensor) -> httpx.Response:
    body = {
        "id": "q",
        "inputs": [{"name": "x", "shape": list(x.shape), "datatype": "FP32", "data": x.flatten().tolist()}],
    }
    return client.post(f"{served.url}/v2/models/{served.workload}/infer", json=body, timeout=30)


def test_outputs_equal_torch(cnn: Served) -> None:
    x = torch.randn(3, 3, 8, 8)
    with httpx.Client() as client:
        reply = _infer_cnn(client, cnn, x)
    assert reply.status_code == 200, reply.text
    out = reply.json()["outputs"][0]
    assert (out["name"], out["datatype"], out["shape"], reply.json()["id"]) == ("y", "FP32", [3, 5], "q")
    torch.testing.assert_close(torch.tensor(out["data"]).reshape(3, 5), cnn.model(x))


def test_binary_tensor_request_equals_torch(cnn: Served) -> None:
    x = torch.randn(2, 3, 8, 8)
    header = json.dumps(
        {
            "inputs": [
                {
                    "name": "x",
                    "shape": [2, 3, 8, 8],
                    "datatype": "FP32",
                    "parameters": {"binary_data_size": x.numel() * 4},
                }
            ]
        }
    ).encode()
    reply = web.post(
        f"{cnn.url}/v2/models/cnn/infer",
        content=header + x.numpy().tobytes(),
        headers={"Inference-Header-Content-Length": str(len(header))},
        timeout=30,
    )
    assert reply.status_code == 200, reply.text
    torch.testing.assert_close(torch.tensor(reply.json()["outputs"][0]["data"]).reshape(2, 5), cnn.model(x))
    bad = web.post(
        f"{cnn.url}/v2/models/cnn/infer", content=header, headers={"Inference-Header-Content-Length": "x"}, timeout=30
    )
    assert bad.status_code == 400 and "must be a number" in bad.json()["error"]


def test_multi_input_multi_output_model_equals_torch(heads: Served) -> None:
    a, b = torch.randn(2, 4), torch.randint(-5, 5, (2, 4))
    body = {
        "inputs": [
            {"name": "b", "shape": [2, 4], "datatype": "INT64", "data": b.tolist()},
            {"name": "a", "shape": [2, 4], "datatype": "FP32", "data": a.flatten().tolist()},
        ]
    }
    reply = web.post(f"{heads.url}/v2/models/heads/infer", json=body, timeout=30)
    assert reply.status_code == 200, reply.text
    mix, top = heads.model(a, b)
    outs = {o["name"]: o for o in reply.json()["outputs"]}
    torch.testing.assert_close(torch.tensor(outs["mix"]["data"]).reshape(2, 4), mix)
    assert (outs["top"]["data"], outs["top"]["shape"], outs["top"]["datatype"]) == (top.tolist(), [2], "INT64")


def test_64_concurrent_requests_are_batched_and_each_gets_its_own_answer(cnn: Served) -> None:
    xs = [torch.randn(1, 3, 8, 8) for _ in range(64)]
    before = json.loads(cnn.stats.read_text())
    with httpx.Client(limits=httpx.Limits(max_connections=64)) as client, ThreadPoolExecutor(64) as pool:
        replies = list(pool.map(lambda x: _infer_cnn(client, cnn, x), xs))
    assert all(r.status_code == 200 for r in replies)
    for x, reply in zip(xs, replies):
        torch.testing.assert_close(torch.tensor(reply.json()["outputs"][0]["data"]).reshape(1, 5), cnn.model(x))
    metrics = web.get(f"{cnn.url}/metrics").text
    over_one = _histogram_count(metrics, "igniter_batch_size") - _bucket(metrics, "igniter_batch_size", "1.0")
    assert over_one >= 1, "no batch larger than 1 was executed"
    stats = wait_until(lambda: _stats_after(cnn, before["requests_total"] + 64), 5, "stats file update")
    assert stats["batches_total"] - before["batches_total"] < 64


def test_a_request_larger_than_the_batch_runs_in_pieces_of_the_batch(cnn: Served) -> None:
    """11 items on a batch-8 server (--max-request-items 12): one answer equal to torch's, and no
    batch ran more than 8 items."""
    x = torch.randn(11, 3, 8, 8)
    before = _histogram_count(web.get(f"{cnn.url}/metrics").text, "igniter_batch_size")
    with httpx.Client() as client:
        reply = _infer_cnn(client, cnn, x)
    assert reply.status_code == 200, reply.text
    assert reply.json()["outputs"][0]["shape"] == [11, 5]
    torch.testing.assert_close(torch.tensor(reply.json()["outputs"][0]["data"]).reshape(11, 5), cnn.model(x))
    metrics = web.get(f"{cnn.url}/metrics").text
    assert _histogram_count(metrics, "igniter_batch_size") - before >= 2  # 11 items: at least two batches
    assert _bucket(metrics, "igniter_batch_size", "8.0") == _histogram_count(metrics, "igniter_batch_size")


def _stats_after(served: Served, requests: int) -> dict | None:
    stats = json.loads(served.stats.read_text())
    return stats if stats["requests_total"] >= requests else None


def _histogram_count(metrics: str, name: str) -> float:
    return sum(float(line.split()[-1]) for line in metrics.splitlines() if line.startswith(f"{name}_count"))


def _bucket(metrics: str, name: str, le: str) -> float:
    prefix = f'{name}_bucket{{le="{le}"'
    return sum(float(line.split()[-1]) for line in metrics.splitlines() if line.startswith(prefix))


@pytest.mark.parametrize(
    ("body", "code", "words"),
    [
        (b"{not json", 400, "not valid JSON"),
        (
            json.dumps(
                {"inputs": [{"name": "x", "shape": [1, 3, 8], "datatype": "FP32", "data": [0.0] * 24}]}
            ).encode(),
            400,
            "shape",
        ),
        (
            json.dumps(
                {"inputs": [{"name": "x", "shape": [1, 3, 8, 8], "datatype": "INT64", "data": [0] * 192}]}
            ).encode(),
            400,
            "datatype",
        ),
        (
            json.dumps(
                {"inputs": [{"name": "x", "shape": [1, 3, 8, 8], "datatype": "FP32", "data": [0.0] * 5}]}
            ).encode(),
            400,
            "needs 192 values",
        ),
        (
            json.dumps(
                {"inputs": [{"name": "x", "shape": [13, 3, 8, 8], "datatype": "FP32", "data": [0.0] * 13 * 192}]}
            ).encode(),
            400,
            "outside 1..12",
        ),
        (
            json.dumps({"inputs": [{"name": "q", "shape": [1], "datatype": "FP32", "data": [0.0]}]}).encode(),
            400,
            "unknown input",
        ),
        (json.dumps({"inputs": "x"}).encode(), 400, "inputs"),
    ],
)
def test_malformed_infer_requests_get_400_and_the_server_keeps_serving(
    cnn: Served, body: bytes, code: int, words: str
) -> None:
    reply = web.post(f"{cnn.url}/v2/models/cnn/infer", content=body, timeout=10)
    assert reply.status_code == code and words in reply.json()["error"]
    assert _infer_cnn(httpx.Client(), cnn, torch.zeros(1, 3, 8, 8)).status_code == 200


def test_wrong_model_route_and_missing_length(cnn: Served) -> None:
    assert web.post(f"{cnn.url}/v2/models/other/infer", content=b"{}", timeout=5).status_code == 404
    assert web.get(f"{cnn.url}/v2/nowhere", timeout=5).status_code == 404
    with httpx.Client() as client:
        request = client.build_request("POST", f"{cnn.url}/v2/models/cnn/infer", content=iter([b"{}"]))
        assert client.send(request).status_code == 411  # chunked body, no Content-Length


def test_health_metadata_and_metrics(cnn: Served) -> None:
    assert web.get(f"{cnn.url}/v2/health/live").status_code == 200
    assert web.get(f"{cnn.url}/v2/models/cnn/ready").json() == {"name": "cnn", "ready": True}
    meta = web.get(f"{cnn.url}/v2/models/cnn").json()
    assert meta["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, 3, 8, 8]}]
    metrics = web.get(f"{cnn.url}/metrics").text
    for family in (
        "igniter_requests_total",
        "igniter_request_latency_seconds_bucket",
        "igniter_batch_size_bucket",
        "igniter_queue_depth",
    ):
        assert f"{family}{{" in metrics and 'workload="cnn"' in metrics, family


def test_stats_file_reports_last_minute_latency(cnn: Served) -> None:
    _infer_cnn(httpx.Client(), cnn, torch.zeros(1, 3, 8, 8))
    stats = wait_until(
        lambda: json.loads(cnn.stats.read_text()) if json.loads(cnn.stats.read_text())["latency_ms_p50"] else None,
        5,
        "latency in stats",
    )
    assert stats["ready"] and stats["pid"] == cnn.proc.pid and stats["device"] == "cpu"
    assert 0 < stats["latency_ms_p50"] <= stats["latency_ms_p99"]


def test_sigterm_exits_cleanly_and_frees_the_port(tmp_path: Path, cnn_dir: Path) -> None:
    served = start_server(tmp_path, cnn_dir, "short")
    try:
        served.proc.send_signal(signal.SIGTERM)
        assert served.proc.wait(10) == 0
        assert not port_open(served.port)
    finally:
        stop_server(served)


def test_server_exits_when_its_parent_is_gone(tmp_path: Path, cnn_dir: Path) -> None:
    """--parent-pid names a process that is not our parent: the server leaves at once."""
    spec = {
        "name": "orphan",
        "workload": "o",
        "model_dir": str(cnn_dir),
        "batch": 1,
        "mps_percent": 10,
        "port": free_port(),
    }
    cmd = [sys.executable, "-m", "agents.server", "--spec", json.dumps(spec), "--parent-pid", str(os.getpid() + 999999)]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.wait(20) == 3
        assert "is gone" in proc.stderr.read()
    finally:
        if alive(proc.pid):
            proc.kill()
        proc.wait(5)


def test_model_disagreeing_with_model_yaml_fails_at_start(tmp_path: Path, cnn_dir: Path) -> None:
    (tmp_path / "model.pt").write_bytes((cnn_dir / "model.pt").read_bytes())
    (tmp_path / "model.yaml").write_text(
        "inputs:\n- {name: x, shape: [3, 8, 8], datatype: FP32}\noutputs:\n- {name: y, shape: [6], datatype: FP32}\n"
    )
    spec = {
        "name": "bad",
        "workload": "bad",
        "model_dir": str(tmp_path),
        "batch": 2,
        "mps_percent": 10,
        "port": free_port(),
    }
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "agents.server", "--spec", json.dumps(spec)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1 and time.monotonic() - started < 60
    assert "expected shape [2, 6], the model returns [2, 5]" in done.stderr
