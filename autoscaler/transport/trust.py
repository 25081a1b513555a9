"""The trust step of a tick: pin each new instance's SSH host keys, learnt through the cloud API,
before its agent is contacted; forget the pins of instances that are gone.

Until an instance has published its keys (cloud-init prints them to the console at the end of
first boot, minutes after launch) it is simply not reachable yet: the controller does not contact
its agent, so the instance stays `running`, and `provider.ready_timeout_s` still replaces a node
that never gets there. That wait is logged at DEBUG only; a console that cannot be read, or keys
that cannot be pinned, are logged once per instance and message rather than on every tick.

Every booting instance's console is read each tick until its keys are there: after a scale-out
of hundreds, hundreds of GetConsoleOutput calls a tick for minutes. They are read READ_CONCURRENCY
at a time (one at a time, 200 at 0.15 s a call are 30 s of a tick); the keys are pinned in the
listing's order, on the tick's thread.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from autoscaler.fleet.base import HostKeySource, Instance, ProviderError

log = logging.getLogger(__name__)

READ_CONCURRENCY = 8  # consoles read at once (the provider's client is thread-safe: boto3's is)


class PinStore(Protocol):
    """Where pins live (transport/pins.py's PinnedHostKeys)."""

    def pinned_ids(self) -> set[str]: ...

    def pin(self, instance_id: str, address: str, port: int, key_lines: Sequence[str]) -> int: ...

    def retain(self, instance_ids: Collection[str]) -> list[str]: ...


class HostKeyTrust:
    """The HostKeyGate for providers that can publish host keys (see the module docstring)."""

    def __init__(self, source: HostKeySource, pins: PinStore, port: int) -> None:
        self.source = source
        self.pins = pins
        self.port = port
        self._pinned: set[str] = set()
        self._unusable: set[str] = set()  # published keys, none usable: not asked again
        self._noted: dict[str, str] = {}  # instance id -> the last problem logged for it

    def refresh(self, instances: Sequence[Instance]) -> None:
        listed = {i.id for i in instances}
        try:
            self.pins.retain(listed)
            self._pinned = self.pins.pinned_ids()
        except OSError as exc:
            log.error("the host key pin file cannot be used: %s; no agent is contacted until it can", exc)
            self._pinned = set()
            return
        wanted = [inst for inst in instances if self._wanted(inst)]
        for inst, published in zip(wanted, self._read_all(wanted), strict=True):
            self._learn(inst, published)
        self._unusable &= listed
        self._noted = {k: v for k, v in self._noted.items() if k in listed}

    def reachable(self, instance: Instance) -> bool:
        return instance.id in self._pinned

    def _wanted(self, inst: Instance) -> bool:
        return (
            inst.state == "running"
            and bool(inst.address)
            and inst.id not in self._pinned
            and inst.id not in self._unusable
        )

    def _read_all(self, wanted: Sequence[Instance]) -> list[list[str] | ProviderError | None]:
        """Each instance's published keys (or the provider's error), READ_CONCURRENCY at a time,
        in the order asked."""
        if len(wanted) <= 1:
            return [self._read(inst) for inst in wanted]
        with ThreadPoolExecutor(min(READ_CONCURRENCY, len(wanted)), thread_name_prefix="igniter-console") as pool:
            return list(pool.map(self._read, wanted))

    def _read(self, inst: Instance) -> list[str] | ProviderError | None:
        try:
            return self.source.host_keys(inst)
        except ProviderError as exc:
            return exc

    def _learn(self, inst: Instance, published: list[str] | ProviderError | None) -> None:
        if isinstance(published, ProviderError):
            self._note(inst.id, f"cannot read its console for host keys: {published}", logging.WARNING)
            return
        if published is None:
            log.debug("%s: no host keys on its console yet; its agent is not contacted", inst.id)
            return
        try:
            pinned = self.pins.pin(inst.id, inst.address or "", self.port, published)
        except OSError as exc:
            self._note(inst.id, f"cannot pin its host keys: {exc}", logging.ERROR)
            return
        if pinned:
            self._pinned.add(inst.id)
            return
        self._unusable.add(inst.id)
        log.error(
            "%s published no usable SSH host key on its console: its agent is never contacted, and the "
            "instance is replaced when provider.ready_timeout_s runs out",
            inst.id,
        )

    def _note(self, instance_id: str, message: str, level: int) -> None:
        if self._noted.get(instance_id) != message:
            self._noted[instance_id] = message
            log.log(level, "%s: %s", instance_id, message)
