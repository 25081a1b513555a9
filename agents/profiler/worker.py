"""One profiling worker: a model on the GPU under one MPS share (fixed for the process's life).

Driven over stdin/stdout by agents/profiler.py so several workers can measure in lock step:
it prints {"event": "warm", ...} once loaded, then for each `go BATCH` line measures that batch
for the given seconds and prints {"event": "result", ...}; `quit` ends it. GPU only.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

from agents.server.tensors import TORCH_DTYPES
from agents.spec import ModelConfig, load_model_config


def _inputs(config: ModelConfig, batch: int) -> list[torch.Tensor]:
    """Random inputs on the GPU (integers small and non-negative, e.g. token ids)."""
    out = []
    for spec in config.inputs:
        shape = [batch, *(d if d > 0 else 1 for d in spec.shape)]
        dtype = TORCH_DTYPES[spec.datatype]
        tensor = torch.rand(shape) if dtype.is_floating_point else torch.randint(0, 2, shape)
        out.append(tensor.to("cuda", dtype))
    return out


def time_batches(model: Any, inputs: list[torch.Tensor], seconds: float) -> list[float]:
    """GPU latency of each inference (CUDA events), repeated for about `seconds`."""
    latencies: list[float] = []
    deadline = time.monotonic() + seconds
    with torch.inference_mode():
        while time.monotonic() < deadline or len(latencies) < 5:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            model(*inputs)
            end.record()
            end.synchronize()
            latencies.append(start.elapsed_time(end))
    return latencies


def kernel_stats(model: Any, inputs: list[torch.Tensor], runs: int = 3) -> dict[str, float]:
    """Kernels per inference, their summed time, and the first-to-last kernel span (ms)."""
    from torch.profiler import ProfilerActivity, profile

    with torch.inference_mode(), profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(runs):
            model(*inputs)
        torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    if not kernels:
        return {"kernels": 0, "kernel_ms": 0.0, "span_ms": 0.0}
    starts = [e.time_range.start for e in kernels]
    ends = [e.time_range.end for e in kernels]
    return {
        "kernels": round(len(kernels) / runs),
        "kernel_ms": sum(e.time_range.elapsed_us() for e in kernels) / 1000.0 / runs,
        "span_ms": (max(ends) - min(starts)) / 1000.0 / runs,
    }


def pcie_bytes_per_ms(size_mb: int = 64, runs: int = 5) -> float:
    """Host-to-device bandwidth with pinned memory, the best of a few copies."""
    host = torch.empty(size_mb * 2**20, dtype=torch.uint8).pin_memory()
    device = torch.empty_like(host, device="cuda")
    best = 0.0
    for _ in range(runs):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        device.copy_(host, non_blocking=True)
        end.record()
        end.synchronize()
        best = max(best, host.numel() / start.elapsed_time(end))
    return best


def measure(model: Any, config: ModelConfig, batch: int, seconds: float, kernels: bool) -> dict[str, Any]:
    inputs = _inputs(config, batch)
    with torch.inference_mode():
        for _ in range(3):
            model(*inputs)
    latencies = time_batches(model, inputs, seconds)
    result: dict[str, Any] = {
        "event": "result",
        "batch": batch,
        "latency_ms": statistics.median(latencies),
        "iterations": len(latencies),
    }
    if kernels:
        result.update(kernel_stats(model, inputs))
    return result


def _emit(obj: dict[str, Any]) -> None:
    print(json.dumps(obj), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agents.profiler.worker")
    parser.add_argument("--model-dir", type=Path, required=True)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--kernels", action="store_true", help="also count kernels with torch.profiler")
    parser.add_argument("--pcie", action="store_true", help="also measure host-to-device bandwidth")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    if not torch.cuda.is_available():
        _emit({"event": "error", "error": "torch sees no CUDA device"})
        return 1
    config = load_model_config(args.model_dir)
    model = torch.jit.load(str(args.model_dir / "model.pt"), map_location="cuda").eval()
    props = torch.cuda.get_device_properties(0)
    warm: dict[str, Any] = {
        "event": "warm",
        "sm_count": props.multi_processor_count,
        "memory_mb": props.total_memory / 2**20,
    }
    if args.pcie:
        warm["pcie_bytes_per_ms"] = pcie_bytes_per_ms()
    _emit(warm)
    for line in sys.stdin:
        command = line.split()
        if not command or command[0] == "quit":
            break
        _emit(measure(model, config, int(command[1]), args.seconds, args.kernels))
    return 0


if __name__ == "__main__":
    sys.exit(main())
