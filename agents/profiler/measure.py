"""`igniter-agent profile`: measure, on a real GPU, the profile the performance model is fitted from.

What it measures (format: policies/profiles/README.md), each with worker processes under MPS shares:
- the solo grid, batch {1, 16, 32} x MPS {10, 50, 100} %: GPU latency (CUDA events), power and SM
  clock (NVML, sampled while the grid point runs);
- kernels per inference and the solo idle time (gaps between kernels), from torch.profiler;
- the pair probe: two instances at batch 1 and 20 % each, alone and together;
- the co-location sweep: 1..5 identical instances, total power, SM clock and per-kernel gaps;
- idle power, power cap, max SM clock (NVML), SM count (hence the MPS unit) and PCIe bandwidth.

L2 utilisation needs Nsight Compute, which this does not drive. It writes a proxy proportional to
throughput instead (the model takes L2 as linear in throughput, and only alpha_cache * L2 enters
the latency, so the proxy's scale cancels out); the profile's `source` says so.
"""

from __future__ import annotations

import json
import math
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import yaml

from agents.errors import InputError
from agents.node.gpu import NvmlMonitor
from agents.node.mps import NvidiaMps
from agents.profiler.schema import Profile
from agents.spec import DATATYPE_BYTES, ModelConfig, ServerSpec, load_model_config

GRID_BATCHES = (1, 16, 32)
GRID_MPS = (10.0, 50.0, 100.0)
PROBE_MPS = 20.0
SWEEP_COUNTS = (1, 2, 3, 4, 5)
SWEEP_BATCH = 16
L2_PROXY_AT_FULL = 30.0
STEP_TIMEOUT_S = 300.0


class Sampler:
    """Samples one GPU's power and SM clock in the background, for averaging over time windows."""

    def __init__(self, monitor: NvmlMonitor, gpu_index: int, period_s: float = 0.05) -> None:
        self._monitor, self._index, self._period_s = monitor, gpu_index, period_s
        self._samples: list[tuple[float, float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self._period_s):
            gpu = self._monitor.read()[self._index]
            if gpu["power_w"] is not None and gpu["sm_clock_mhz"] is not None:
                self._samples.append((time.monotonic(), gpu["power_w"], gpu["sm_clock_mhz"]))

    def mean(self, start: float, end: float) -> tuple[float, float]:
        """Mean (power W, SM clock MHz) between two monotonic times."""
        window = [(p, c) for t, p, c in self._samples if start <= t <= end]
        if not window:
            raise RuntimeError("NVML gave no power / clock samples; cannot profile this GPU")
        return sum(p for p, _ in window) / len(window), sum(c for _, c in window) / len(window)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(2)


class Worker:
    """A profile_worker process under one MPS share, spoken to line by line."""

    def __init__(
        self, model_dir: Path, env: dict[str, str], seconds: float, kernels: bool = False, pcie: bool = False
    ) -> None:
        cmd = [sys.executable, "-m", "agents.profiler.worker", "--model-dir", str(model_dir), "--seconds", str(seconds)]
        cmd += ["--kernels"] * kernels + ["--pcie"] * pcie
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env={**os.environ, **env}
        )
        self._lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        try:
            self.warm = self.expect("warm")
        except RuntimeError:
            self.close()
            raise

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)

    def expect(self, event: str) -> dict[str, Any]:
        """The next message, which must be `event`; a worker error, exit or silence raises."""
        deadline = time.monotonic() + STEP_TIMEOUT_S
        while True:
            try:
                message = json.loads(self._lines.get(timeout=1.0))
                break
            except queue.Empty:
                if self.proc.poll() is not None and self._lines.empty():
                    raise RuntimeError(f"profile worker exited with code {self.proc.returncode}") from None
                if time.monotonic() > deadline:
                    raise RuntimeError(f"profile worker sent nothing within {STEP_TIMEOUT_S:.0f} s") from None
        if message.get("event") != event:
            raise RuntimeError(f"profile worker: {message.get('error', message)}")
        return message

    def go(self, batch: int) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"go {batch}\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.communicate("quit\n", timeout=10)
            except (subprocess.TimeoutExpired, OSError):
                self.proc.kill()
                self.proc.wait()


