"""Atomic JSON files: readers (status, the daemon) never see a half-written document."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def atomic_write_text(path: Path, text: str, durable: bool = False) -> None:
    """Write to a temp file in the same directory, then rename over `path`.

    `durable` also fsyncs the file and the directory, for what must survive a power cut (the
    desired assignment); frequently rewritten status files skip that cost.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
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
