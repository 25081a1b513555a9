"""Pinned host keys: a known_hosts file the autoscaler manages, each entry tied to one instance.

An entry is an OpenSSH known_hosts line whose trailing comment names the instance it was pinned
for: `10.0.1.23 ssh-ed25519 AAAA... igniter:instance=i-0abc`. OpenSSH and paramiko ignore the
comment, so an operator can still use the file (`ssh -o UserKnownHostsFile=FILE igniter@10.0.1.23`);
the autoscaler uses it to trust a key for the instance whose console published it, and no other:

- keys are only ever added by `pin`, from the cloud API (see fleet/console.py), never from a host;
- pinning an address replaces every older entry for that address (a terminated instance's private
  IP handed to a new one), and `retain` drops the entries of instances that are gone;
- lines without the marker (written by hand) are kept, but never trusted for a fleet instance.

The file is re-read on every call (it is small, and an operator's edit takes effect at once) and
rewritten atomically, so a crash never leaves half a file.
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
from collections.abc import Collection, Sequence
from pathlib import Path

import paramiko
from paramiko.hostkeys import HostKeyEntry

log = logging.getLogger(__name__)

MARKER = "igniter:instance="
HEADER = (
    "# Managed by the igniter autoscaler: SSH host keys pinned from each instance's console (cloud API).\n"
    "# A line ending in igniter:instance=<id> is trusted for that instance only; it is removed when\n"
    "# the instance is gone. Lines without that marker are kept but not trusted for fleet instances.\n"
)
_HEADER_LINES = frozenset(HEADER.splitlines())
# Key types in the order the client should ask for them: paramiko prefers the first pinned type.
PREFERENCE = ("ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521", "ssh-rsa")


def host_pattern(address: str, port: int) -> str:
    """The known_hosts name OpenSSH and paramiko look up: `addr`, or `[addr]:port` off port 22."""
    return address if port == 22 else f"[{address}]:{port}"


class PinnedHostKeys:
    """The pin file; see the module docstring. Safe to share between the trust step and the transport."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def keys_for(self, instance_id: str) -> list[paramiko.PKey]:
        """The keys pinned for this instance, preferred type first; [] when none (never contact it)."""
        keys = [key for owner, key in self._entries() if owner and owner == instance_id]
        return sorted(keys, key=_rank)

    def pinned_ids(self) -> set[str]:
        return {owner for owner, _ in self._entries() if owner}

    def pin(self, instance_id: str, address: str, port: int, key_lines: Sequence[str]) -> int:
        """Pin the keys the instance's console published for its address (replacing whatever was
        pinned for that address, or for this instance, before); returns how many were usable."""
        pattern = host_pattern(address, port)
        keys = [k for k in (_load(instance_id, line) for line in key_lines) if k is not None]
        if not keys:
            return 0
        with self._lock:
            lines = self._read()
            replaced = {_owner(line) for line in lines if _names(line) == pattern} - {instance_id}
            kept = [line for line in lines if _names(line) != pattern and _owner(line) != instance_id]
            added = [f"{pattern} {k.get_name()} {k.get_base64()} {MARKER}{instance_id}" for k in keys]
            self._write(kept + added)
        for old in sorted(replaced):
            log.info(
                "%s: address reused; the host keys pinned for it (%s) are replaced", pattern, old or "unmarked line"
            )
        log.info(
            "pinned %d host key(s) of %s at %s from its console: %s",
            len(keys),
            instance_id,
            pattern,
            ", ".join(f"{k.get_name()} {k.fingerprint}" for k in keys),
        )
        return len(keys)

    def retain(self, instance_ids: Collection[str]) -> list[str]:
        """Drop the pins of every instance not in `instance_ids`; returns the dropped instance ids."""
        with self._lock:
            lines = self._read()
            gone = sorted({o for o in map(_owner, lines) if o and o not in instance_ids})
            if gone:
                self._write([line for line in lines if _owner(line) not in gone])
        for instance_id in gone:
            log.info("%s is gone: its pinned host keys are removed", instance_id)
        return gone

    # -- the file ---------------------------------------------------------------------------------
    def _entries(self) -> list[tuple[str, paramiko.PKey]]:
        """(owner, key) for every loadable entry; owner "" for lines written by hand."""
        out = []
        for line in self._read():
            entry = _entry(line)
            if entry is not None:
                out.append((_owner(line), entry.key))
        return out

    def _read(self) -> list[str]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        return [line for line in text.splitlines() if line.strip() and line not in _HEADER_LINES]

    def _write(self, lines: list[str]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        mode = self.path.stat().st_mode & 0o777 if self.path.exists() else 0o600
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(HEADER + "".join(f"{line}\n" for line in lines))
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp, mode)
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def _names(line: str) -> str:
    return "" if line.lstrip().startswith("#") else line.split()[0]


def _owner(line: str) -> str:
    """The instance a line was pinned for ("" for a comment or a line written by hand)."""
    fields = line.split()
    tail = fields[-1] if len(fields) > 3 else ""
    return tail[len(MARKER) :] if tail.startswith(MARKER) and not line.lstrip().startswith("#") else ""


def _entry(line: str) -> HostKeyEntry | None:
    if line.lstrip().startswith(("#", "@")):
        return None
    try:
        return HostKeyEntry.from_line(line)
    except Exception:
        return None


def _load(instance_id: str, key_line: str) -> paramiko.PKey | None:
    """One published key, loaded by paramiko; a key it cannot load is skipped with a log line."""
    fields = key_line.split()
    entry = _entry(f"pin {fields[0]} {fields[1]}") if len(fields) >= 2 else None
    if entry is not None and entry.key.get_base64() != fields[1]:
        entry = None  # paramiko zero-pads a short blob: only an exact round trip is the published key
    if entry is None:
        log.warning("%s: ignoring a host key from its console that cannot be loaded: %.100r", instance_id, key_line)
    return entry.key if entry is not None else None


def _rank(key: paramiko.PKey) -> int:
    name = key.get_name()
    return PREFERENCE.index(name) if name in PREFERENCE else len(PREFERENCE)
