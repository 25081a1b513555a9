"""The slot names a fleet has used, kept as the highest number per stem (issue 50 item 3).

A new slot is named one above the highest number its prefix ever had (core/layout/slots.py
SlotNames), because a launch token is derived from the slot's name and attempt: a name used again
would hand EC2 a token it already answered. A tick used to read every slot's newest attempt to
learn the names, a pass that grew with the fleet's history (each slot's newest record is kept for
good: store.PRUNE_CLOSED). The store now keeps `slot_tops`, a row per stem (`f-p3-`, `f-p3-spot-`,
`f-p3-surge`: a few a fleet), raised as records are written, and a tick reads those rows and the
attempts of the slots it may launch (Store.max_attempts(slots)). Opening a state file raises the
rows to its records once (a pass over the slot names at start, none a tick), so a file written
before this table existed, or by an older igniter that does not keep it, names no slot twice.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

from autoscaler.core.layout.slots import top_numbers

SCHEMA = """
CREATE TABLE IF NOT EXISTS slot_tops (stem TEXT PRIMARY KEY, top INTEGER NOT NULL);
"""
RAISE = "INSERT INTO slot_tops(stem, top) VALUES(?, ?) ON CONFLICT(stem) DO UPDATE SET top=MAX(top, excluded.top)"


def raise_tops(db: sqlite3.Connection, slots: Iterable[str]) -> None:
    """Raise each slot's stem to its number (a slot without one names no stem)."""
    db.executemany(RAISE, list(top_numbers(slots).items()))


def fill(db: sqlite3.Connection) -> None:
    """Raise the table to the records' slots (at opening: see the module docstring)."""
    raise_tops(db, [r[0] for r in db.execute("SELECT DISTINCT slot FROM instances")])


def read(db: sqlite3.Connection) -> dict[str, int]:
    """Stem -> the highest number a slot name with it has had."""
    return {r[0]: r[1] for r in db.execute("SELECT stem, top FROM slot_tops")}


def max_attempts(db: sqlite3.Connection, slots: Iterable[str], chunk: int = 500) -> dict[str, int]:
    """The newest attempt of each of `slots` that has a record: a primary-key lookup per slot
    (the ones a tick may launch), not a pass over every slot the fleet ever had."""
    names = sorted(set(slots))
    out: dict[str, int] = {}
    for i in range(0, len(names), chunk):
        part = names[i : i + chunk]
        sql = f"SELECT slot, MAX(attempt) FROM instances WHERE slot IN ({','.join('?' * len(part))}) GROUP BY slot"
        out.update({r[0]: r[1] for r in db.execute(sql, part)})
    return out
