"""KServe v2 / Open Inference Protocol JSON tensors <-> torch tensors, checked against model.yaml.

Every way a request can be wrong becomes a BadRequest with a message naming the field, so the
server answers 400 and never crashes on client input.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Any

import torch
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agents.errors import field_path
from agents.spec import ModelConfig, TensorSpec

TORCH_DTYPES: dict[str, torch.dtype] = {
    "BOOL": torch.bool,
    "UINT8": torch.uint8,
    "INT8": torch.int8,
    "INT16": torch.int16,
    "INT32": torch.int32,
    "INT64": torch.int64,
    "FP16": torch.float16,
    "BF16": torch.bfloat16,
    "FP32": torch.float32,
    "FP64": torch.float64,
}
DATATYPES: dict[torch.dtype, str] = {v: k for k, v in TORCH_DTYPES.items()}
_CONVERSION_ERRORS = (ValueError, TypeError, RuntimeError, OverflowError)


class BadRequest(Exception):
    """A client error: the HTTP layer answers 400 with this message."""


class NotRepresentable(Exception):
    """A model output that JSON cannot carry (NaN, Inf): the HTTP layer answers 500, never bare NaN."""


class _Loose(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RequestInput(_Loose):
    name: str
    shape: list[Annotated[int, Field(ge=0)]]
    datatype: str
    data: list[Any] | None = None
    parameters: dict[str, Any] | None = None


class RequestOutput(_Loose):
    name: str
    parameters: dict[str, Any] | None = None


class InferRequest(_Loose):
    id: str | None = None
    parameters: dict[str, Any] | None = None
    inputs: Annotated[list[RequestInput], Field(min_length=1)]
    outputs: list[RequestOutput] | None = None


@dataclass(frozen=True)
class Wanted:
    """One output to return, and whether as raw bytes (the binary tensor extension) or JSON data."""

    name: str
    binary: bool


@dataclass(frozen=True)
class Decoded:
    """A validated request: one tensor per model input (model.yaml order), all with batch n."""

    tensors: list[torch.Tensor]
    n: int
    request_id: str | None
    wanted: list[Wanted]


@dataclass(frozen=True)
class Encoded:
    """A reply: the JSON document, plus the raw output bytes that follow it when any output is binary."""

    header: dict[str, Any]
    blobs: list[bytes]


def parse_request(body: bytes) -> InferRequest:
    """JSON body -> typed request (pydantic's Rust parser: several times faster than json.loads
    on tensor payloads); errors name the field like `inputs[0].shape`."""
    try:
        return InferRequest.model_validate_json(body)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        if err["type"] == "json_invalid":
            raise BadRequest(f"request body is not valid JSON: {err['msg']}") from None
        if not err["loc"]:
            raise BadRequest("request body must be a JSON object with `inputs`") from None
        raise BadRequest(f"{field_path(err['loc'])}: {err['msg']}") from None


def decode(body: bytes, config: ModelConfig, max_batch: int, header_length: int | None = None) -> Decoded:
    """Validate a request against the model's inputs and build the tensors to batch.

    `header_length` (the Inference-Header-Content-Length header) selects the binary tensor
    extension: a JSON header of that many bytes, then raw little-endian tensor bytes.
    """
    if header_length is not None and not 0 < header_length <= len(body):
        raise BadRequest(f"Inference-Header-Content-Length {header_length} does not fit a {len(body)}-byte body")
    req = parse_request(body[:header_length] if header_length else body)
    chunks = _split_binary(req.inputs, body[header_length:] if header_length else b"")
    by_name = _index_inputs(req.inputs, config)
    tensors = [_to_tensor(*by_name[spec.name], spec, chunks) for spec in config.inputs]
    n = _common_batch(tensors, config, max_batch)
    return Decoded(tensors, n, req.id, _wanted_outputs(req, config))


def _index_inputs(inputs: list[RequestInput], config: ModelConfig) -> dict[str, tuple[int, RequestInput]]:
    """Each model input exactly once, nothing else; keeps the request index for error messages."""
    expected = {spec.name for spec in config.inputs}
    found: dict[str, tuple[int, RequestInput]] = {}
    for i, item in enumerate(inputs):
        if item.name not in expected:
            raise BadRequest(f"inputs[{i}].name: unknown input {item.name!r}; the model takes {sorted(expected)}")
        if item.name in found:
            raise BadRequest(f"inputs[{i}].name: input {item.name!r} given twice")
        found[item.name] = (i, item)
    missing = sorted(expected - found.keys())
    if missing:
        raise BadRequest(f"inputs: missing input(s) {missing}")
    return found


def _check_shape(item: RequestInput, spec: TensorSpec, where: str) -> None:
    """Shape must be [batch, *model.yaml shape], with -1 matching any size."""
    if len(item.shape) != len(spec.shape) + 1:
        raise BadRequest(
            f"{where}.shape: expected [batch, {', '.join(map(str, spec.shape))}] "
            f"({len(spec.shape) + 1} dimensions), got {item.shape}"
        )
    for got, want in zip(item.shape[1:], spec.shape):
        if want != -1 and got != want:
            raise BadRequest(f"{where}.shape: expected [batch, {', '.join(map(str, spec.shape))}], got {item.shape}")


def _split_binary(inputs: list[RequestInput], blob: bytes) -> dict[int, bytes]:
    """Cut the binary part into each input's bytes, in request order (parameters.binary_data_size)."""
    chunks: dict[int, bytes] = {}
    offset = 0
    for i, item in enumerate(inputs):
        size = (item.parameters or {}).get("binary_data_size")
        if size is None:
            continue
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise BadRequest(f"inputs[{i}].parameters.binary_data_size: must be a non-negative integer")
        if offset + size > len(blob):
            raise BadRequest(
                f"inputs[{i}].parameters.binary_data_size: {size} bytes, but only {len(blob) - offset} left in the body"
            )
        chunks[i] = blob[offset : offset + size]
        offset += size
    if offset != len(blob):
        raise BadRequest(f"body: {len(blob) - offset} bytes after the binary tensors belong to no input")
    return chunks


