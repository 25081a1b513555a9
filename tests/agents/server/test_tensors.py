"""The v2 JSON codec: requests are checked against model.yaml; every mistake is a BadRequest."""

from __future__ import annotations

import json

import pytest
import torch

from agents.server.tensors import BadRequest, as_tensor_list, decode, encode
from agents.spec import ModelConfig

CONFIG = ModelConfig.model_validate(
    {
        "inputs": [{"name": "a", "shape": [2], "datatype": "FP32"}, {"name": "b", "shape": [-1], "datatype": "INT8"}],
        "outputs": [{"name": "y", "shape": [2], "datatype": "FP32"}, {"name": "z", "shape": [], "datatype": "INT64"}],
    }
)


def _body(a: dict | None = None, b: dict | None = None, **top: object) -> bytes:
    inputs = [
        {"name": "a", "shape": [1, 2], "datatype": "FP32", "data": [1.5, 2.5], **(a or {})},
        {"name": "b", "shape": [1, 3], "datatype": "INT8", "data": [1, 2, 3], **(b or {})},
    ]
    return json.dumps({"inputs": inputs, **top}).encode()


@pytest.mark.unit
def test_valid_request_decodes_to_typed_tensors() -> None:
    decoded = decode(_body(b={"data": [[1, 2, 3]]}), CONFIG, max_batch=4)
    assert decoded.n == 1
    assert decoded.tensors[0].dtype == torch.float32 and decoded.tensors[0].tolist() == [[1.5, 2.5]]
    assert decoded.tensors[1].dtype == torch.int8 and decoded.tensors[1].shape == (1, 3)


@pytest.mark.property
@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b"not json", "not valid JSON"),
        (b"[1, 2]", "must be a JSON object"),
        (b'{"inputs": []}', "inputs: List should have at least 1 item"),
        (b'{"inputs": [{"name": "a"}]}', "inputs[0].shape: Field required"),
        (_body(a={"datatype": "FP16"}), "inputs[0].datatype: expected FP32"),
        (_body(a={"shape": [1, 3], "data": [1, 2, 3]}), "inputs[0].shape: expected [batch, 2]"),
        (_body(a={"shape": [2], "data": [1, 2]}), "2 dimensions"),
        (_body(a={"data": [1.0]}), "needs 2 values, got 1"),
        (_body(a={"data": ["x", "y"]}), "not a list of FP32 values"),
        (_body(a={"data": [[1.0], [2.0, 3.0]]}), "not a list of FP32 values"),
        (_body(b={"data": [1, 2.5, 3]}), "INT8 needs integer values"),
        (_body(b={"data": [1, 2, 300]}), "out of range for INT8"),
        (_body(a={"name": "c"}), "inputs[0].name: unknown input 'c'"),
        (_body(b={"name": "a"}), "inputs[1].name: input 'a' given twice"),
        (_body(a={"shape": [5, 2], "data": [0.0] * 10}, b={"shape": [5, 3], "data": [0] * 15}), "outside 1..4"),
        (_body(b={"shape": [2, 3], "data": [0] * 6}), "same batch size"),
        (_body(outputs=[{"name": "nope"}]), "outputs[0].name: unknown output 'nope'"),
        (_body(extra=1), "extra: Extra inputs are not permitted"),
    ],
)
def test_malformed_requests_are_bad_requests(body: bytes, words: str) -> None:
    with pytest.raises(BadRequest) as info:
        decode(body, CONFIG, max_batch=4)
    assert words in str(info.value)


@pytest.mark.unit
def test_missing_input_is_named() -> None:
    body = json.dumps({"inputs": [{"name": "a", "shape": [1, 2], "datatype": "FP32", "data": [1, 2]}]}).encode()
    with pytest.raises(BadRequest, match=r"missing input\(s\) \['b'\]"):
        decode(body, CONFIG, max_batch=4)


