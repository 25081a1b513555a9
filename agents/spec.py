"""Typed contracts the agent reads: the assignment (from the autoscaler) and model.yaml (per model).

Parsed once into frozen pydantic objects so every later step can trust them; errors name the field.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agents import strictjson
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
    """Unknown keys are errors, and so is every NaN or Inf (JSON's 1e999 parses to Inf). Strict:
    a number is a JSON number, never `true` (which lax pydantic reads as 1: `"mig_start": true` ran
    a server in slice 1g@1) nor a string (`"port": "24001"`); a whole number field takes no 8.0."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, strict=True)


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


class SliceKey(NamedTuple):
    """A MIG slice as the assignment names it: GPU index, profile (`3g.40gb`), start position."""

    gpu: int
    profile: str
    start: int

    def label(self) -> str:
        return f"{self.profile}@{self.start} on GPU {self.gpu}"


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
    drain_timeout_s: Annotated[float, Field(ge=0, le=3600)] | None = None
    mig_profile: Annotated[str, Field(min_length=1, max_length=32, pattern=r"^[1-8]g\.[0-9]+gb(\+me)?$")] | None = None
    mig_start: Annotated[int, Field(ge=0, le=7)] | None = None
    processes: Annotated[int, Field(ge=1, le=64)] = 1

    @field_validator("host")
    @classmethod
    def _ip_address(cls, host: str) -> str:
        """The address to bind: an IP (the VM's private address, 0.0.0.0, 127.0.0.1), never a name,
        and never a public one: a server answers anyone who reaches it and only the gateway should
        (it binds inside the VPC; a public address was taken and would have served the internet)."""
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            raise ValueError(f"must be an IP address such as 127.0.0.1 or 0.0.0.0, got {host!r}") from None
        mapped = getattr(address, "ipv4_mapped", None)
        if (mapped or address).is_global:
            raise ValueError(
                f"{address} is a public address: a server binds a loopback or private one "
                "(127.0.0.1, the VM's private address such as 10.0.1.5, or 0.0.0.0)"
            )
        return str(address)

    def mig_slice(self) -> SliceKey | None:
        """The MIG slice this server runs in (GPU index, profile, start), or None for a whole GPU."""
        if self.mig_profile is None or self.mig_start is None:
            return None
        return SliceKey(self.gpu_index, self.mig_profile, self.mig_start)

    def restart_key(self) -> ServerSpec:
        """What a running process depends on: a change of drain_timeout_s alone needs no restart."""
        return self.model_copy(update={"drain_timeout_s": None})


class ServerLimits(_Frozen):
    """What one inference server grants its clients; the agent's flags set them for every server.

    read_timeout_s bounds the whole request (headers and body) from its first byte, so a client
    that trickles bytes (slowloris) cannot hold a connection; idle_timeout_s closes connections
    that carry no request, from the connect and between keep-alive requests; past
    max_connections open connections a request gets 503; a request line and headers larger than
    max_header_kb get 431 (httptools would otherwise buffer a header of any size: 66 MB were
    taken, and 8 such clients doubled a server's memory); drain_timeout_s bounds a graceful stop.

    max_request_items is the most items one request may carry (Triton's max_batch_size). It is
    the agent's, not the plan's: every server of a workload accepts the same requests whatever
    batch the planner gave it, and runs a larger request in pieces of its own batch. When it was
    the server's batch, one request got 200 or 400 depending on the server the gateway picked.
    """

    read_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 30.0
    idle_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 60.0
    max_connections: Annotated[int, Field(ge=1, le=65536)] = 1024
    max_header_kb: Annotated[int, Field(ge=1, le=1024)] = 64  # request line and headers (431 past it)
    drain_timeout_s: Annotated[float, Field(ge=0, le=3600)] = 30.0
    max_request_items: Annotated[int, Field(ge=1, le=4096)] = 64


class Assignment(_Frozen):
    """What the autoscaler wants this VM to run; `generation` orders assignments."""

    generation: Annotated[int, Field(ge=0, le=2**63 - 1, strict=True)]  # "5" is not a generation
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


def parse_assignment(text: str | bytes, source: str) -> Assignment:
    """Parse and validate assignment JSON (UTF-8 bytes or text); raise InputError naming the file
    and the field, or the line for what is wrong before there are fields (encoding, nesting, syntax,
    duplicate keys)."""
    if isinstance(text, bytes):
        text = strictjson.decode_utf8(text, source)
    data = strictjson.loads(text, source)
    if not isinstance(data, dict):
        raise InputError(source, "", f"expected a JSON object, got {type(data).__name__}")
    try:
        assignment = Assignment.model_validate(data)
    except ValidationError as exc:
        raise from_validation(source, exc) from None
    _check_unique(source, assignment.servers, "servers", _SERVER_KEYS)
    _check_slice_fields(source, assignment.servers)
    return assignment


def _check_slice_fields(source: str, servers: list[ServerSpec]) -> None:
    """What needs no GPU to check: a slice is named by both fields, and holds one workload only
    (nothing measured supports two models in one slice)."""
    holder: dict[SliceKey, int] = {}
    for i, server in enumerate(servers):
        if (server.mig_profile is None) != (server.mig_start is None):
            missing = "mig_start" if server.mig_start is None else "mig_profile"
            raise InputError(source, f"servers[{i}].{missing}", "a MIG slice needs both mig_profile and mig_start")
        key = server.mig_slice()
        if key is None:
            continue
        first = holder.setdefault(key, i)
        if servers[first].workload != server.workload:
            raise InputError(
                source,
                f"servers[{i}].workload",
                f"slice {key.label()} already runs workload {servers[first].workload!r} (servers[{first}]);"
                " one workload per slice",
            )


class _DuplicateKey(yaml.YAMLError):
    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line


class _UniqueKeyLoader(yaml.SafeLoader):
    """safe_load, except that a key given twice in one mapping is an error with its line (PyYAML
    keeps the last value silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)  # type: ignore[no-untyped-call]
            line = key_node.start_mark.line + 1
            if key in seen:
                raise _DuplicateKey(line, f"duplicate key {key!r} (first on line {seen[key]})")
            seen[key] = line
        return super().construct_mapping(node, deep)


def load_model_config(model_dir: str | Path) -> ModelConfig:
    """Read <model_dir>/model.yaml; errors name that file and the field."""
    path = Path(model_dir) / "model.yaml"
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_UniqueKeyLoader)  # a SafeLoader
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(path, "", f"cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    except _DuplicateKey as exc:
        raise InputError(path, f"line {exc.line}", str(exc)) from None
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
