"""Every directory the autoscaler creates for its state is private (0700), the intermediate ones
too: `mkdir -p` semantics gave the parents it made 0755."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from autoscaler.loop.state.store import Store

pytestmark = pytest.mark.unit


def _modes(top: Path, leaf: Path) -> dict[str, int]:
    out = {}
    for d in (leaf, *leaf.parents):
        if d == top:
            break
        out[str(d.relative_to(top))] = stat.S_IMODE(d.stat().st_mode)
    return out


def test_the_state_files_new_directories_are_all_0700(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        Store(tmp_path / "a" / "b" / "c" / "state.sqlite").close()
    finally:
        os.umask(old)
    assert _modes(tmp_path, tmp_path / "a" / "b" / "c") == {"a/b/c": 0o700, "a/b": 0o700, "a": 0o700}


def test_the_local_providers_and_gateways_new_directories_are_all_0700(tmp_path: Path) -> None:
    from autoscaler.fleet.procs import private_dirs

    old = os.umask(0o022)
    try:
        private_dirs(tmp_path / "x" / "y")
        private_dirs(tmp_path / "x" / "y")  # again: nothing to do
    finally:
        os.umask(old)
    assert _modes(tmp_path, tmp_path / "x" / "y") == {"x/y": 0o700, "x": 0o700}