class Session:
    """Everything one profiling run shares: MPS, the GPU sampler, the model."""

    def __init__(self, model_dir: Path, gpu_index: int, seconds: float, monitor: NvmlMonitor, workdir: Path) -> None:
        self.model_dir, self.gpu_index, self.seconds = model_dir, gpu_index, seconds
        self.mps = NvidiaMps(workdir / "mps")
        self.mps.ensure_running()
        self.sampler = Sampler(monitor, gpu_index)

    def workers(self, mps_percent: float, count: int = 1, **flags: bool) -> list[Worker]:
        spec = ServerSpec(
            name="profile",
            workload="profile",
            model_dir=str(self.model_dir),
            batch=1,
            mps_percent=mps_percent,
            gpu_index=self.gpu_index,
            port=1,
        )
        return [Worker(self.model_dir, self.mps.server_env(spec), self.seconds, **flags) for _ in range(count)]

    def together(self, workers: Sequence[Worker], batch: int) -> tuple[list[dict[str, Any]], float, float]:
        """All workers measure `batch` at once; (their results, mean power, mean SM clock)."""
        start = time.monotonic()
        for worker in workers:
            worker.go(batch)
        results = [worker.expect("result") for worker in workers]
        power, clock = self.sampler.mean(start + 0.25 * self.seconds, time.monotonic())
        return results, power, clock

    def close(self) -> None:
        self.sampler.stop()
        self.mps.stop()


def _closing(workers: list[Worker]) -> ExitStack:
    """Context manager that closes every worker however the block ends."""
    stack = ExitStack()
    for worker in workers:
        stack.callback(worker.close)
    return stack


def measure_grid(session: Session) -> tuple[dict[str, Any], dict[str, Any]]:
    """The 3x3 grid; also kernels, idle time and PCIe bandwidth from the 100 % worker."""
    grid: dict[str, list[list[float]]] = {"gpu_latency_ms": [], "power_w": [], "sm_clock_mhz": []}
    cells: dict[tuple[int, float], tuple[float, float, float]] = {}
    extra: dict[str, Any] = {}
    for mps in GRID_MPS:
        full = mps == 100.0
        workers = session.workers(mps, kernels=full, pcie=full)
        with _closing(workers):
            extra.update(workers[0].warm if full else {})
            for batch in GRID_BATCHES:
                (result,), power, clock = session.together(workers, batch)
                cells[(batch, mps)] = (result["latency_ms"], power, clock)
                if full and batch == 1:
                    extra["kernel_stats"] = result
    for key, index in (("gpu_latency_ms", 0), ("power_w", 1), ("sm_clock_mhz", 2)):
        grid[key] = [[cells[(b, r)][index] for r in GRID_MPS] for b in GRID_BATCHES]
    return grid, extra


def measure_probe(session: Session) -> dict[str, float]:
    """Batch 1 at 20 %: alone, then beside an identical instance."""
    with _closing(solo := session.workers(PROBE_MPS)):
        (alone,), _, _ = session.together(solo, 1)
    with _closing(pair := session.workers(PROBE_MPS, count=2)):
        (mine, other), power, clock = session.together(pair, 1)
    return {
        "solo_ms": alone["latency_ms"],
        "colocated_ms": mine["latency_ms"],
        "other_ms": other["latency_ms"],
        "power_w": power,
        "sm_clock_mhz": clock,
    }


def measure_sweep(session: Session) -> dict[str, list[float]]:
    """1..5 identical instances at once: total power, SM clock, and gaps per kernel."""
    sweep: dict[str, list[float]] = {
        "colocated_workloads": [],
        "power_w": [],
        "sm_clock_mhz": [],
        "idle_time_per_kernel_ms": [],
    }
    for count in SWEEP_COUNTS:
        with _closing(workers := session.workers(100.0, count=count, kernels=True)):
            results, power, clock = session.together(workers, SWEEP_BATCH)
        gaps = [max(0.0, r["span_ms"] - r["kernel_ms"]) / max(1, r["kernels"]) for r in results]
        for key, value in (
            ("colocated_workloads", count),
            ("power_w", power),
            ("sm_clock_mhz", clock),
            ("idle_time_per_kernel_ms", sum(gaps) / len(gaps)),
        ):
            sweep[key].append(value)
    return sweep


def tensor_bytes(specs: Sequence[Any]) -> int:
    """Bytes per request of a list of TensorSpecs (variable dimensions count as 1)."""
    return sum(math.prod(d if d > 0 else 1 for d in s.shape) * DATATYPE_BYTES[s.datatype] for s in specs)


