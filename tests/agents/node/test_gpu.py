"""GPU metrics: the real NVML monitor on this (GPU-less) machine, and its field mapping against a
stand-in NVML module, since no GPU exists here."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from agents.node.gpu import NoGpu, NvmlMonitor, health

pytestmark = pytest.mark.unit


def test_no_driver_means_no_gpus_not_a_crash() -> None:
    monitor = NvmlMonitor()
    try:
        if monitor.available():  # a lent GPU machine: the real reading must have the fields
            assert {"index", "power_w", "sm_clock_mhz", "health"} <= monitor.read()[0].keys()
        else:
            assert monitor.read() == [] and monitor.error
    finally:
        monitor.close()
    assert NoGpu().read() == [] and not NoGpu().available()


class FakeNvml:
    """Enough of pynvml's surface: one V100-like GPU; ECC unsupported; one Xid 79 pending."""

    NVML_CLOCK_SM = 1
    NVML_TEMPERATURE_GPU = 0
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
    NVML_VOLATILE_ECC = 0
    nvmlEventTypeXidCriticalError = 8

    class NVMLError(Exception):
        pass

    def __init__(self, fail_init: bool = False) -> None:
        self.fail_init = fail_init
        self.pending = [SimpleNamespace(device="h0", eventData=79)]
        self.shut = False

    def nvmlInit(self) -> None:
        if self.fail_init:
            raise self.NVMLError("Driver Not Loaded")

    def nvmlDeviceGetCount(self) -> int:
        return 1

    def nvmlDeviceGetHandleByIndex(self, i: int) -> str:
        return f"h{i}"

    def nvmlDeviceGetIndex(self, handle: str) -> int:
        return int(handle[1:])

    def nvmlDeviceGetName(self, h: str) -> bytes:
        return b"Tesla V100-SXM2-16GB"

    def nvmlDeviceGetUUID(self, h: str) -> str:
        return "GPU-1234"

    def nvmlDeviceGetUtilizationRates(self, h: str) -> Any:
        return SimpleNamespace(gpu=87, memory=40)

    def nvmlDeviceGetMemoryInfo(self, h: str) -> Any:
        return SimpleNamespace(used=2 * 2**30, total=16 * 2**30)

    def nvmlDeviceGetPowerUsage(self, h: str) -> int:
        return 187_500

    def nvmlDeviceGetEnforcedPowerLimit(self, h: str) -> int:
        return 300_000

    def nvmlDeviceGetClockInfo(self, h: str, kind: int) -> int:
        return 1485

    def nvmlDeviceGetMaxClockInfo(self, h: str, kind: int) -> int:
        return 1530

    def nvmlDeviceGetTemperature(self, h: str, sensor: int) -> int:
        return 61

    def nvmlDeviceGetTotalEccErrors(self, h: str, kind: int, counter: int) -> int:
        raise self.NVMLError("Not Supported")

    def nvmlEventSetCreate(self) -> str:
        return "events"

    def nvmlDeviceRegisterEvents(self, h: str, types: int, events: str) -> None:
        return None

    def nvmlEventSetWait_v2(self, events: str, timeout_ms: int) -> Any:
        if not self.pending:
            raise self.NVMLError("Timeout")
        return self.pending.pop()

    def nvmlEventSetFree(self, events: str) -> None:
        return None

    def nvmlShutdown(self) -> None:
        self.shut = True


def test_fields_are_mapped_to_units_and_unsupported_ones_are_none() -> None:
    fake = FakeNvml()
    monitor = NvmlMonitor(nvml=fake)  # type: ignore[arg-type]
    gpu = monitor.read()[0]
    assert gpu == {
        "index": 0,
        "name": "Tesla V100-SXM2-16GB",
        "uuid": "GPU-1234",
        "utilization_percent": 87,
        "memory_utilization_percent": 40,
        "memory_used_mb": 2048.0,
        "memory_total_mb": 16384.0,
        "power_w": 187.5,
        "power_limit_w": 300.0,
        "sm_clock_mhz": 1485,
        "sm_clock_max_mhz": 1530,
        "temperature_c": 61,
        "ecc_uncorrected_volatile": None,
        "xid_events": [79],
        "health": "degraded",
        "health_reasons": ["Xid error(s) [79]"],
    }
    monitor.close()
    assert fake.shut


def test_driver_failure_at_init_gives_an_empty_list() -> None:
    monitor = NvmlMonitor(nvml=FakeNvml(fail_init=True))  # type: ignore[arg-type]
    assert not monitor.available() and monitor.read() == [] and "Driver Not Loaded" in str(monitor.error)


def test_health_reasons() -> None:
    assert health({"ecc_uncorrected_volatile": 0, "xid_events": [], "utilization_percent": 3}) == ("ok", [])
    assert health({"ecc_uncorrected_volatile": 2, "utilization_percent": 3})[0] == "degraded"