def _to_tensor(index: int, item: RequestInput, spec: TensorSpec, chunks: dict[int, bytes]) -> torch.Tensor:
    """Convert one checked input (JSON data or binary bytes) to a tensor of its dtype and shape."""
    where = f"inputs[{index}]"
    if item.datatype != spec.datatype:
        raise BadRequest(f"{where}.datatype: expected {spec.datatype}, got {item.datatype!r}")
    _check_shape(item, spec, where)
    dtype = TORCH_DTYPES[spec.datatype]
    if (item.data is None) == (index not in chunks):
        raise BadRequest(f"{where}.data: give either `data` or parameters.binary_data_size, exactly one")
    tensor = _convert(item.data, dtype, where) if item.data is not None else _from_bytes(chunks[index], dtype, where)
    expected = math.prod(item.shape)
    if tensor.numel() != expected:
        raise BadRequest(f"{where}.data: shape {item.shape} needs {expected} values, got {tensor.numel()}")
    _check_finite(tensor, where + (".data" if item.data is not None else ""))
    return tensor.reshape(item.shape)


def all_finite(tensor: torch.Tensor) -> bool:
    """No NaN or Inf in a float tensor. A finite sum proves it in one cheap pass (NaN and Inf make
    the sum non-finite); only a non-finite sum, which overflow can also cause, needs the full check."""
    if not tensor.is_floating_point() or not tensor.numel() or math.isfinite(float(tensor.sum())):
        return True
    return bool(torch.isfinite(tensor).all())


def _check_finite(tensor: torch.Tensor, where: str) -> None:
    """KServe v2 JSON has no NaN or Inf (and a JSON number past FP16's range becomes Inf): refuse them."""
    if not all_finite(tensor):
        bad = int((~torch.isfinite(tensor)).sum())
        raise BadRequest(
            f"{where}: {bad} value(s) are NaN, Inf or beyond {DATATYPES[tensor.dtype]}'s range; inputs must be finite"
        )


def _convert(data: list[Any], dtype: torch.dtype, where: str) -> torch.Tensor:
    """Build the tensor; integer types refuse fractional or out-of-range values instead of wrapping."""
    try:
        if dtype.is_floating_point:
            return torch.tensor(data, dtype=dtype)
        inferred = torch.tensor(data)
    except _CONVERSION_ERRORS as exc:
        raise BadRequest(f"{where}.data: not a list of {DATATYPES[dtype]} values ({exc})") from None
    if inferred.is_floating_point():
        raise BadRequest(f"{where}.data: {DATATYPES[dtype]} needs integer values")
    if dtype != torch.bool and inferred.numel() and not _in_range(inferred, dtype):
        raise BadRequest(f"{where}.data: values out of range for {DATATYPES[dtype]}")
    return inferred.to(dtype)


def _from_bytes(chunk: bytes, dtype: torch.dtype, where: str) -> torch.Tensor:
    if len(chunk) % dtype.itemsize:
        raise BadRequest(f"{where}: {len(chunk)} bytes is not a whole number of {DATATYPES[dtype]} values")
    return torch.frombuffer(bytearray(chunk), dtype=dtype) if chunk else torch.empty(0, dtype=dtype)


def _in_range(tensor: torch.Tensor, dtype: torch.dtype) -> bool:
    info = torch.iinfo(dtype)
    return info.min <= int(tensor.min()) and int(tensor.max()) <= info.max