@pytest.mark.unit
def test_encode_returns_requested_outputs_with_declared_types() -> None:
    decoded = decode(_body(id="r1", outputs=[{"name": "z"}]), CONFIG, max_batch=4)
    body = encode([torch.tensor([[0.5, 1.0]]), torch.tensor([7])], CONFIG, decoded, "m")
    assert body.header == {
        "model_name": "m",
        "model_version": "1",
        "id": "r1",
        "outputs": [{"name": "z", "datatype": "INT64", "shape": [1], "data": [7]}],
    }
    assert body.blobs == []


@pytest.mark.unit
def test_binary_outputs_follow_the_request_default_and_per_output_flags() -> None:
    y, z = torch.tensor([[0.5, -1.25]]), torch.tensor([7])
    everything = decode(_body(parameters={"binary_data_output": True}), CONFIG, max_batch=4)
    body = encode([y, z], CONFIG, everything, "m")
    assert [o["parameters"] for o in body.header["outputs"]] == [{"binary_data_size": 8}, {"binary_data_size": 8}]
    assert all("data" not in o for o in body.header["outputs"])
    assert body.blobs == [y.numpy().tobytes(), z.numpy().tobytes()]
    mixed = decode(
        _body(parameters={"binary_data_output": True}, outputs=[{"name": "y", "parameters": {"binary_data": False}}]),
        CONFIG,
        max_batch=4,
    )
    body = encode([y, z], CONFIG, mixed, "m")
    assert body.header["outputs"] == [{"name": "y", "datatype": "FP32", "shape": [1, 2], "data": [0.5, -1.25]}]
    assert body.blobs == []


@pytest.mark.unit
def test_bool_and_bf16_outputs_have_their_raw_bytes() -> None:
    from agents.server.tensors import raw_bytes

    assert raw_bytes(torch.tensor([True, False, True])) == b"\x01\x00\x01"
    half = torch.tensor([1.0, -2.0], dtype=torch.bfloat16)
    assert raw_bytes(half) == half.view(torch.int16).numpy().tobytes()


@pytest.mark.unit
def test_binary_flags_must_be_booleans_and_classification_is_refused() -> None:
    with pytest.raises(BadRequest, match=r"parameters\.binary_data_output: must be true or false"):
        decode(_body(parameters={"binary_data_output": "yes"}), CONFIG, max_batch=4)
    with pytest.raises(BadRequest, match=r"outputs\[0\].parameters.binary_data: must be true or false"):
        decode(_body(outputs=[{"name": "y", "parameters": {"binary_data": 1}}]), CONFIG, max_batch=4)
    with pytest.raises(BadRequest, match="classification extension is not supported"):
        decode(_body(outputs=[{"name": "y", "parameters": {"class_count": 3}}]), CONFIG, max_batch=4)


@pytest.mark.unit
@pytest.mark.parametrize(
    "raw",
    [b"[NaN, 1.0]", b"[1.0, Infinity]", b"[-Infinity, 0]", b"[1e999, 0]"],
    ids=["nan", "inf", "-inf", "overflow"],
)
def test_non_finite_json_inputs_are_refused(raw: bytes) -> None:
    body = (
        b'{"inputs": [{"name": "a", "shape": [1, 2], "datatype": "FP32", "data": '
        + raw
        + b'}, {"name": "b", "shape": [1, 1], "datatype": "INT8", "data": [1]}]}'
    )
    with pytest.raises(BadRequest, match=r"inputs\[0\]\.data: 1 value\(s\) are NaN, Inf or beyond FP32's range"):
        decode(body, CONFIG, max_batch=4)


@pytest.mark.unit
def test_fp16_overflow_and_binary_nan_are_refused() -> None:
    config = ModelConfig.model_validate(
        {
            "inputs": [{"name": "h", "shape": [2], "datatype": "FP16"}],
            "outputs": [{"name": "o", "shape": [2], "datatype": "FP16"}],
        }
    )
    body = json.dumps({"inputs": [{"name": "h", "shape": [1, 2], "datatype": "FP16", "data": [1.0, 70000.0]}]})
    with pytest.raises(BadRequest, match="beyond FP16's range"):
        decode(body.encode(), config, max_batch=2)
    raw = torch.tensor([[float("nan"), 1.0]], dtype=torch.float16).numpy().tobytes()
    header = json.dumps(
        {"inputs": [{"name": "h", "shape": [1, 2], "datatype": "FP16", "parameters": {"binary_data_size": 4}}]}
    ).encode()
    with pytest.raises(BadRequest, match=r"inputs\[0\]: 1 value\(s\) are NaN"):
        decode(header + raw, config, max_batch=2, header_length=len(header))


