"""Atomic JSON files: readers (status, the daemon) never see a half-written document.

Everything the agent writes is private to its user: files 0600, directories 0700. The assignment
names model paths and ports, status shows what runs where, and the lock and log files are nobody
else's business; the daemon and the SSH commands run as the same user, so they need no group.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700


def atomic_write_text(path: Path, text: str, durable: bool = False) -> None:
    """Write to a temp file in the same directory, then rename over `path`.

    `durable` also fsyncs the file and the directory, for what must survive a power cut (the
    desired assignment); frequently rewritten status files skip that cost.
    """
    private_dir(path.parent)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if durable:
        _fsync_dir(path.parent)


def private_dir(path: Path) -> Path:
    """Create `path` (and missing parents) mode 0700; tighten it if it exists with group or other bits."""
    path.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
    if path.stat().st_mode & 0o077 and path.stat().st_uid == os.getuid():
        path.chmod(PRIVATE_DIR)
    return path


def open_private(path: Path, flags: int = os.O_RDWR | os.O_CREAT | os.O_APPEND) -> int:
    """An fd on `path`, created 0600 (and made 0600 if an older version left it wider)."""
    private_dir(path.parent)
    fd = os.open(path, flags, PRIVATE_FILE)
    os.fchmod(fd, PRIVATE_FILE)
    return fd


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_json(path: Path, data: Any, durable: bool = False) -> None:
    atomic_write_text(path, json.dumps(data, indent=1, sort_keys=True) + "\n", durable)


def read_json(path: Path) -> Any | None:
    """The document, or None when it does not exist (yet) or is unreadable."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
