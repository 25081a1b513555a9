"""Triton's two read-only model-repository answers, so tritonclient and Triton tooling work as-is.

- `GET /v2/models/{m}/config`: the model's configuration in Triton's JSON form of ModelConfig
  (`get_model_config`): the tensors with TYPE_* data types and dims without the batch dimension,
  `max_batch_size` (the most items a request may carry: the agent's --max-request-items, the same
  on every server of the workload), dynamic batching with the server's batch as its preferred size
  and its queue delay, one instance group.
- `POST /v2/repository/index` (`get_model_repository_index`): the models with their version and
  state (READY, LOADING, UNLOADING while draining); a body `{"ready": true}` keeps the ready ones.
  Each server serves one model, so its index has one entry; the gateway's lists every workload.

Triton names the PyTorch backend's platform `pytorch_libtorch`, which is what these servers run.
"""

from __future__ import annotations

import json
from typing import Any

from agents.spec import ModelConfig, ServerSpec, TensorSpec

# KServe v2 datatype -> Triton model-configuration data type (BF16 is TYPE_BF16 since Triton 2.35).
CONFIG_TYPES = {
    "BOOL": "TYPE_BOOL",
    "UINT8": "TYPE_UINT8",
    "INT8": "TYPE_INT8",
    "INT16": "TYPE_INT16",
    "INT32": "TYPE_INT32",
    "INT64": "TYPE_INT64",
    "FP16": "TYPE_FP16",
    "BF16": "TYPE_BF16",
    "FP32": "TYPE_FP32",
    "FP64": "TYPE_FP64",
}


def _tensor(spec: TensorSpec, *, is_input: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": spec.name, "data_type": CONFIG_TYPES[spec.datatype], "dims": list(spec.shape)}
    if is_input:
        entry["format"] = "FORMAT_NONE"
    return entry


def model_config(spec: ServerSpec, config: ModelConfig, device: str, max_request_items: int) -> dict[str, Any]:
    """Triton's ModelConfig JSON for the one model this server runs."""
    on_gpu = device.startswith("cuda")
    return {
        "name": spec.workload,
        "platform": "pytorch_libtorch",
        "backend": "pytorch",
        "version_policy": {"latest": {"num_versions": 1}},
        "max_batch_size": max_request_items,
        "input": [_tensor(t, is_input=True) for t in config.inputs],
        "output": [_tensor(t, is_input=False) for t in config.outputs],
        "dynamic_batching": {
            "preferred_batch_size": [spec.batch],
            "max_queue_delay_microseconds": round(spec.max_queue_delay_ms * 1000),
        },
        "instance_group": [
            {
                "name": f"{spec.workload}_0",
                "kind": "KIND_GPU" if on_gpu else "KIND_CPU",
                "count": 1,
                "gpus": [spec.gpu_index] if on_gpu else [],
            }
        ],
        "default_model_filename": "model.pt",
        "parameters": {"mps_percent": {"string_value": f"{spec.mps_percent:g}"}},
    }


def wants_ready_only(body: bytes) -> bool:
    """The index request's `{"ready": true}`; an empty body (tritonclient's) asks for every model."""
    if not body.strip():
        return False
    value = json.loads(body)
    if not isinstance(value, dict) or not isinstance(value.get("ready", False), bool):
        raise ValueError('the body must be a JSON object such as {"ready": true}')
    return bool(value.get("ready", False))


def index_entry(name: str, *, ready: bool, draining: bool) -> dict[str, str]:
    """One repository-index entry; Triton gives a reason only when the model is not ready."""
    if ready:
        return {"name": name, "version": "1", "state": "READY"}
    if draining:
        return {"name": name, "version": "1", "state": "UNLOADING", "reason": "the server is draining"}
    return {"name": name, "version": "1", "state": "LOADING", "reason": "the model is loading"}
