"""The real NvmlMig class against a stand-in `pynvml` module that keeps NVML's MIG calls' shapes:
profiles found by index and named `MIG 3g.40gb`, ctypes arrays and counts filled by reference,
a GPU instance created at a placement and then its compute instance, MIG device handles with
UUIDs, and NVML's error values (no GPU needed; a MIG GPU has not run this yet)."""

from __future__ import annotations

import ctypes
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pynvml
import pytest

from agents.node.mig import MigManager
from agents.node.mig_device import MigError, NvmlMig
from agents.node.mig_geometry import GEOMETRIES, occupied
from agents.node.mps import SliceDirsOnly
from agents.spec import SliceKey

pytestmark = pytest.mark.unit

# NVML profile index -> (profile id, name) as an A100 80GB reports them
PROFILES = {
    0: (19, "1g.10gb"),
    1: (14, "2g.20gb"),
    2: (9, "3g.40gb"),
    3: (5, "4g.40gb"),
    4: (0, "7g.80gb"),
    9: (15, "1g.20gb"),
}


class StandInNvml:
    """One A100 80GB in MIG mode; `fail` maps a call name to the NVML error value it raises once."""

    NVMLError = pynvml.NVMLError
    c_nvmlGpuInstance_t = ctypes.c_uint
    c_nvmlComputeInstance_t = ctypes.c_uint
    c_nvmlGpuInstancePlacement_t = pynvml.c_nvmlGpuInstancePlacement_t

    def __init__(self) -> None:
        for name in dir(pynvml):
            if name.startswith("NVML_"):
                setattr(self, name, getattr(pynvml, name))
        self.gis: dict[int, dict[str, Any]] = {}
        self.next_gi = 1
        self.fail: dict[str, int] = {}
        self.procs: dict[int, list[int]] = {}
        self.calls: list[str] = []

    def _enter(self, name: str) -> None:
        self.calls.append(name)
        if name in self.fail:
            raise pynvml.NVMLError(self.fail.pop(name))

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(name)

    def nvmlInit(self) -> None:
        self._enter("nvmlInit")

    def nvmlShutdown(self) -> None:
        self._enter("nvmlShutdown")

    def nvmlDeviceGetCount(self) -> int:
        return 1

    def nvmlDeviceGetHandleByIndex(self, i: int) -> str:
        return f"gpu{i}"

    def nvmlDeviceGetName(self, handle: Any) -> bytes:
        return b"NVIDIA A100-SXM4-80GB"

    def nvmlDeviceGetMigMode(self, handle: Any) -> list[int]:
        return [1, 1]

    def nvmlDeviceGetGpuInstanceProfileInfo(self, handle: Any, index: int) -> Any:
        if index not in PROFILES:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        pid, name = PROFILES[index]
        return SimpleNamespace(id=pid, name=f"MIG {name}".encode(), sliceCount=int(name[0]))

    def _shape(self, pid: int) -> Any:
        name = next(n for p, n in PROFILES.values() if p == pid)
        return name, GEOMETRIES["a100-80gb"].profiles[name]

    def nvmlDeviceGetGpuInstancePossiblePlacements(self, handle: Any, pid: int, array: Any, count_ref: Any) -> None:
        _, shape = self._shape(pid)
        for i, start in enumerate(shape.starts):
            array[i] = pynvml.c_nvmlGpuInstancePlacement_t(start, shape.size)
        count_ref._obj.value = len(shape.starts)

    def nvmlDeviceCreateGpuInstanceWithPlacement(self, handle: Any, pid: int, placement_ref: Any) -> int:
        self._enter("nvmlDeviceCreateGpuInstanceWithPlacement")
        placement = placement_ref._obj
        name, shape = self._shape(pid)
        assert placement.size == shape.size
        taken = {u for g in self.gis.values() for u in occupied(GEOMETRIES["a100-80gb"], g["name"], g["start"])}
        if taken & set(shape.units(placement.start)):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES)
        gi = self.next_gi
        self.next_gi += 1
        self.gis[gi] = {"pid": pid, "name": name, "start": placement.start, "ci": None}
        return gi

    def nvmlGpuInstanceGetComputeInstanceProfileInfo(self, gi: int, index: int, engines: int) -> Any:
        return SimpleNamespace(id=index)

    def nvmlGpuInstanceCreateComputeInstance(self, gi: int, ci_pid: int) -> int:
        self._enter("nvmlGpuInstanceCreateComputeInstance")
        self.gis[gi]["ci"] = 0
        self.gis[gi]["ci_pid"] = ci_pid
        return gi * 100

    def nvmlGpuInstanceGetInfo(self, gi: int) -> Any:
        g = self.gis[gi]
        return SimpleNamespace(id=gi, profileId=g["pid"], placement=SimpleNamespace(start=g["start"]))

    def nvmlDeviceGetGpuInstances(self, handle: Any, pid: int, array: Any, count_ref: Any) -> None:
        found = [gi for gi, g in self.gis.items() if g["pid"] == pid]
        for i, gi in enumerate(found):
            array[i] = gi
        count_ref._obj.value = len(found)

    def nvmlDeviceGetGpuInstanceById(self, handle: Any, gi: int) -> int:
        if gi not in self.gis:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        return gi

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: Any) -> int:
        return 7

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: Any, i: int) -> tuple[str, int]:
        made = [gi for gi, g in sorted(self.gis.items()) if g["ci"] is not None]
        if i >= len(made):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        return ("mig", made[i])

    def nvmlDeviceGetGpuInstanceId(self, mig: tuple[str, int]) -> int:
        return mig[1]

    def nvmlDeviceGetComputeInstanceId(self, mig: tuple[str, int]) -> int:
        return 0

    def nvmlDeviceGetUUID(self, mig: tuple[str, int]) -> bytes:
        return f"MIG-0000000{mig[1]}-aaaa-bbbb-cccc-dddddddddddd".encode()

    def nvmlDeviceGetComputeRunningProcesses(self, mig: tuple[str, int]) -> list[Any]:
        return [SimpleNamespace(pid=p) for p in self.procs.get(mig[1], [])]

    def nvmlGpuInstanceGetComputeInstances(self, gi: int, ci_pid: int, array: Any, count_ref: Any) -> None:
        g = self.gis[gi]
        here = g["ci"] is not None and g.get("ci_pid") == ci_pid
        if here:
            array[0] = gi * 100
        count_ref._obj.value = 1 if here else 0

    def nvmlComputeInstanceDestroy(self, ci: int) -> None:
        self._enter("nvmlComputeInstanceDestroy")
        self.gis[ci // 100]["ci"] = None

    def nvmlGpuInstanceDestroy(self, gi: int) -> None:
        self._enter("nvmlGpuInstanceDestroy")
        if self.gis[gi]["ci"] is not None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_IN_USE)
        del self.gis[gi]


