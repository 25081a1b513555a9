"""Typed contracts the agent reads: the assignment (from the autoscaler) and model.yaml (per model).

Parsed once into frozen pydantic objects so every later step can trust them; errors name the field.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agents.errors import InputError, from_validation

DataType = Literal["BOOL", "UINT8", "INT8", "INT16", "INT32", "INT64", "FP16", "BF16", "FP32", "FP64"]
DATATYPE_BYTES: dict[str, int] = {
    "BOOL": 1,
    "UINT8": 1,
    "INT8": 1,
    "INT16": 2,
    "INT32": 4,
    "INT64": 8,
    "FP16": 2,
    "BF16": 2,
    "FP32": 4,
    "FP64": 8,
}
Name = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")]


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TensorSpec(_Frozen):
    """One model input or output; `shape` excludes the batch dimension (-1 marks a variable size)."""

    name: Annotated[str, Field(min_length=1)]
    shape: list[Annotated[int, Field(ge=-1)]]
    datatype: DataType

    @field_validator("shape")
    @classmethod
    def _no_zero(cls, shape: list[int]) -> list[int]:
        if 0 in shape:
            raise ValueError("dimensions must be positive or -1 (variable)")
        return shape


def first_duplicate(values: list) -> int | None:
    """Index of the first value seen before, or None: lets errors name `servers[3].port`."""
    seen: set = set()
    for i, value in enumerate(values):
        if value in seen:
            return i
        seen.add(value)
    return None


class ModelConfig(_Frozen):
    """model.yaml: the tensors a TorchScript model takes and returns, in positional order."""

    inputs: Annotated[list[TensorSpec], Field(min_length=1)]
    outputs: Annotated[list[TensorSpec], Field(min_length=1)]


class ServerSpec(_Frozen):
    """One inference server this VM must run. Any change to it means a restart (MPS shares are fixed per process)."""

    name: Name
    workload: Name
    model_dir: Annotated[str, Field(min_length=1)]
    batch: Annotated[int, Field(ge=1, le=4096)]
    mps_percent: Annotated[float, Field(gt=0, le=100)]
    gpu_index: Annotated[int, Field(ge=0)] = 0
    port: Annotated[int, Field(ge=1, le=65535)]
    max_queue_delay_ms: Annotated[float, Field(ge=0, le=10_000)] = 5.0
    host: Annotated[str, Field(min_length=1)] = "127.0.0.1"


class Assignment(_Frozen):
    """What the autoscaler wants this VM to run; `generation` orders assignments."""

    generation: Annotated[int, Field(ge=0)]
    servers: list[ServerSpec]

    def by_name(self) -> dict[str, ServerSpec]:
        """Servers keyed by name: the identity the daemon diffs on."""
        return {s.name: s for s in self.servers}


Check = tuple[str, Callable[[Any], object], str]


def _check_unique(source: str | Path, items: list, label: str, checks: list[Check]) -> None:
    """Raise InputError at the second occurrence of a duplicated key, e.g. `servers[1].port`."""
    for field, key, what in checks:
        values = [key(item) for item in items]
        i = first_duplicate(values)
        if i is not None:
            shown = getattr(items[i], field)
            first = values.index(values[i])
            raise InputError(source, f"{label}[{i}].{field}", f"duplicate {what} {shown!r} (also {label}[{first}])")


_SERVER_KEYS: list[Check] = [
    ("name", lambda s: s.name, "server name"),
    ("port", lambda s: s.port, "port"),
]
_TENSOR_KEYS: list[Check] = [("name", lambda t: t.name, "tensor name")]


def parse_assignment(text: str, source: str) -> Assignment:
    """Parse and validate assignment JSON; raise InputError naming the file and field."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(source, f"line {exc.lineno}", f"invalid JSON: {exc.msg}") from None
    if not isinstance(data, dict):
        raise InputError(source, "", f"expected a JSON object, got {type(data).__name__}")
    try:
        assignment = Assignment.model_validate(data)
    except ValidationError as exc:
        raise from_validation(source, exc) from None
    _check_unique(source, assignment.servers, "servers", _SERVER_KEYS)
    return assignment


def load_model_config(model_dir: str | Path) -> ModelConfig:
    """Read <model_dir>/model.yaml; errors name that file and the field."""
    path = Path(model_dir) / "model.yaml"
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(path, "", f"cannot read: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise InputError(path, "", f"YAML syntax error: {exc}") from None
    if not isinstance(data, dict):
        raise InputError(path, "", "expected a mapping with `inputs` and `outputs`")
    try:
        config = ModelConfig.model_validate(data)
    except ValidationError as exc:
        raise from_validation(path, exc) from None
    _check_unique(path, config.inputs, "inputs", _TENSOR_KEYS)
    _check_unique(path, config.outputs, "outputs", _TENSOR_KEYS)
    return config


def check_model_dirs(assignment: Assignment, source: str) -> None:
    """Fail early, at apply time, when a server's model directory cannot be served at all."""
    for i, server in enumerate(assignment.servers):
        model_dir = Path(server.model_dir)
        if not (model_dir / "model.pt").is_file():
            raise InputError(source, f"servers[{i}].model_dir", f"{model_dir}/model.pt does not exist")
        try:
            load_model_config(model_dir)
        except InputError as exc:
            raise InputError(source, f"servers[{i}].model_dir", str(exc)) from None
