"""A fake MIG device for machines without one: the tests, and `igniter-agent run --fake-mig KIND`.

It answers as NVML does: a placement the profile cannot take is `invalid_argument`, units already
taken are `insufficient_resources`, a GPU whose MIG mode is off (or a profile it lacks) is
`not_supported`, and destroying a slice that a live process still uses is `in_use` (a process
uses a slice when its CUDA_VISIBLE_DEVICES names the slice's MIG-<uuid>, read from /proc). Its
state is a JSON file (under a lock), so it outlives the agent as a real GPU's slices do, and a
test can inject faults into a running agent: `FakeMig.inject(path, "create",
"insufficient_resources", times=2)` makes the next two creates fail so.
"""

from __future__ import annotations

import fcntl
import json
import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agents.fsutil import atomic_write_json, open_private
from agents.node.env_clients import processes_with
from agents.node.mig_device import MigError, MigGpu, Slice
from agents.node.mig_geometry import GEOMETRIES, occupied

FAKE_FILE = "fake-mig.json"
GPU_NAMES = {
    "a100-40gb": "NVIDIA A100-SXM4-40GB",
    "a100-80gb": "NVIDIA A100-SXM4-80GB",
    "h100-80gb": "NVIDIA H100 80GB HBM3",
    "h200-141gb": "NVIDIA H200",
}
OPS = ("create", "destroy", "list")
CODES = ("insufficient_resources", "in_use", "not_supported", "unknown")


def processes_using(mig_uuid: str, run_dir: Path) -> list[int]:
    """Live processes whose CUDA_VISIBLE_DEVICES is this slice (those we may read: ours); the
    agent's servers state theirs under `run_dir` (env_clients.py)."""
    return processes_with("CUDA_VISIBLE_DEVICES", mig_uuid, run_dir)


class FakeMig:
    """The MigDevice contract over a JSON file (see the module docstring)."""

    def __init__(self, path: Path, users: Callable[[str], list[int]] | None = None) -> None:
        """`users`: a slice's processes by its uuid; by default the environment's (processes_using),
        with the servers of the agent whose state directory holds `path`."""
        self.path = path
        self._users = users or (lambda uuid: processes_using(uuid, path.parent / "run"))
        if not path.exists():
            raise MigError("not_supported", f"{path}: no fake MIG device here (make it with FakeMig.make)")

    @classmethod
    def make(
        cls,
        path: Path,
        kind: str,
        gpus: int = 1,
        mig_off: tuple[int, ...] = (),
        users: Callable[[str], list[int]] | None = None,
    ) -> FakeMig:
        """A fresh fake with `gpus` GPUs of one kind, MIG mode on except for `mig_off`; an existing
        file is kept (a restarted agent finds its slices)."""
        if kind not in GEOMETRIES:
            raise ValueError(f"unknown fake MIG GPU {kind!r} (one of {', '.join(GEOMETRIES)})")
        if not path.exists():
            doc = {
                "kind": kind,
                "gpus": [
                    {"index": i, "mig_enabled": i not in mig_off, "next_id": 1, "instances": []} for i in range(gpus)
                ],
                "faults": [],
            }
            atomic_write_json(path, doc, durable=True)
        return cls(path, users)

    @classmethod
    def inject(cls, path: Path, op: str, code: str, times: int = 1) -> None:
        """Make the next `times` calls of `op` fail with NVML's `code`."""
        with _locked(path) as doc:
            doc["faults"].append({"op": op, "code": code, "times": times})

    def describe(self) -> str:
        return f"fake:{self._read()['kind']}"

    def _read(self) -> dict[str, Any]:
        with _locked(self.path, write=False) as doc:
            return doc

    def gpus(self) -> list[MigGpu]:
        with _locked(self.path) as doc:
            _fault(doc, "list")
            kind = doc["kind"]
            return [MigGpu(g["index"], GPU_NAMES[kind], g["mig_enabled"], GEOMETRIES[kind]) for g in doc["gpus"]]

    def slices(self, gpu: int) -> list[Slice]:
        with _locked(self.path) as doc:
            _fault(doc, "list")
            return [_slice(gpu, inst) for inst in _gpu(doc, gpu)["instances"]]

    def create(self, gpu: int, profile: str, start: int) -> Slice:
        with _locked(self.path) as doc:
            _fault(doc, "create")
            entry = _gpu(doc, gpu)
            geometry = GEOMETRIES[doc["kind"]]
            shape = geometry.profile(profile)
            if shape is None:
                raise MigError("not_supported", f"GPU {gpu} has no MIG profile {profile}")
            if start not in shape.starts:
                raise MigError("invalid_argument", f"{profile} cannot start at {start} (allowed: {shape.starts})")
            taken = {u for i in entry["instances"] for u in occupied(geometry, i["profile"], i["start"])}
            if taken & set(shape.units(start)):
                raise MigError("insufficient_resources", f"units {sorted(taken & set(shape.units(start)))} are taken")
            inst = {"gi_id": entry["next_id"], "ci_id": 0, "profile": profile, "start": start}
            inst["uuid"] = f"MIG-{uuid.uuid4()}"
            entry["next_id"] += 1
            entry["instances"].append(inst)
            return _slice(gpu, inst)

    def destroy(self, gpu: int, gi_id: int) -> None:
        with _locked(self.path) as doc:
            _fault(doc, "destroy")
            entry = _gpu(doc, gpu)
            inst = next((i for i in entry["instances"] if i["gi_id"] == gi_id), None)
            if inst is None:
                raise MigError("not_found", f"GPU {gpu} has no GPU instance {gi_id}")
            users = self._users(inst["uuid"])
            if users:
                raise MigError("in_use", f"GPU {gpu} instance {gi_id} still runs process(es) {users}")
            entry["instances"].remove(inst)

    def close(self) -> None:
        return None


def _gpu(doc: dict[str, Any], gpu: int) -> dict[str, Any]:
    if not 0 <= gpu < len(doc["gpus"]):
        raise MigError("not_found", f"no GPU {gpu}")
    entry: dict[str, Any] = doc["gpus"][gpu]
    if not entry["mig_enabled"]:
        raise MigError("not_supported", f"GPU {gpu} has MIG mode off")
    return entry


def _slice(gpu: int, inst: dict[str, Any]) -> Slice:
    return Slice(gpu, inst["profile"], inst["start"], inst["gi_id"], inst["ci_id"], inst["uuid"])


def _fault(doc: dict[str, Any], op: str) -> None:
    """Raise the first injected fault for `op`, counting it down."""
    for fault in doc["faults"]:
        if fault["op"] == op and fault["times"] > 0:
            fault["times"] -= 1
            doc["faults"] = [f for f in doc["faults"] if f["times"] > 0]
            raise MigError(fault["code"], f"injected fault: {op} -> {fault['code']}")


@contextmanager
def _locked(path: Path, write: bool = True) -> Iterator[dict[str, Any]]:
    """The document under an exclusive lock; written back (atomically) when the block ends,
    also when it raised (a consumed fault stays consumed)."""
    fd = open_private(path.with_suffix(".lock"))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        doc = json.loads(path.read_text(encoding="utf-8"))
        try:
            yield doc
        finally:
            if write:
                atomic_write_json(path, doc)
    finally:
        os.close(fd)