@pytest.fixture
def nvml() -> StandInNvml:
    return StandInNvml()


def test_creates_at_the_placement_then_its_compute_instance_and_lists_it(nvml: StandInNvml) -> None:
    mig = NvmlMig(nvml)  # type: ignore[arg-type]
    [gpu] = mig.gpus()
    assert gpu.mig_enabled and gpu.geometry is GEOMETRIES["a100-80gb"]
    made = mig.create(0, "3g.40gb", 4)
    assert (made.profile, made.start, made.gi_id, made.uuid) == (
        "3g.40gb",
        4,
        1,
        "MIG-00000001-aaaa-bbbb-cccc-dddddddddddd",
    )
    assert nvml.gis[1]["ci_pid"] == 2  # NVML's compute-instance profile index for 3 slices
    mig.create(0, "4g.40gb", 0)
    assert [(s.profile, s.start, s.uuid is not None) for s in mig.slices(0)] == [
        ("4g.40gb", 0, True),
        ("3g.40gb", 4, True),
    ]
    with pytest.raises(MigError) as err:
        mig.create(0, "1g.10gb", 5)
    assert err.value.code == "insufficient_resources"
    with pytest.raises(MigError) as err:
        mig.create(0, "3g.40gb", 2)
    assert err.value.code == "invalid_argument" and "allowed: 0, 4" in str(err.value)


def test_a_failed_compute_instance_takes_its_gpu_instance_back_down(nvml: StandInNvml) -> None:
    mig = NvmlMig(nvml)  # type: ignore[arg-type]
    nvml.fail["nvmlGpuInstanceCreateComputeInstance"] = pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES
    with pytest.raises(MigError) as err:
        mig.create(0, "2g.20gb", 2)
    assert err.value.code == "insufficient_resources" and nvml.gis == {} and mig.slices(0) == []


def test_destroy_refuses_while_a_process_runs_then_goes_ci_first(nvml: StandInNvml) -> None:
    mig = NvmlMig(nvml)  # type: ignore[arg-type]
    made = mig.create(0, "7g.80gb", 0)
    nvml.procs[made.gi_id] = [4242]
    with pytest.raises(MigError) as err:
        mig.destroy(0, made.gi_id)
    assert err.value.code == "in_use" and "4242" in str(err.value)
    nvml.procs.clear()
    mig.destroy(0, made.gi_id)
    assert nvml.gis == {}
    assert nvml.calls.index("nvmlComputeInstanceDestroy") < nvml.calls.index("nvmlGpuInstanceDestroy")


def test_the_manager_cuts_and_reports_through_nvml(nvml: StandInNvml, tmp_path: Path) -> None:
    manager = MigManager(NvmlMig(nvml), tmp_path / "mig", lambda s: SliceDirsOnly(tmp_path / str(s.gi_id), str(s.uuid)))  # type: ignore[arg-type]
    manager.adopt()
    nvml.fail["nvmlDeviceCreateGpuInstanceWithPlacement"] = pynvml.NVML_ERROR_NOT_SUPPORTED
    key = SliceKey(0, "1g.20gb", 6)
    manager.reconcile({key}, set())
    assert [(e["code"], e["slice"]) for e in manager.describe({})["errors"]] == [
        ("not_supported", "1g.20gb@6 on GPU 0")
    ]
    manager.reconcile({key}, set())
    status = manager.describe({key: ["w-0"]})
    assert status["errors"] == [] and status["device"] == "nvml"
    [slice_] = status["gpus"][0]["slices"]
    assert (slice_["profile"], slice_["start"], slice_["servers"], slice_["owned"]) == ("1g.20gb", 6, ["w-0"], True)
