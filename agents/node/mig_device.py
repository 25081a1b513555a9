"""The agent's handle on MIG: list GPUs and their slices, create a slice at a placement, destroy one.

`MigDevice` is the contract; `NvmlMig` is the real one on nvidia-ml-py's MIG calls (no shell
scraping of nvidia-smi), `agents.node.mig_fake.FakeMig` the stand-in the tests and `--fake-mig`
use. A slice here is one GPU instance with one compute instance spanning it (what
`nvidia-smi mig -cgi P -C` makes); servers reach it as CUDA_VISIBLE_DEVICES=MIG-<uuid>.

Errors keep NVML's meaning so the caller can act on them: `insufficient_resources` (the units are
taken), `in_use` (a process still runs in the slice), `not_supported` (no MIG, or MIG mode off),
`invalid_argument` (a start the profile cannot take), `not_found`, `unknown`. The manager turns
each into a status entry and tries again next loop; nothing here raises anything else.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol

from agents.node.mig_geometry import Geometry, geometry_for


class MigError(Exception):
    """An NVML MIG call failed; `code` is NVML's error, lower-case (`insufficient_resources`)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class MigGpu:
    """One physical GPU as far as MIG goes."""

    index: int
    name: str
    mig_enabled: bool
    geometry: Geometry | None


@dataclass(frozen=True, slots=True)
class Slice:
    """One existing MIG slice: a GPU instance (gi_id) and its compute instance (ci_id)."""

    gpu: int
    profile: str
    start: int
    gi_id: int
    ci_id: int | None
    uuid: str | None

    def key(self) -> tuple[int, str, int]:
        return (self.gpu, self.profile, self.start)


class MigDevice(Protocol):
    """What the agent needs from MIG. Every call may raise MigError; none raises anything else."""

    def gpus(self) -> list[MigGpu]: ...

    def slices(self, gpu: int) -> list[Slice]: ...

    def create(self, gpu: int, profile: str, start: int) -> Slice: ...

    def destroy(self, gpu: int, gi_id: int) -> None: ...

    def close(self) -> None: ...

    def describe(self) -> str: ...


_ERROR_NAMES = {
    "NVML_ERROR_INSUFFICIENT_RESOURCES": "insufficient_resources",
    "NVML_ERROR_IN_USE": "in_use",
    "NVML_ERROR_NOT_SUPPORTED": "not_supported",
    "NVML_ERROR_INVALID_ARGUMENT": "invalid_argument",
    "NVML_ERROR_NOT_FOUND": "not_found",
    "NVML_ERROR_NO_PERMISSION": "no_permission",
}

# compute slices of a GPU instance -> NVML's compute-instance profile index for one CI spanning it
_CI_PROFILE = {1: 0, 2: 1, 3: 2, 4: 3, 7: 4, 8: 5, 6: 6}
_MAX_INSTANCES = 8


