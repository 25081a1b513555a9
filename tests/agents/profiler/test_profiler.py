"""The profiler's pure part: measurements -> a profile the autoscaler's schema accepts.

The measuring itself needs a GPU (benchmarks/gpu_check.sh and a lent machine); without one the
command exits 2, which test_agent_cli.py checks.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from agents.profiler.measure import GRID_BATCHES, GRID_MPS, _merge_and_write, assemble, l2_proxy, tensor_bytes
from agents.spec import ModelConfig
from autoscaler.config.profile import load_profile

CONFIG = ModelConfig.model_validate(
    {
        "inputs": [{"name": "x", "shape": [3, 224, 224], "datatype": "FP32"}],
        "outputs": [{"name": "y", "shape": [1000], "datatype": "FP16"}],
    }
)


def _measured() -> tuple[dict, dict, dict, dict]:
    latency = [[b * (1.0 + 100.0 / r) / 10 for r in GRID_MPS] for b in GRID_BATCHES]
    grid = {
        "gpu_latency_ms": latency,
        "power_w": [[80.0 + r for r in GRID_MPS] for _ in GRID_BATCHES],
        "sm_clock_mhz": [[1530.0] * 3 for _ in GRID_BATCHES],
    }
    extra = {"kernel_stats": {"kernels": 80, "kernel_ms": 2.0, "span_ms": 2.07}}
    probe = {"solo_ms": 7.7, "colocated_ms": 8.1, "other_ms": 7.9, "power_w": 150.0, "sm_clock_mhz": 1530.0}
    hardware = {
        "gpu": "Tesla V100-SXM2-16GB",
        "max_sm_clock_mhz": 1530,
        "power_limit_w": 300.0,
        "idle_power_w": 53.5,
        "resource_unit_percent": 2.5,
        "pcie_bandwidth_bytes_per_ms": 1.1e7,
        "memory_mb": 16384.0,
        "colocation_sweep": {
            "colocated_workloads": [1, 2, 3, 4, 5],
            "power_w": [117.0, 185.0, 259.0, 296.0, 295.0],
            "sm_clock_mhz": [1530.0, 1530.0, 1530.0, 1485.0, 1431.0],
            "idle_time_per_kernel_ms": [0.0014, 0.0017, 0.0068, 0.0119, 0.017],
        },
    }
    return grid, extra, probe, hardware


@pytest.mark.unit
def test_assembled_profile_passes_the_autoscaler_schema_and_keeps_other_models(tmp_path: Path) -> None:
    grid, extra, probe, hardware = _measured()
    out = tmp_path / "gpu.yaml"
    _merge_and_write(assemble("resnet50", CONFIG, dict(hardware), grid, extra, probe), out)
    _merge_and_write(assemble("other", CONFIG, dict(hardware), grid, extra, probe), out)
    profile = load_profile(out)
    assert sorted(profile.models) == ["other", "resnet50"]
    model = profile.models["resnet50"]
    assert (model.kernels, model.input_bytes_per_request, model.output_bytes_per_request) == (80, 602112, 2000)
    assert model.solo_idle_time_ms == pytest.approx(0.07)
    assert model.l2_cache_utilization_percent_at_grid_diagonal[-1] == pytest.approx(30.0)
    assert "proxy" in yaml.safe_load(out.read_text())["source"]


@pytest.mark.unit
def test_l2_proxy_is_proportional_to_throughput() -> None:
    assert l2_proxy(10.0, 32, reference_rps=3200.0) == pytest.approx(30.0)
    assert l2_proxy(10.0, 16, reference_rps=3200.0) == pytest.approx(15.0)


@pytest.mark.unit
def test_tensor_bytes_use_dtype_sizes_and_count_variable_dims_once() -> None:
    config = ModelConfig.model_validate(
        {
            "inputs": [{"name": "ids", "shape": [-1], "datatype": "INT64"}],
            "outputs": [{"name": "p", "shape": [2, 3], "datatype": "BF16"}],
        }
    )
    assert (tensor_bytes(config.inputs), tensor_bytes(config.outputs)) == (8, 12)


@pytest.mark.unit
def test_datatype_sizes_agree_with_torch() -> None:
    from agents.server.tensors import TORCH_DTYPES
    from agents.spec import DATATYPE_BYTES

    assert {name: TORCH_DTYPES[name].itemsize for name in DATATYPE_BYTES} == DATATYPE_BYTES


@pytest.mark.e2e
@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="needs a machine without CUDA")
def test_a_worker_without_cuda_reports_why_over_the_protocol(cnn_dir: Path) -> None:
    """The real worker process on this CPU machine: it must say why, not hang the profiler."""
    from agents.profiler.measure import Worker

    with pytest.raises(RuntimeError, match="profile worker: torch sees no CUDA device"):
        Worker(cnn_dir, {"CUDA_VISIBLE_DEVICES": ""}, seconds=0.1)