@pytest.mark.unit
def test_non_finite_outputs_are_an_error_in_json_and_exact_in_binary() -> None:
    from agents.server.tensors import NotRepresentable

    y, z = torch.tensor([[float("nan"), 1.0]]), torch.tensor([7])
    with pytest.raises(NotRepresentable, match="output 'y': the model returned NaN or Inf"):
        encode([y, z], CONFIG, decode(_body(), CONFIG, max_batch=4), "m")
    binary = decode(_body(outputs=[{"name": "y", "parameters": {"binary_data": True}}]), CONFIG, max_batch=4)
    assert encode([y, z], CONFIG, binary, "m").blobs == [y.numpy().tobytes()]


@pytest.mark.unit
def test_model_results_in_every_supported_form() -> None:
    y, z = torch.zeros(1, 2), torch.zeros(1, dtype=torch.int64)
    assert len(as_tensor_list((y, z), CONFIG)) == 2
    assert as_tensor_list({"z": z, "y": y}, CONFIG)[0] is y
    with pytest.raises(TypeError, match="declares 2"):
        as_tensor_list(y, CONFIG)


def _binary(a: torch.Tensor, b: torch.Tensor, b_size: int | None = None, trailing: bytes = b"") -> tuple[bytes, int]:
    """A request in the binary tensor extension: JSON header, then the raw bytes of a and b."""
    header = json.dumps(
        {
            "inputs": [
                {
                    "name": "a",
                    "shape": list(a.shape),
                    "datatype": "FP32",
                    "parameters": {"binary_data_size": a.numel() * 4},
                },
                {
                    "name": "b",
                    "shape": list(b.shape),
                    "datatype": "INT8",
                    "parameters": {"binary_data_size": b_size if b_size is not None else b.numel()},
                },
            ]
        }
    ).encode()
    return header + a.numpy().tobytes() + b.numpy().tobytes() + trailing, len(header)


@pytest.mark.unit
def test_binary_tensor_extension_decodes_exact_values() -> None:
    a, b = torch.randn(2, 2), torch.tensor([[1, -2, 3], [4, 5, -6]], dtype=torch.int8)
    body, header_length = _binary(a, b)
    decoded = decode(body, CONFIG, max_batch=4, header_length=header_length)
    assert torch.equal(decoded.tensors[0], a) and torch.equal(decoded.tensors[1], b) and decoded.n == 2


@pytest.mark.unit
@pytest.mark.parametrize(
    ("b_size", "trailing", "header_delta", "words"),
    [
        (7, b"", 0, "binary_data_size: 7 bytes, but only 6 left"),
        (None, b"xx", 0, "2 bytes after the binary tensors"),
        (5, b"", 0, "needs 6 values, got 5"),
        (None, b"", 10_000, "does not fit"),
    ],
)
def test_binary_requests_with_wrong_sizes_are_bad_requests(
    b_size: int | None, trailing: bytes, header_delta: int, words: str
) -> None:
    body, header_length = _binary(torch.zeros(2, 2), torch.zeros(2, 3, dtype=torch.int8), b_size, trailing)
    if b_size == 5:
        body = body[:-1]
    with pytest.raises(BadRequest, match=words):
        decode(body, CONFIG, max_batch=4, header_length=header_length + header_delta)


@pytest.mark.unit
def test_data_and_binary_together_or_neither_is_refused() -> None:
    body = json.dumps(
        {
            "inputs": [
                {"name": "a", "shape": [1, 2], "datatype": "FP32"},
                {"name": "b", "shape": [1, 1], "datatype": "INT8", "data": [1]},
            ]
        }
    ).encode()
    with pytest.raises(BadRequest, match=r"inputs\[0\]\.data: give either"):
        decode(body, CONFIG, max_batch=4)
