"""The serving half of an inference server: the model, its batcher and metrics, and the drain state.

Imported by agents/server/main.py only after its cheap start-up checks pass, because importing torch
costs seconds and a crash-looping server should fail fast. The HTTP side (routes.py, http.py) reads
this state; the batcher thread runs the model.
"""

from __future__ import annotations

import os
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import torch

from agents.server import tensors
from agents.server.batcher import Batcher
from agents.server.metrics import ServerMetrics
from agents.spec import ModelConfig, ServerLimits, ServerSpec

# The environment a server's GPU share comes from (agents/node/mps.py, mig.py), as the server sees
# it: status shows it, for a forked server too, whose /proc/PID/environ is the zygote's.
GPU_ENV = (
    "CUDA_VISIBLE_DEVICES",
    "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE",
    "CUDA_MPS_PIPE_DIRECTORY",
    "CUDA_MPS_LOG_DIRECTORY",
)


class App:
    """What the HTTP handlers share: the spec, the model's tensors contract, the batcher, metrics.

    `in_flight` counts infer requests accepted and not yet answered; it is only changed on the
    event loop's thread, and a drain waits for it to reach 0.
    """

    def __init__(self, spec: ServerSpec, config: ModelConfig, device: str, limits: ServerLimits) -> None:
        self.spec = spec
        self.config = config
        self.device = device
        self.limits = limits
        self.ready = threading.Event()
        self.draining = False
        self.in_flight = 0
        self.started_at = time.time()
        self.gpu_env = {k: os.environ[k] for k in GPU_ENV if k in os.environ}  # what CUDA reads at its start
        self.model: torch.jit.ScriptModule | None = None
        self.metrics = ServerMetrics(spec.workload, lambda: self.batcher.depth(), lambda: self.in_flight)
        self.batcher = Batcher(self.run, spec.batch, spec.max_queue_delay_ms / 1000.0, self.metrics.observe_batch)

    def run(self, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        """One forward pass on the server's device; outputs come back on the CPU."""
        assert self.model is not None
        with torch.inference_mode():
            result = self.model(*(t.to(self.device) for t in inputs))
            outputs = tensors.as_tensor_list(result, self.config)
            if self.device.startswith("cuda"):
                torch.cuda.synchronize()
        return [o.cpu() for o in outputs]

    def begin_drain(self) -> None:
        """From now on: not ready (health checks fail), new infer requests refused, the rest finish."""
        self.draining = True
        self.ready.clear()
        self.batcher.flush()

    def busy(self) -> bool:
        """Anything accepted and not yet answered: a drain waits until this is False."""
        return self.in_flight > 0 or self.batcher.depth() > 0

    def stats(self) -> dict[str, Any]:
        """The per-server document the agent merges into its status."""
        return {
            "pid": os.getpid(),
            "ready": self.ready.is_set(),
            "draining": self.draining,
            "in_flight": self.in_flight,
            "error": None,
            "device": self.device,
            "gpu_env": self.gpu_env,
            "started_at": self.started_at,
            "updated_at": time.time(),
            **self.metrics.snapshot(),
        }


def load_torchscript(app: App, warmup_runs: int = 3) -> None:
    """Load model.pt once, run full batches to warm it up, and check it matches model.yaml."""
    with warnings.catch_warnings():  # TorchScript is the served format; torch 2.x calls it deprecated
        warnings.simplefilter("ignore", DeprecationWarning)
        model = torch.jit.load(str(Path(app.spec.model_dir) / "model.pt"), map_location=app.device)
    model.eval()
    app.model = model
    example = tensors.example_inputs(app.config, app.spec.batch)
    for _ in range(warmup_runs):
        outputs = app.run(example)
    _check_outputs(outputs, app.config, app.spec.batch)


def _check_outputs(outputs: list[torch.Tensor], config: ModelConfig, batch: int) -> None:
    """A model that disagrees with model.yaml fails at start, not on the first client."""
    for spec, out in zip(config.outputs, outputs):
        want = [batch, *spec.shape]
        shape_ok = len(out.shape) == len(want) and all(w in (-1, g) for w, g in zip(want, out.shape))
        if not shape_ok:
            raise ValueError(
                f"model.yaml output {spec.name!r}: expected shape {want}, the model returns {list(out.shape)}"
            )
        if out.dtype != tensors.TORCH_DTYPES[spec.datatype]:
            raise ValueError(
                f"model.yaml output {spec.name!r}: declared {spec.datatype}, the model returns {out.dtype}"
            )


def pick_device(requested: str) -> str:
    """`cuda` means the GPU must work (CUDA_VISIBLE_DEVICES leaves this process one: cuda:0)."""
    if requested == "cpu":
        return "cpu"
    if not torch.cuda.is_available():
        raise RuntimeError("device cuda requested but torch sees no CUDA device")
    return "cuda:0"
