"""GPU metrics through NVML (nvidia-ml-py): utilisation, memory, power, SM clock, temperature, health.

No driver, no library or no device means an empty list, never an exception: the agent must run
(and report that it has no GPU) on CPU machines too. Each metric a GPU does not support is None.
"""

from __future__ import annotations

from collections import deque
from types import ModuleType
from typing import Any, Protocol

XID_HISTORY = 20


class GpuMonitor(Protocol):
    """What the daemon and the profiler read GPU state through."""

    def available(self) -> bool: ...

    def read(self) -> list[dict[str, Any]]: ...

    def close(self) -> None: ...


class NoGpu:
    """`--no-gpu`: report no GPU even where one exists."""

    def available(self) -> bool:
        return False

    def read(self) -> list[dict[str, Any]]:
        return []

    def close(self) -> None:
        return None


def _load_nvml() -> ModuleType | None:
    try:
        import pynvml
    except ImportError:
        return None
    return pynvml


class NvmlMonitor:
    """The real monitor. `nvml` is injectable so the field mapping can be tested without a GPU."""

    def __init__(self, nvml: ModuleType | None = None) -> None:
        self._nvml = nvml if nvml is not None else _load_nvml()
        self._handles: list[Any] = []
        self._events: Any = None
        self._xids: dict[int, deque[int]] = {}
        self.error: str | None = None
        if self._nvml is None:
            self.error = "nvidia-ml-py is not installed"
            return
        try:
            self._nvml.nvmlInit()
            count = self._nvml.nvmlDeviceGetCount()
            self._handles = [self._nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        except (self._nvml.NVMLError, OSError) as exc:
            self.error = f"NVML unavailable: {exc}"
            self._handles = []
            return
        self._xids = {i: deque(maxlen=XID_HISTORY) for i in range(len(self._handles))}
        self._events = self._register_xid_events()

    def available(self) -> bool:
        return bool(self._handles)

    def _call(self, name: str, *args: Any) -> Any:
        """One NVML query; None where the GPU or driver does not support it."""
        try:
            return getattr(self._nvml, name)(*args)
        except (self._nvml.NVMLError, AttributeError):
            return None

    def _register_xid_events(self) -> Any:
        """Xid critical errors arrive as events; registration is refused on some GPUs (None then)."""
        events = self._call("nvmlEventSetCreate")
        if events is None:
            return None
        for handle in self._handles:
            self._call("nvmlDeviceRegisterEvents", handle, self._nvml.nvmlEventTypeXidCriticalError, events)
        return events

    def _drain_xids(self) -> None:
        """Collect the Xid events that arrived since the last read, without waiting."""
        if self._events is None:
            return
        for _ in range(100):
            data = self._call("nvmlEventSetWait_v2", self._events, 0)
            if data is None:
                return
            index = self._call("nvmlDeviceGetIndex", data.device)
            if index in self._xids:
                self._xids[index].append(int(data.eventData))

    def read(self) -> list[dict[str, Any]]:
        """A fresh reading of every GPU."""
        self._drain_xids()
        return [self._device(i, h) for i, h in enumerate(self._handles)]

    def _device(self, index: int, handle: Any) -> dict[str, Any]:
        nv = self._nvml
        util = self._call("nvmlDeviceGetUtilizationRates", handle)
        mem = self._call("nvmlDeviceGetMemoryInfo", handle)
        out: dict[str, Any] = {
            "index": index,
            "name": _text(self._call("nvmlDeviceGetName", handle)),
            "uuid": _text(self._call("nvmlDeviceGetUUID", handle)),
            "utilization_percent": getattr(util, "gpu", None),
            "memory_utilization_percent": getattr(util, "memory", None),
            "memory_used_mb": _mb(getattr(mem, "used", None)),
            "memory_total_mb": _mb(getattr(mem, "total", None)),
            "power_w": _milli(self._call("nvmlDeviceGetPowerUsage", handle)),
            "power_limit_w": _milli(self._call("nvmlDeviceGetEnforcedPowerLimit", handle)),
            "sm_clock_mhz": self._call("nvmlDeviceGetClockInfo", handle, nv.NVML_CLOCK_SM),
            "sm_clock_max_mhz": self._call("nvmlDeviceGetMaxClockInfo", handle, nv.NVML_CLOCK_SM),
            "temperature_c": self._call("nvmlDeviceGetTemperature", handle, nv.NVML_TEMPERATURE_GPU),
            "ecc_uncorrected_volatile": self._call(
                "nvmlDeviceGetTotalEccErrors", handle, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nv.NVML_VOLATILE_ECC
            ),
            "xid_events": list(self._xids.get(index, ())),
        }
        out["health"], out["health_reasons"] = health(out)
        return out

    def close(self) -> None:
        if self._handles:
            if self._events is not None:
                self._call("nvmlEventSetFree", self._events)
            self._call("nvmlShutdown")
            self._handles = []


def health(gpu: dict[str, Any]) -> tuple[str, list[str]]:
    """`ok`, or `degraded` with reasons: uncorrected ECC errors or Xid events since the agent started."""
    reasons = []
    if gpu.get("ecc_uncorrected_volatile"):
        reasons.append(f"{gpu['ecc_uncorrected_volatile']} uncorrected ECC error(s) since the driver loaded")
    if gpu.get("xid_events"):
        reasons.append(f"Xid error(s) {gpu['xid_events']}")
    if gpu.get("utilization_percent") is None and gpu.get("memory_total_mb") is None:
        reasons.append("the GPU does not answer NVML queries")
    return ("degraded" if reasons else "ok"), reasons


def _text(value: Any) -> str | None:
    return value.decode() if isinstance(value, bytes) else value


def _mb(value: int | None) -> float | None:
    return None if value is None else round(value / 2**20, 1)


def _milli(value: int | None) -> float | None:
    return None if value is None else round(value / 1000.0, 1)


def open_monitor(no_gpu: bool) -> GpuMonitor:
    """The monitor the CLI uses: none when told so, NVML otherwise (which may find no GPU)."""
    return NoGpu() if no_gpu else NvmlMonitor()