def _common_batch(tensors: list[torch.Tensor], config: ModelConfig, max_batch: int) -> int:
    """All inputs share one batch size, 1..max_batch (the max_batch_size Triton enforces)."""
    sizes = {t.shape[0] for t in tensors}
    if len(sizes) != 1:
        raise BadRequest(f"inputs: all inputs need the same batch size (first dimension), got {sorted(sizes)}")
    n = sizes.pop()
    if n < 1 or n > max_batch:
        raise BadRequest(f"inputs: batch size {n} is outside 1..{max_batch} (the model's max_batch_size)")
    return n


def _wanted_outputs(req: InferRequest, config: ModelConfig) -> list[Wanted]:
    """Requested outputs (all when none are named); unknown names are client errors.

    Binary is per output (`parameters.binary_data`), defaulting to the request's
    `parameters.binary_data_output`, as tritonclient sends them.
    """
    names = [o.name for o in config.outputs]
    default = _flag(req.parameters, "binary_data_output", "parameters")
    if not req.outputs:
        return [Wanted(name, default) for name in names]
    wanted = []
    for i, out in enumerate(req.outputs):
        if out.name not in names:
            raise BadRequest(f"outputs[{i}].name: unknown output {out.name!r}; the model returns {names}")
        if (out.parameters or {}).get("class_count", 0):
            raise BadRequest(f"outputs[{i}].parameters.class_count: the classification extension is not supported")
        binary = _flag(out.parameters, "binary_data", f"outputs[{i}].parameters")
        wanted.append(Wanted(out.name, binary if "binary_data" in (out.parameters or {}) else default))
    return wanted


def _flag(parameters: dict[str, Any] | None, key: str, where: str) -> bool:
    value = (parameters or {}).get(key, False)
    if not isinstance(value, bool):
        raise BadRequest(f"{where}.{key}: must be true or false, got {value!r}")
    return value


def as_tensor_list(result: Any, config: ModelConfig) -> list[torch.Tensor]:
    """A model may return a tensor, a tuple/list of tensors or a dict by output name."""
    if isinstance(result, torch.Tensor):
        values = [result]
    elif isinstance(result, (tuple, list)):
        values = list(result)
    elif isinstance(result, dict):
        values = [result.get(spec.name) for spec in config.outputs]
    else:
        raise TypeError(f"model returned {type(result).__name__}; expected tensors")
    if len(values) != len(config.outputs) or not all(isinstance(v, torch.Tensor) for v in values):
        raise TypeError(
            f"model returned {len(values)} value(s); model.yaml declares {len(config.outputs)} tensor output(s)"
        )
    return values


def encode(outputs: list[torch.Tensor], config: ModelConfig, decoded: Decoded, model: str) -> Encoded:
    """The v2 response for one request's slice of a batch: JSON data, or raw bytes for binary outputs."""
    by_name = {spec.name: (spec, t) for spec, t in zip(config.outputs, outputs)}
    header: dict[str, Any] = {"model_name": model, "model_version": "1", "outputs": []}
    if decoded.request_id is not None:
        header["id"] = decoded.request_id
    blobs: list[bytes] = []
    for want in decoded.wanted:
        spec, tensor = by_name[want.name]
        tensor = tensor.detach().to("cpu", TORCH_DTYPES[spec.datatype]).contiguous()
        entry: dict[str, Any] = {"name": want.name, "datatype": spec.datatype, "shape": list(tensor.shape)}
        if want.binary:
            blobs.append(raw_bytes(tensor))
            entry["parameters"] = {"binary_data_size": len(blobs[-1])}
        else:
            entry["data"] = _json_data(tensor, want.name)
        header["outputs"].append(entry)
    return Encoded(header, blobs)


def raw_bytes(tensor: torch.Tensor) -> bytes:
    """Little-endian element bytes in row-major order, as the binary tensor extension sends them."""
    return tensor.reshape(-1).view(torch.uint8).numpy().tobytes()


def _json_data(tensor: torch.Tensor, name: str) -> list[Any]:
    if not all_finite(tensor):
        raise NotRepresentable(
            f"output {name!r}: the model returned NaN or Inf, which JSON cannot carry; "
            "ask for it as binary data (outputs[].parameters.binary_data: true)"
        )
    return tensor.reshape(-1).tolist()


def example_inputs(config: ModelConfig, batch: int) -> list[torch.Tensor]:
    """Zero inputs for warm-up; variable (-1) dimensions become 1."""
    return [
        torch.zeros([batch, *(d if d > 0 else 1 for d in spec.shape)], dtype=TORCH_DTYPES[spec.datatype])
        for spec in config.inputs
    ]


def metadata(config: ModelConfig, model: str) -> dict[str, Any]:
    """GET /v2/models/{model}: names, datatypes and shapes with the batch dimension as -1."""

    def describe(spec: TensorSpec) -> dict[str, Any]:
        return {"name": spec.name, "datatype": spec.datatype, "shape": [-1, *spec.shape]}

    return {
        "name": model,
        "versions": ["1"],
        "platform": "pytorch_torchscript",
        "inputs": [describe(s) for s in config.inputs],
        "outputs": [describe(s) for s in config.outputs],
    }
