"""A state file that cannot be used: exit 2 with `STATE: what is wrong; what to do`, the file and
the fleet untouched. And state files are private: 0600 files in 0700 directories."""

from __future__ import annotations

import sqlite3
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from autoscaler.loop.state.store import Store
from tests.conftest import run_cli
from tests.fleet.test_ec2 import fleet_instances, policy_file, setup_templates
from tests.kit.backends import Moto


def _good(path: Path) -> None:
    store = Store(path)
    store._db.execute("PRAGMA synchronous=OFF")  # the pages matter here, not their fsyncs (2000 commits)
    for t in range(2000):  # a few pages of rates, so that cutting the file in half breaks a table
        store.add_rates(float(t), {"alex": 1.0}, {"alex": 2.0})
    store._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()


def garbage(path: Path) -> None:
    path.write_bytes(bytes(range(256)) * 40)


def truncated(path: Path) -> None:
    _good(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def read_only(path: Path) -> None:
    _good(path)
    path.chmod(0o444)


def directory(path: Path) -> None:
    path.mkdir()


def another_program(path: Path) -> None:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE customers (id INTEGER, name TEXT)")
    db.commit()
    db.close()


CASES: list[tuple[Callable[[Path], None], str, str]] = [
    (garbage, "is not an SQLite database", "move it aside"),
    (truncated, "is damaged, perhaps truncated", "move it aside"),
    (read_only, "is read-only (mode -r--r--r--)", "make it writable"),
    (directory, "is a directory, not a state file", "give --state a file path"),
    (another_program, "is an SQLite database of another program", "move it aside"),
]


def _snapshot(path: Path) -> bytes | None:
    return path.read_bytes() if path.is_file() else None


@pytest.mark.e2e
@pytest.mark.parametrize(("make", "problem", "remedy"), CASES, ids=[c[0].__name__ for c in CASES])
def test_a_bad_state_file_exits_2_and_touches_nothing(
    moto: Moto, tmp_path: Path, make: Callable[[Path], None], problem: str, remedy: str
) -> None:
    setup_templates(moto)
    policy = policy_file(tmp_path, moto)
    state = tmp_path / "state.sqlite"
    make(state)
    before = _snapshot(state)
    for args in (["--once"], []):  # the service refuses it too, before it serves or ticks
        res = run_cli("run", policy, *args, "--state", state, "--no-status")
        assert res.code == 2, res
        assert len(res.err.strip().splitlines()) == 1, res.err
        assert f"{state}: {problem}" in res.err and remedy in res.err, res.err
        assert "Traceback" not in res.err
    assert _snapshot(state) == before
    assert fleet_instances(moto) == []
    assert not Path(f"{state}-wal").exists() or make is read_only


@pytest.mark.unit
def test_state_files_are_private(tmp_path: Path) -> None:
    state = tmp_path / "new" / "dir" / "fleet.sqlite"
    Store(state).close()
    assert stat.S_IMODE(state.stat().st_mode) == 0o600
    assert stat.S_IMODE(state.parent.stat().st_mode) == 0o700
    shared = tmp_path / "shared.sqlite"
    Store(shared).close()
    shared.chmod(0o644)
    Store(shared).close()  # an existing file readable by others is made private on open
    assert stat.S_IMODE(shared.stat().st_mode) == 0o600