class NvmlMig:
    """MIG through NVML. `nvml` is injectable (a stand-in module in tests); profiles are found by
    the name NVML gives them (`MIG 3g.40gb`), so profile IDs are never hard-coded."""

    def __init__(self, nvml: ModuleType) -> None:
        self._nv = nvml
        self._call("nvmlInit")
        count = self._call("nvmlDeviceGetCount")
        self._handles = [self._call("nvmlDeviceGetHandleByIndex", i) for i in range(count)]
        self._profiles: dict[int, dict[str, tuple[int, Any]]] = {}

    def _call(self, name: str, *args: Any) -> Any:
        """One NVML call; its NVMLError becomes a MigError with NVML's code."""
        try:
            return getattr(self._nv, name)(*args)
        except self._nv.NVMLError as exc:
            value = getattr(exc, "value", None)
            code = next((c for n, c in _ERROR_NAMES.items() if getattr(self._nv, n, object()) == value), "unknown")
            raise MigError(code, f"{name}: {exc}") from None

    def describe(self) -> str:
        return "nvml"

    def gpus(self) -> list[MigGpu]:
        out = []
        for index, handle in enumerate(self._handles):
            name = _text(self._call("nvmlDeviceGetName", handle))
            try:
                current, _pending = self._call("nvmlDeviceGetMigMode", handle)
            except MigError:
                current = 0  # a GPU without MIG answers not_supported
            out.append(MigGpu(index, name, current == self._nv.NVML_DEVICE_MIG_ENABLE, geometry_for(name)))
        return out

    def _profile_table(self, gpu: int) -> dict[str, tuple[int, Any]]:
        """Profile name -> (NVML profile index, profile info) for this GPU, asked once."""
        if gpu not in self._profiles:
            table = {}
            for index in range(self._nv.NVML_GPU_INSTANCE_PROFILE_COUNT):
                try:
                    info = self._call("nvmlDeviceGetGpuInstanceProfileInfo", self._handles[gpu], index)
                except MigError:
                    continue  # a profile this GPU does not have
                table[_text(info.name).removeprefix("MIG ")] = (index, info)
            self._profiles[gpu] = table
        return self._profiles[gpu]

    def slices(self, gpu: int) -> list[Slice]:
        uuids = self._mig_uuids(gpu)
        out = []
        for name, (_index, info) in self._profile_table(gpu).items():
            for gi in self._instances(gpu, info.id):
                gi_info = self._call("nvmlGpuInstanceGetInfo", gi)
                ci_id, uuid = uuids.get(gi_info.id, (None, None))
                out.append(Slice(gpu, name, gi_info.placement.start, gi_info.id, ci_id, uuid))
        return sorted(out, key=lambda s: s.start)

    def _instances(self, gpu: int, profile_id: int) -> list[Any]:
        array = (self._nv.c_nvmlGpuInstance_t * _MAX_INSTANCES)()
        count = ctypes.c_uint(0)
        self._call("nvmlDeviceGetGpuInstances", self._handles[gpu], profile_id, array, ctypes.byref(count))
        return [array[i] for i in range(count.value)]

    def _mig_handles(self, gpu: int) -> list[Any]:
        """The MIG devices (one per compute instance) NVML lists under this GPU."""
        out = []
        for i in range(self._call("nvmlDeviceGetMaxMigDeviceCount", self._handles[gpu])):
            try:
                out.append(self._call("nvmlDeviceGetMigDeviceHandleByIndex", self._handles[gpu], i))
            except MigError:
                continue  # an empty index
        return out

    def _mig_uuids(self, gpu: int) -> dict[int, tuple[int, str]]:
        """GPU instance id -> (compute instance id, MIG-... UUID)."""
        out = {}
        for handle in self._mig_handles(gpu):
            gi_id = self._call("nvmlDeviceGetGpuInstanceId", handle)
            out[gi_id] = (
                self._call("nvmlDeviceGetComputeInstanceId", handle),
                _text(self._call("nvmlDeviceGetUUID", handle)),
            )
        return out

    def create(self, gpu: int, profile: str, start: int) -> Slice:
        """The GPU instance at exactly this placement, then one compute instance spanning it; a
        compute instance that fails takes its GPU instance back down (no half-made slice)."""
        table = self._profile_table(gpu)
        if profile not in table:
            raise MigError("not_supported", f"GPU {gpu} has no MIG profile {profile} (it has {', '.join(table)})")
        _index, info = table[profile]
        placement = self._placement(gpu, profile, info.id, start)
        gi = self._call(
            "nvmlDeviceCreateGpuInstanceWithPlacement", self._handles[gpu], info.id, ctypes.byref(placement)
        )
        try:
            ci_profile = self._call(
                "nvmlGpuInstanceGetComputeInstanceProfileInfo",
                gi,
                _CI_PROFILE[info.sliceCount],
                self._nv.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED,
            )
            self._call("nvmlGpuInstanceCreateComputeInstance", gi, ci_profile.id)
        except MigError:
            self._call("nvmlGpuInstanceDestroy", gi)
            raise
        gi_id = self._call("nvmlGpuInstanceGetInfo", gi).id
        ci_id, uuid = self._mig_uuids(gpu).get(gi_id, (None, None))
        return Slice(gpu, profile, start, gi_id, ci_id, uuid)

    def _placement(self, gpu: int, profile: str, profile_id: int, start: int) -> Any:
        """NVML's own placement (start, size in memory units) for this start."""
        array = (self._nv.c_nvmlGpuInstancePlacement_t * _MAX_INSTANCES)()
        count = ctypes.c_uint(_MAX_INSTANCES)
        self._call(
            "nvmlDeviceGetGpuInstancePossiblePlacements", self._handles[gpu], profile_id, array, ctypes.byref(count)
        )
        placements = [array[i] for i in range(count.value)]
        for placement in placements:
            if placement.start == start:
                return placement
        allowed = ", ".join(str(p.start) for p in placements)
        raise MigError("invalid_argument", f"{profile} cannot start at {start} on GPU {gpu} (allowed: {allowed})")

    def destroy(self, gpu: int, gi_id: int) -> None:
        """Compute instances first, then the GPU instance; refused (in_use) while a process runs
        in it, which NVML also refuses."""
        for handle in self._mig_handles(gpu):
            if self._call("nvmlDeviceGetGpuInstanceId", handle) == gi_id:
                procs = self._call("nvmlDeviceGetComputeRunningProcesses", handle)
                if procs:
                    pids = ", ".join(str(p.pid) for p in procs)
                    raise MigError("in_use", f"GPU {gpu} instance {gi_id} still runs process(es) {pids}")
        gi = self._call("nvmlDeviceGetGpuInstanceById", self._handles[gpu], gi_id)
        array = (self._nv.c_nvmlComputeInstance_t * _MAX_INSTANCES)()
        count = ctypes.c_uint(0)
        for index in range(self._nv.NVML_COMPUTE_INSTANCE_PROFILE_COUNT):
            try:
                ci_info = self._call("nvmlGpuInstanceGetComputeInstanceProfileInfo", gi, index, 0)
                self._call("nvmlGpuInstanceGetComputeInstances", gi, ci_info.id, array, ctypes.byref(count))
            except MigError:
                continue
            for i in range(count.value):
                self._call("nvmlComputeInstanceDestroy", array[i])
        self._call("nvmlGpuInstanceDestroy", gi)

    def close(self) -> None:
        try:
            self._call("nvmlShutdown")
        except MigError:
            pass


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
