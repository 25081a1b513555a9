"""The agent's MIG slices: create the assigned ones, adopt its own after a restart, destroy the
ones no longer assigned once no server of ours runs in them, and report it all.

Ownership is a marker file in the state directory (`DIR/mig/owned.json`): a slice is ours when the
marker names its GPU and GPU-instance id. The intent is written before the create (and the
result after it), so a kill -9 between the two still finds the slice at that placement and adopts
it. A slice without our marker is never destroyed, only reported (`owned: false`), and a planned
slice whose units it holds waits with an error entry.

Every NVML error becomes an entry under `mig.errors` in the status (operation, slice, NVML's code,
message, attempts) and the operation is tried again on the next loop; an entry goes once the
operation succeeds or is no longer wanted.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents.fsutil import atomic_write_json, read_json
from agents.node.mig_device import MigDevice, MigError, MigGpu, Slice
from agents.node.mig_geometry import occupied
from agents.node.mps import Mps
from agents.spec import ServerSpec, SliceKey

log = logging.getLogger("igniter-agent")
OWNED_FILE = "owned.json"
MpsFactory = Callable[[Slice], Mps]


@dataclass
class MigErrorEntry:
    op: str
    slice: str
    code: str
    message: str
    since: float
    attempts: int = 1

    def to_json(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "slice": self.slice,
            "code": self.code,
            "message": self.message,
            "since": self.since,
            "attempts": self.attempts,
        }


@dataclass
class Owned:
    """One slice of ours: `slice` is None between the intent and the create's answer."""

    key: SliceKey
    slice: Slice | None = None
    mps: Mps | None = None
    created_at: float = field(default_factory=time.time)


