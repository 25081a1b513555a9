"""`leader: {kind: local}`: an OS lock (fcntl.flock) on `<lock_dir>/<fleet>.lock`, held for the
process's life.

The kernel releases the lock when the process dies, however it dies (kill -9 included), so a
standby on the same host takes over at its next attempt; and while the process lives the lock
cannot be taken from it, so a term never runs out (a paused leader stays the leader until it is
killed). The file keeps the fencing counter (one more per new leader) and says who holds it.
The lock is keyed by the fleet, not by the state file: two state files on one host share it, and
so do two users: the host-wide default directory (HOST_LOCK_DIR) is made like /tmp (1777: anyone
creates a lock file, nobody removes another's), a lock file stays private (0600), and a user who
cannot open a fleet's lock file (another user made it) is refused with that user's name: one
user runs a fleet's autoscalers on a host.
Lock descriptors are not inherited by child processes (Python opens them close-on-exec), so the
agents the local provider starts never hold it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import pwd
from pathlib import Path
from typing import Any

from autoscaler.leader.base import LeaseError, Term

HOST_LOCK_DIR = Path("/tmp/igniter-locks")  # the default lock_dir: one per host, whoever runs igniter


class LocalLease:
    kind = "local"
    lease_s = 0.0  # no expiry: the lock lives as long as the process

    def __init__(self, path: Path, owner: str) -> None:
        self.path = path
        self.owner = owner
        self._fd: int | None = None
        self._token = 0

    def attempt(self, now: float) -> Term:
        if self._fd is not None:
            return Term(leader=True, token=self._token, holder=self.owner, valid_until=math.inf)
        fd = self._open()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            record = self._read()
            held = str(record.get("owner") or "another process")
            token = int(record.get("token") or 0)
            return Term(leader=False, token=token, holder=held, note=f"{held} holds {self.path}", holder_alive=True)
        self._fd, self._token = fd, int(self._read().get("token") or 0) + 1
        self._write({"owner": self.owner, "token": self._token, "pid": os.getpid()})
        return Term(leader=True, token=self._token, holder=self.owner, valid_until=math.inf)

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            self._write({"owner": "", "token": self._token})
        os.close(self._fd)  # closing the descriptor releases the lock
        self._fd = None

    def _open(self) -> int:
        try:
            self._make_dir()
            return os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            err = LeaseError(f"cannot open the lock file {self.path}: {exc.strerror}{_whose(self.path)}")
            err.permanent = True
            raise err from None

    def _make_dir(self) -> None:
        """The lock directory: the host-wide one made as /tmp is (1777), so every user of the host
        shares it; one the policy names, private (0700)."""
        directory = self.path.parent
        if directory.is_dir():
            return
        if directory != HOST_LOCK_DIR:
            directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            return
        with contextlib.suppress(FileExistsError):
            directory.mkdir()
            os.chmod(directory, 0o1777)

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8") or "{}")
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _write(self, record: dict[str, Any]) -> None:
        """Rewrite the record in place (the lock is on this inode, so no rename)."""
        assert self._fd is not None
        body = json.dumps(record).encode()
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, body, 0)
        os.fsync(self._fd)


def _whose(path: Path) -> str:
    """For a lock file another user made: whose it is, and what that means."""
    try:
        uid = path.stat().st_uid
    except OSError:
        return ""
    if uid == os.geteuid():
        return ""
    try:
        name = f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        name = f"uid {uid}"
    return f" (it belongs to user {name}: only that user's autoscalers lead this fleet on this host)"
