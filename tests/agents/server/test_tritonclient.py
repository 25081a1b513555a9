"""A client nobody here wrote: tritonclient (HTTP) against a real server process, JSON and binary
tensors both ways, outputs equal to torch's."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
import tritonclient.http as triton
from tritonclient.utils import InferenceServerException

from tests.agents.server.helpers import Served, start_server, stop_server
from tests.kit import web

# the module's tests share one costly module-scoped fixture: under --dist loadgroup they run on one worker
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("test_tritonclient")]


@pytest.fixture(scope="module")
def heads(tmp_path_factory: pytest.TempPathFactory, two_heads_dir: Path) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("srv")
    served = start_server(tmp, two_heads_dir, "heads", "--max-request-items", "6", batch=4, max_queue_delay_ms=1.0)
    yield served
    stop_server(served)


@pytest.fixture
def client(heads: Served) -> Iterator[triton.InferenceServerClient]:
    with triton.InferenceServerClient(heads.url.removeprefix("http://")) as c:
        yield c


def _inputs(a: np.ndarray, b: np.ndarray, binary: tuple[bool, bool]) -> list[triton.InferInput]:
    ia, ib = triton.InferInput("a", list(a.shape), "FP32"), triton.InferInput("b", list(b.shape), "INT64")
    ia.set_data_from_numpy(a, binary_data=binary[0])
    ib.set_data_from_numpy(b, binary_data=binary[1])
    return [ia, ib]


def _expected(heads: Served, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mix, top = heads.model(torch.from_numpy(a), torch.from_numpy(b))
    return mix.numpy(), top.numpy()


def test_health_and_metadata_through_tritonclient(client: triton.InferenceServerClient) -> None:
    assert client.is_server_live() and client.is_server_ready() and client.is_model_ready("heads")
    assert "binary_tensor_data" in client.get_server_metadata()["extensions"]
    meta = client.get_model_metadata("heads")
    assert [(t["name"], t["datatype"], t["shape"]) for t in meta["inputs"]] == [
        ("a", "FP32", [-1, 4]),
        ("b", "INT64", [-1, 4]),
    ]


@pytest.mark.parametrize("version", ["", "1"])
def test_model_config_as_triton_gives_it(client: triton.InferenceServerClient, version: str) -> None:
    """Triton's ModelConfig JSON: TYPE_* data types, dims without the batch, the server's batching."""
    config = client.get_model_config("heads", model_version=version)
    assert config["name"] == "heads" and config["platform"] == "pytorch_libtorch"
    assert config["max_batch_size"] == 6  # --max-request-items: what a request may carry
    assert config["dynamic_batching"]["preferred_batch_size"] == [4]  # the batch it runs
    assert [(t["name"], t["data_type"], t["dims"]) for t in config["input"]] == [
        ("a", "TYPE_FP32", [4]),
        ("b", "TYPE_INT64", [4]),
    ]
    assert [t["name"] for t in config["output"]] == ["mix", "top"]
    assert config["dynamic_batching"]["max_queue_delay_microseconds"] == 1000
    (group,) = config["instance_group"]
    assert group["kind"] == "KIND_CPU" and group["count"] == 1
    with pytest.raises(InferenceServerException, match="unknown model 'nope'"):
        client.get_model_config("nope")


def test_repository_index_lists_the_model_ready(heads: Served, client: triton.InferenceServerClient) -> None:
    assert client.get_model_repository_index() == [{"name": "heads", "version": "1", "state": "READY"}]
    ready_only = web.post(f"{heads.url}/v2/repository/index", json={"ready": True})
    assert ready_only.json() == [{"name": "heads", "version": "1", "state": "READY"}]
    bad = web.post(f"{heads.url}/v2/repository/index", content=b"[1]")
    assert bad.status_code == 400 and "ready" in bad.json()["error"]
    assert web.get(f"{heads.url}/v2/repository/index").status_code == 405


@pytest.mark.parametrize(
    ("binary_in", "binary_out"),
    [((False, False), (False, False)), ((True, True), (True, True)), ((True, False), (False, True))],
    ids=["json", "binary", "mixed"],
)
def test_outputs_equal_torch(
    heads: Served,
    client: triton.InferenceServerClient,
    binary_in: tuple[bool, bool],
    binary_out: tuple[bool, bool],
) -> None:
    rng = np.random.default_rng(7)
    a = rng.standard_normal((3, 4), dtype=np.float32)
    b = rng.integers(-5, 5, (3, 4), dtype=np.int64)
    outputs = [triton.InferRequestedOutput("mix", binary_out[0]), triton.InferRequestedOutput("top", binary_out[1])]
    result = client.infer("heads", _inputs(a, b, binary_in), outputs=outputs, request_id="r-1")
    mix, top = _expected(heads, a, b)
    np.testing.assert_allclose(result.as_numpy("mix"), mix, rtol=1e-6)
    np.testing.assert_array_equal(result.as_numpy("top"), top)
    response = result.get_response()
    assert response["id"] == "r-1" and response["model_name"] == "heads"
    binary_sizes = [("binary_data_size" in (o.get("parameters") or {})) for o in response["outputs"]]
    assert binary_sizes == list(binary_out)


def test_a_request_up_to_max_batch_size_is_served_past_the_servers_batch(
    heads: Served, client: triton.InferenceServerClient
) -> None:
    """6 items on a batch-4 server: run as 4 + 2, answered as one; 7 is past max_batch_size."""
    rng = np.random.default_rng(11)
    a, b = rng.standard_normal((6, 4), dtype=np.float32), rng.integers(-5, 5, (6, 4), dtype=np.int64)
    result = client.infer("heads", _inputs(a, b, (True, False)))
    mix, top = _expected(heads, a, b)
    np.testing.assert_allclose(result.as_numpy("mix"), mix, rtol=1e-6)
    np.testing.assert_array_equal(result.as_numpy("top"), top)
    a7, b7 = np.zeros((7, 4), dtype=np.float32), np.zeros((7, 4), dtype=np.int64)
    with pytest.raises(
        InferenceServerException, match=r"batch size 7 is outside 1\.\.6 \(the model's max_batch_size\)"
    ):
        client.infer("heads", _inputs(a7, b7, (True, True)))


def test_no_outputs_named_means_all_outputs_binary(heads: Served, client: triton.InferenceServerClient) -> None:
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    b = np.ones((2, 4), dtype=np.int64)
    result = client.infer("heads", _inputs(a, b, (True, True)))
    mix, top = _expected(heads, a, b)
    np.testing.assert_allclose(result.as_numpy("mix"), mix, rtol=1e-6)
    np.testing.assert_array_equal(result.as_numpy("top"), top)
    assert all("data" not in o for o in result.get_response()["outputs"])


def test_a_bad_request_is_an_error_tritonclient_reports(client: triton.InferenceServerClient) -> None:
    a, b = np.zeros((1, 3), dtype=np.float32), np.zeros((1, 4), dtype=np.int64)
    with pytest.raises(InferenceServerException, match=r"inputs\[0\]\.shape: expected \[batch, 4\]"):
        client.infer("heads", _inputs(a, b, (True, False)))


def test_the_server_binds_the_assignments_host(tmp_path: Path, cnn_dir: Path) -> None:
    """The assignment's host is where the server listens (127.0.0.2 here: on loopback, not 127.0.0.1)."""
    served = start_server(tmp_path, cnn_dir, "hosted", host="127.0.0.2")
    try:
        with triton.InferenceServerClient(f"127.0.0.2:{served.port}") as c:
            x = triton.InferInput("x", [1, 3, 8, 8], "FP32")
            data = np.random.default_rng(1).standard_normal((1, 3, 8, 8), dtype=np.float32)
            x.set_data_from_numpy(data)
            got = c.infer("hosted", [x]).as_numpy("y")
        np.testing.assert_allclose(got, served.model(torch.from_numpy(data)).detach().numpy(), rtol=1e-5, atol=1e-6)
        with socket.socket() as sock:
            assert sock.connect_ex(("127.0.0.1", served.port)) != 0
    finally:
        stop_server(served)