class MigManager:
    """Owns the slices of one agent; `reconcile` is one loop's worth of MIG work."""

    def __init__(self, device: MigDevice, root: Path, mps_for: MpsFactory) -> None:
        self.device = device
        self.root = root
        self._mps_for = mps_for
        self.owned: dict[SliceKey, Owned] = {}
        self.existing: dict[int, list[Slice]] = {}
        self.errors: dict[tuple[str, str], MigErrorEntry] = {}
        self.waiting: dict[SliceKey, str] = {}
        self.wanted: set[SliceKey] = set()
        self.inventory: list[MigGpu] = []

    # -- ownership marker -------------------------------------------------------------------------
    def _save(self) -> None:
        entries = [
            {
                "gpu": o.key.gpu,
                "profile": o.key.profile,
                "start": o.key.start,
                "gi_id": o.slice.gi_id if o.slice else None,
                "uuid": o.slice.uuid if o.slice else None,
                "created_at": o.created_at,
            }
            for o in self.owned.values()
        ]
        atomic_write_json(self.root / OWNED_FILE, {"slices": entries}, durable=True)

    def adopt(self) -> None:
        """Take back the slices our marker names that still exist (an intent whose create
        succeeded before a crash is found at its placement); forget the rest."""
        data = read_json(self.root / OWNED_FILE)
        marked = data.get("slices", []) if isinstance(data, dict) else []
        if not self._observe():
            self.owned = {
                SliceKey(m["gpu"], m["profile"], m["start"]): Owned(SliceKey(m["gpu"], m["profile"], m["start"]))
                for m in marked
            }
            return  # NVML failed: keep the intents, the next loop matches them
        for m in marked:
            key = SliceKey(m["gpu"], m["profile"], m["start"])
            found = self._find(key, m.get("gi_id"))
            if found is not None:
                self.owned[key] = Owned(key, found, created_at=m.get("created_at") or time.time())
                log.info("MIG slice %s (%s): adopted", key.label(), found.uuid)
        self._save()

    def _find(self, key: SliceKey, gi_id: int | None) -> Slice | None:
        for s in self.existing.get(key.gpu, []):
            if s.key() == tuple(key) and (gi_id is None or s.gi_id == gi_id):
                return s
        return None

    # -- one loop ---------------------------------------------------------------------------------
    def _observe(self) -> bool:
        """Read the GPUs and their slices; an NVML error is an entry, and this loop does nothing."""
        try:
            self.inventory = self.device.gpus()
            self.existing = {g.index: self.device.slices(g.index) for g in self.inventory if g.mig_enabled}
        except MigError as exc:
            self._error("list", "all GPUs", exc)
            return False
        self._clear("list", "all GPUs")
        return True

    def reconcile(self, desired: Iterable[SliceKey], busy: Iterable[SliceKey]) -> None:
        """Destroy what is ours, unwanted and idle; then create what is wanted, where the units are free."""
        if not self._observe():
            return
        wanted, busy_set = set(desired), set(busy)
        self._forget_vanished()
        for key in [k for k in self.owned if k not in wanted and k not in busy_set]:
            self._destroy(self.owned[key])
        labels = {x.label() for x in wanted}
        for gone in [k for k in self.errors if k[0] == "create" and k[1] not in labels]:
            del self.errors[gone]
        self.wanted, self.waiting = wanted, {}
        for key in sorted(wanted - set(self.ready_keys())):
            self._create(key)

    def _forget_vanished(self) -> None:
        """A slice of ours someone else destroyed is no longer ours; an intent that did get made is."""
        for key, own in list(self.owned.items()):
            found = self._find(key, own.slice.gi_id if own.slice else None)
            if found is None and own.slice is not None:
                log.warning("MIG slice %s vanished (destroyed outside the agent)", key.label())
                self._stop_mps(own)
                del self.owned[key]
            elif found is not None:
                own.slice = found
        self._save()

    def _destroy(self, own: Owned) -> None:
        if own.slice is None:
            del self.owned[own.key]
            self._save()
            return
        self._stop_mps(own)
        try:
            self.device.destroy(own.key.gpu, own.slice.gi_id)
        except MigError as exc:
            self._error("destroy", own.key.label(), exc)
            return
        self._clear("destroy", own.key.label())
        log.info("MIG slice %s (%s): destroyed", own.key.label(), own.slice.uuid)
        gone = own.slice
        self.existing[own.key.gpu] = [s for s in self.existing.get(own.key.gpu, []) if s != gone]
        del self.owned[own.key]
        self._save()

    def _blocker(self, key: SliceKey) -> Slice | None:
        gpu = next((g for g in self.inventory if g.index == key.gpu), None)
        if gpu is None or gpu.geometry is None:
            return None
        units = occupied(gpu.geometry, key.profile, key.start)
        return next(
            (s for s in self.existing.get(key.gpu, []) if units & occupied(gpu.geometry, s.profile, s.start)), None
        )

    def _create(self, key: SliceKey) -> None:
        blocker = self._blocker(key)
        if blocker is not None:
            mine = any(
                o.slice is not None and o.slice.gi_id == blocker.gi_id and o.key.gpu == key.gpu
                for o in self.owned.values()
            )
            what = f"{blocker.profile}@{blocker.start}"
            if mine:
                self.waiting[key] = f"waits for slice {what} to drain and be destroyed"
            else:
                self._error(
                    "create",
                    key.label(),
                    MigError(
                        "insufficient_resources",
                        f"units held by slice {what} (GPU instance {blocker.gi_id}), which igniter did not create",
                    ),
                )
            return
        self.owned[key] = Owned(key)
        self._save()  # the intent first: a crash after the create still finds the slice ours
        try:
            made = self.device.create(key.gpu, key.profile, key.start)
        except MigError as exc:
            self._error("create", key.label(), exc)
            del self.owned[key]
            self._save()
            return
        self._clear("create", key.label())
        self.owned[key].slice = made
        self.existing.setdefault(key.gpu, []).append(made)
        self._save()
        log.info("MIG slice %s: created (%s)", key.label(), made.uuid)

    # -- what servers get -------------------------------------------------------------------------
    def ready_keys(self) -> list[SliceKey]:
        return [k for k, o in self.owned.items() if o.slice is not None and o.slice.uuid]

    def ready(self, key: SliceKey) -> bool:
        own = self.owned.get(key)
        return own is not None and own.slice is not None and bool(own.slice.uuid)

    def server_env(self, spec: ServerSpec) -> dict[str, str]:
        """CUDA_VISIBLE_DEVICES=MIG-<uuid> and the slice's own MPS daemon (started on first use)."""
        key = spec.mig_slice()
        own = self.owned.get(key) if key is not None else None
        if own is None or own.slice is None:
            raise MigError("not_found", f"slice {key.label() if key else '?'} is not created yet")
        if own.mps is None:
            own.mps = self._mps_for(own.slice)
        own.mps.ensure_running()
        return own.mps.server_env(spec)

    def _stop_mps(self, own: Owned) -> None:
        if own.mps is not None:
            own.mps.stop()
            own.mps = None

    def stop(self) -> None:
        """The agent is exiting: the slices stay (the next agent adopts them), their MPS daemons go."""
        for own in self.owned.values():
            self._stop_mps(own)
        self.device.close()

    # -- errors and status ------------------------------------------------------------------------
    def _error(self, op: str, label: str, exc: MigError) -> None:
        entry = self.errors.get((op, label))
        if entry is None:
            self.errors[(op, label)] = MigErrorEntry(op, label, exc.code, str(exc), time.time())
            log.error("MIG %s %s failed (%s): %s; retrying next loop", op, label, exc.code, exc)
        else:
            entry.code, entry.message, entry.attempts = exc.code, str(exc), entry.attempts + 1

    def _clear(self, op: str, label: str) -> None:
        if self.errors.pop((op, label), None) is not None:
            log.info("MIG %s %s succeeded after errors", op, label)

    def describe(self, servers: Mapping[SliceKey, list[str]]) -> dict[str, Any]:
        """status.json's `mig`: each GPU's MIG mode and its slices (ours and others), errors."""
        gpus = []
        for gpu in self.inventory:
            slices = [self._slice_json(s, servers) for s in self.existing.get(gpu.index, [])]
            made = {SliceKey(*s.key()) for s in self.existing.get(gpu.index, [])}
            pending = sorted(k for k in self.wanted if k.gpu == gpu.index and k not in made)
            slices += [self._pending_json(k, servers) for k in pending]
            gpus.append(
                {
                    "index": gpu.index,
                    "name": gpu.name,
                    "mig_mode": "enabled" if gpu.mig_enabled else "disabled",
                    "geometry": gpu.geometry.key if gpu.geometry else None,
                    "slices": slices,
                }
            )
        return {
            "enabled": True,
            "device": self.device.describe(),
            "gpus": gpus,
            "errors": [e.to_json() for e in self.errors.values()],
        }

    def _slice_json(self, s: Slice, servers: Mapping[SliceKey, list[str]]) -> dict[str, Any]:
        key = SliceKey(*s.key())
        own = self.owned.get(key)
        mine = own is not None and own.slice is not None and own.slice.gi_id == s.gi_id
        return {
            "profile": s.profile,
            "start": s.start,
            "uuid": s.uuid,
            "gi_id": s.gi_id,
            "ci_id": s.ci_id,
            "owned": mine,
            "state": "ready" if mine else "foreign",
            "servers": servers.get(key, []) if mine else [],
            "mps": own.mps.describe() if mine and own is not None and own.mps is not None else None,
        }

    def _pending_json(self, key: SliceKey, servers: Mapping[SliceKey, list[str]]) -> dict[str, Any]:
        return {
            "profile": key.profile,
            "start": key.start,
            "uuid": None,
            "gi_id": None,
            "ci_id": None,
            "owned": True,
            "state": "waiting" if key in self.waiting else "creating",
            "waiting_for": self.waiting.get(key),
            "servers": servers.get(key, []),
            "mps": None,
        }
