"""The state file as a file: private, and when it cannot be used, one line saying what is wrong and
what to do, before anything touches the fleet.

Losing the state file is safe by design (the next start rediscovers every instance from its
`igniter:fleet` tags), so for a file that is not a usable state file the advice is to move it
aside, never to repair it. The file is 0600 and a directory the autoscaler creates 0700: the state
holds the fleet's addresses and assignments.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
from pathlib import Path

from autoscaler.config.errors import InputError
from autoscaler.fleet.procs import private_dirs

# Every table the store reads, with the columns it reads: a database without them is another
# program's file, or one from a version of igniter this one cannot read.
COLUMNS = {
    "meta": {"key", "value"},
    "instances": {"slot", "attempt", "instance_type", "state", "instance_id", "generation", "created_at"},
    "layouts": {"id", "at", "kind", "cost_per_hour", "body"},
    "applied": {"slot", "attempt", "generation", "servers", "at"},
    "actions": {"id", "tick", "kind", "slot", "detail", "status", "error", "started_at"},
    "rates": {"at", "workload", "observed", "planned"},  # before tick_rates: migrated when opened
    "tick_rates": {"id", "at", "names", "observed", "planned"},
    "rate_names": {"id", "digest", "names"},
    "ticks": {"id", "started_at", "finished_at", "ok", "summary"},
    "slot_tops": {"stem", "top"},
}
MOVE_ASIDE = "move it aside (mv {p} {p}.bad) and start again: the fleet is rediscovered from its instances' tags"


class StateFileError(InputError):
    """The state file cannot be used: `STATE: what is wrong; what to do` (exit 2, nothing changed)."""

    def __init__(self, path: Path, problem: str, remedy: str, field: str = "") -> None:
        super().__init__(path, field, f"{problem}; {remedy.format(p=path)}")


def prepare(path: Path) -> None:
    """Refuse what cannot be a state file; create the directory (0700) and the file (0600)."""
    if path.is_dir():
        raise StateFileError(
            path, "is a directory, not a state file", "give --state a file path, e.g. {p}/fleet.sqlite"
        )
    _make_parent(path.parent)
    if path.exists():
        _check_writable(path)
        _make_private(path)
        return
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        return
    except OSError as exc:
        raise StateFileError(path, f"cannot be created ({exc.strerror})", "check the directory's permissions") from None


def _make_parent(parent: Path) -> None:
    if parent.is_dir():
        return
    try:
        private_dirs(parent)
        if not parent.is_dir():
            raise FileExistsError(parent)
    except FileExistsError:
        if not parent.is_dir():
            raise StateFileError(parent, "is not a directory", "give --state a path in a directory") from None
    except OSError as exc:
        raise StateFileError(parent, f"cannot be created ({exc.strerror})", "give --state a writable place") from None


def _check_writable(path: Path) -> None:
    """A file without write permission is read-only on purpose, even for root (who could write it)."""
    mode = path.stat().st_mode
    if not stat.S_ISREG(mode):
        raise StateFileError(path, "is not a regular file", MOVE_ASIDE)
    if not mode & 0o222 or not os.access(path, os.R_OK | os.W_OK):
        raise StateFileError(
            path,
            f"is read-only (mode {stat.filemode(mode)}): the autoscaler records every action there before taking it",
            "make it writable (chmod 600 {p}), or give --state another file",
        )


def _make_private(path: Path) -> None:
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        os.chmod(path, mode & 0o700)


def broken(path: Path, exc: sqlite3.Error) -> StateFileError:
    """The SQLite error on open, as what is wrong with the file."""
    text = str(exc)
    if "readonly" in text or "read-only" in text:
        return StateFileError(path, f"cannot be written ({text})", "make it and its directory writable")
    if "not a database" in text:
        return StateFileError(path, "is not an SQLite database", MOVE_ASIDE)
    if "malformed" in text or "corrupt" in text:
        return StateFileError(path, f"is damaged, perhaps truncated ({text})", MOVE_ASIDE)
    return StateFileError(path, f"cannot be opened as a state file ({text})", MOVE_ASIDE)


def check(db: sqlite3.Connection, path: Path) -> None:
    """Before the schema is created: SQLite's own consistency check (a truncated file often opens,
    then fails later), and the columns of the tables of ours it has (none of ours: another
    program's database, which the autoscaler must not write to)."""
    problems = [r[0] for r in db.execute("PRAGMA quick_check").fetchall()]
    if problems != ["ok"]:
        raise StateFileError(path, f"is damaged, perhaps truncated ({problems[0]})", MOVE_ASIDE)
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()}
    ours = tables & set(COLUMNS)
    if tables - {"sqlite_sequence"} and not ours:
        raise StateFileError(
            path, f"is an SQLite database of another program (tables: {', '.join(sorted(tables))})", MOVE_ASIDE
        )
    for table in sorted(ours):
        have = {r[1] for r in db.execute(f"PRAGMA table_info({table})").fetchall()}
        if not COLUMNS[table] <= have:
            missing = ", ".join(sorted(COLUMNS[table] - have))
            raise StateFileError(path, f"is not an igniter state file (table {table} lacks {missing})", MOVE_ASIDE)


def check_meta(db: sqlite3.Connection, path: Path) -> bool:
    """Every value of the meta table is JSON (the controller state among them): one that is not
    is refused at open, naming its key, before a tick could stop on it with a traceback. False
    when there is no meta table yet (a new file)."""
    if db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'").fetchone() is None:
        return False
    for key, value in db.execute("SELECT key, value FROM meta").fetchall():
        try:
            json.loads(value)
        except (TypeError, ValueError) as exc:
            raise StateFileError(path, f"is not JSON ({exc})", MOVE_ASIDE, field=f"meta.{key}") from None
    return True
