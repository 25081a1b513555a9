"""Checking an assignment's MIG slices against this VM's GPUs (at `apply`, and again when the daemon
reads the file): each refusal is exit 2 naming the field, and nothing is handed over.

Refused: a slice on a GPU that is not there or whose MIG mode is off, a profile the GPU does not
have, a start its profile cannot take there, and two slices that overlap (share a memory-slice
unit). One slice with two workloads is refused without a GPU, in agents/spec.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from agents.errors import InputError
from agents.node.mig_device import MigDevice, MigError, MigGpu, NvmlMig
from agents.node.mig_fake import FAKE_FILE, FakeMig
from agents.node.mig_geometry import occupied
from agents.spec import Assignment, SliceKey


def find_device(state_dir: Path) -> MigDevice | None:
    """The MIG device this state directory's agent uses: the fake one when `run --fake-mig` made
    it there, else NVML when it finds a GPU, else None."""
    if (state_dir / FAKE_FILE).exists():
        return FakeMig(state_dir / FAKE_FILE)
    try:
        import pynvml
    except ImportError:
        return None
    try:
        device = NvmlMig(pynvml)
    except MigError:
        return None
    return device


def inventory(state_dir: Path) -> dict[int, MigGpu]:
    """GPU index -> its MIG facts; empty when there is no GPU (or NVML cannot be asked)."""
    device = find_device(state_dir)
    if device is None:
        return {}
    try:
        return {g.index: g for g in device.gpus()}
    except MigError:
        return {}
    finally:
        device.close()


def check_slices(assignment: Assignment, source: str, gpus: Mapping[int, MigGpu]) -> None:
    """Raise InputError at the first slice this VM cannot cut."""
    held: dict[int, dict[int, tuple[int, SliceKey]]] = {}
    for i, server in enumerate(assignment.servers):
        key = server.mig_slice()
        if key is None:
            continue
        units = _units(source, i, key, gpus)
        taken = held.setdefault(key.gpu, {})
        for unit in sorted(units):
            other = taken.get(unit)
            if other is not None and other[1] != key:
                raise InputError(
                    source,
                    f"servers[{i}].mig_start",
                    f"slice {key.label()} overlaps slice {other[1].profile}@{other[1].start} (servers[{other[0]}]) "
                    f"on memory unit {unit}",
                )
        for unit in units:
            taken.setdefault(unit, (i, key))


def _units(source: str, i: int, key: SliceKey, gpus: Mapping[int, MigGpu]) -> set[int]:
    """The units the slice occupies; raise when the GPU cannot hold it at all."""
    gpu = gpus.get(key.gpu)
    if gpu is None:
        have = f"GPUs {sorted(gpus)}" if gpus else "no GPU"
        raise InputError(source, f"servers[{i}].gpu_index", f"a MIG slice on GPU {key.gpu}, but this VM has {have}")
    if not gpu.mig_enabled:
        raise InputError(
            source,
            f"servers[{i}].mig_profile",
            f"GPU {key.gpu} ({gpu.name}) has MIG mode off; enable it at boot (nvidia-smi -i {key.gpu} -mig 1 "
            "and a GPU reset) or assign the whole GPU",
        )
    if gpu.geometry is None:
        raise InputError(source, f"servers[{i}].mig_profile", f"the MIG geometry of {gpu.name} is not known")
    shape = gpu.geometry.profile(key.profile)
    if shape is None:
        have = ", ".join(gpu.geometry.profiles)
        raise InputError(
            source,
            f"servers[{i}].mig_profile",
            f"GPU {key.gpu} ({gpu.geometry.key}) has no profile {key.profile} ({have})",
        )
    if key.start not in shape.starts:
        allowed = ", ".join(map(str, shape.starts))
        raise InputError(
            source,
            f"servers[{i}].mig_start",
            f"{key.profile} may start at {allowed} on {gpu.geometry.key}, not {key.start}",
        )
    return occupied(gpu.geometry, key.profile, key.start)