def l2_proxy(latency_ms: float, batch: int, reference_rps: float) -> float:
    """L2 % stand-in: proportional to throughput, L2_PROXY_AT_FULL at the (32, 100 %) grid point."""
    return max(0.01, L2_PROXY_AT_FULL * (1000.0 * batch / latency_ms) / reference_rps)


def assemble(
    name: str,
    config: ModelConfig,
    hardware: dict[str, Any],
    grid: dict[str, Any],
    extra: dict[str, Any],
    probe: dict[str, float],
) -> dict[str, Any]:
    """Pure: measurements in, one profile document out (validated by the caller)."""
    lat = grid["gpu_latency_ms"]
    reference = 1000.0 * GRID_BATCHES[-1] / lat[-1][-1]
    stats = extra["kernel_stats"]
    model = {
        "kernels": max(1, int(stats["kernels"])),
        "input_bytes_per_request": tensor_bytes(config.inputs),
        "output_bytes_per_request": tensor_bytes(config.outputs),
        "solo_idle_time_ms": max(0.0, stats["span_ms"] - stats["kernel_ms"]),
        **grid,
        "l2_cache_utilization_percent_at_grid_diagonal": [
            l2_proxy(lat[i][i], b, reference) for i, b in enumerate(GRID_BATCHES)
        ],
        "pair_probe": {
            "active_time_solo_ms": probe["solo_ms"],
            "active_time_colocated_ms": probe["colocated_ms"],
            "power_w": probe["power_w"],
            "sm_clock_mhz": probe["sm_clock_mhz"],
            "interfering_l2_utilization_percent": l2_proxy(probe["other_ms"], 1, reference),
        },
    }
    return {
        "gpu": hardware.pop("gpu"),
        "source": "measured by igniter-agent profile; L2 utilisation is a throughput proxy (no Nsight Compute)",
        "hardware": hardware,
        "grid": {"batch_sizes": list(GRID_BATCHES), "mps_percent": list(GRID_MPS)},
        "models": {name: model},
    }


def _hardware(
    monitor: NvmlMonitor, gpu_index: int, warm: dict[str, Any], idle_power: float, sweep: dict[str, Any]
) -> dict[str, Any]:
    gpu = monitor.read()[gpu_index]
    return {
        "gpu": gpu["name"],
        "max_sm_clock_mhz": gpu["sm_clock_max_mhz"],
        "power_limit_w": gpu["power_limit_w"],
        "idle_power_w": idle_power,
        "resource_unit_percent": round(200.0 / warm["sm_count"], 3),
        "pcie_bandwidth_bytes_per_ms": warm["pcie_bytes_per_ms"],
        "memory_mb": gpu["memory_total_mb"],
        "colocation_sweep": sweep,
    }


def _merge_and_write(document: dict[str, Any], out: Path) -> None:
    """Validate against the profile schema; keep other models already in `out`."""
    old = yaml.safe_load(out.read_text()) if out.exists() else None
    if isinstance(old, dict) and old.get("gpu") == document["gpu"] and isinstance(old.get("models"), dict):
        document["models"] = {**old["models"], **document["models"]}
    Profile.model_validate(document)
    out.write_text(yaml.safe_dump(document, sort_keys=False))


def run(model_dir: Path, out: Path, model_name: str | None, gpu_index: int, seconds: float) -> int:
    """The CLI entry: exit 2 without a GPU; otherwise measure everything and write the profile."""
    config = load_model_config(model_dir)
    monitor = NvmlMonitor()
    if not monitor.available():
        raise InputError(
            "igniter-agent profile", "", f"no NVIDIA GPU found ({monitor.error}); profiling needs a real NVIDIA GPU"
        )
    if gpu_index >= len(monitor.read()):
        raise InputError("igniter-agent profile", "--gpu-index", f"{gpu_index} does not exist on this machine")
    with tempfile.TemporaryDirectory(prefix="igniter-profile-") as workdir:
        session = Session(model_dir.resolve(), gpu_index, seconds, monitor, Path(workdir))
        try:
            time.sleep(2.0)
            idle_power, _ = session.sampler.mean(time.monotonic() - 2.0, time.monotonic())
            grid, extra = measure_grid(session)
            probe, sweep = measure_probe(session), measure_sweep(session)
        finally:
            session.close()
    hardware = _hardware(monitor, gpu_index, extra, idle_power, sweep)
    _merge_and_write(assemble(model_name or model_dir.resolve().name, config, hardware, grid, extra, probe), out)
    print(f"wrote {out}")
    return 0
