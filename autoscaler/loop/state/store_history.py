"""The store's history, kept small (issue 50 item 3): how tick summaries, layouts, actions and
rates are written to the state file and read back.

At 1,000 instances and 2,000 workloads a tick wrote a 372 KB summary, a 1.1 MB layout, an
assignment per reconfigured instance and a row per workload: a day's file was 1.7 GB. Now:

- a tick's `summary` is compact (maps and lists of more than COMPACT_ITEMS entries become their
  count, or their first entries and how many more); its whole summary (`full_summary`) is kept
  for the newest FULL_TICKS ticks only;
- a layout's JSON is stored zlib-compressed (a BLOB; a TEXT body of an older file reads too),
  the newest LAYOUTS_KEPT;
- an action keeps its assignment's generation and number of servers, not the assignment (the
  `applied` table holds what each agent was last told), and only failed actions are indexed by
  slot (what `last_error` looks up);
- rates are one `tick_rates` row a tick: observed and planned as little-endian float64 arrays in
  the order of a `rate_names` row (the sorted workload names, shared by every tick with the same
  workloads). A missing rate is NaN, which reads back as missing, as SQL NULL did.

A state file with the older `rates` table (a row per workload a tick) is migrated when opened.

The newest rows are also kept in memory (`Rates`' window, from the `since` of the last `window`
read on): a tick read its hour of rates back from SQLite as ~240,000 tuples at 1,000 workloads
(issue 50: 0.24 s a tick at hour 1). SQLite stays the durable copy; another connection's commit
(`PRAGMA data_version`) or a failed write drops the window, and the next read fills it again.
"""

from __future__ import annotations

import array
import bisect
import hashlib
import json
import math
import sqlite3
import sys
import zlib
from collections.abc import Iterable, Mapping
from operator import itemgetter
from typing import Any

import numpy as np

from autoscaler.core.capacity.forecast import Columns

COMPACT_ITEMS = 10  # a summary's map or list longer than this is kept as its count (or first items)
FULL_TICKS = 10  # ticks whose whole summary is kept
LAYOUTS_KEPT = 100  # layouts kept (only the newest is read back; the rest are an audit trail)

SCHEMA = """
CREATE TABLE IF NOT EXISTS rate_names (
  id INTEGER PRIMARY KEY AUTOINCREMENT, digest TEXT NOT NULL UNIQUE, names TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tick_rates (
  id INTEGER PRIMARY KEY AUTOINCREMENT, at REAL NOT NULL, names INTEGER NOT NULL,
  observed BLOB NOT NULL, planned BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS tick_rates_by_time ON tick_rates (at);
CREATE INDEX IF NOT EXISTS actions_failed ON actions (slot, kind) WHERE status = 'failed';
DROP INDEX IF EXISTS actions_by_slot;
"""


# -- tick summaries ---------------------------------------------------------------------------------
def compact(summary: Mapping[str, Any]) -> dict[str, Any]:
    """The summary with every map or list in it of more than COMPACT_ITEMS entries cut down: a
    map to {"count": n} (per-workload maps: the rates are in tick_rates), a list to its first
    entries and a last one saying how many more."""
    return {k: _compact(v) for k, v in summary.items()}


def _compact(value: Any) -> Any:
    if isinstance(value, Mapping):
        if len(value) > COMPACT_ITEMS:
            return {"count": len(value)}
        return {k: _compact(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        head = [_compact(v) for v in value[:COMPACT_ITEMS]]
        return head + [f"... and {len(value) - COMPACT_ITEMS} more"] if len(value) > COMPACT_ITEMS else head
    return value


def end_tick(db: sqlite3.Connection, tick: int, now: float, ok: bool, summary: Mapping[str, Any]) -> None:
    """Write the tick's outcome with its compact and whole summary, and drop the whole summary of
    the tick FULL_TICKS before (a window of them: a tick that never ended leaves no gap)."""
    db.execute(
        "UPDATE ticks SET finished_at=?, ok=?, summary=?, full_summary=? WHERE id=?",
        (now, int(ok), json.dumps(compact(summary), default=str), json.dumps(summary, default=str), tick),
    )
    db.execute(
        "UPDATE ticks SET full_summary=NULL WHERE id > ? AND id <= ? AND full_summary IS NOT NULL",
        (tick - 2 * FULL_TICKS, tick - FULL_TICKS),
    )


# -- layouts -----------------------------------------------------------------------------------------
def pack_layout(body: str) -> bytes:
    return zlib.compress(body.encode())


def unpack_layout(raw: str | bytes) -> str:
    """A layout row's JSON: compressed (a BLOB) or, in a file written before, the TEXT itself."""
    return zlib.decompress(raw).decode() if isinstance(raw, bytes) else raw


# -- actions -----------------------------------------------------------------------------------------
def action_detail(detail: Mapping[str, Any]) -> str:
    """An action's detail as stored: an assignment is named by its generation and its number of
    servers (the agent's copy and the `applied` table hold the body), everything else as given."""
    out = dict(detail)
    assignment = out.get("assignment")
    if isinstance(assignment, Mapping):
        out["assignment"] = {
            "generation": assignment.get("generation"),
            "servers": len(assignment.get("servers") or ()),
        }
    return json.dumps(out, default=str)


# -- rates -------------------------------------------------------------------------------------------
def _pack(values: Iterable[float | None]) -> bytes:
    arr = array.array("d", (math.nan if v is None else v for v in values))
    if sys.byteorder == "big":
        arr.byteswap()
    return arr.tobytes()


def _unpack(blob: bytes) -> array.array[float]:
    arr = array.array("d")
    arr.frombytes(blob)
    if sys.byteorder == "big":
        arr.byteswap()
    return arr


Row = tuple[float, tuple[str, ...], "np.ndarray[Any, np.dtype[np.float64]]"]  # at, names, observed
_AT = itemgetter(0)


def _row_values(blob: bytes) -> np.ndarray[Any, np.dtype[np.float64]]:
    """A stored array as read-only little-endian float64 (the bytes themselves: exact)."""
    return np.frombuffer(blob, dtype="<f8")


class Rates:
    """The tick_rates and rate_names tables of one connection. Names rows are never changed and
    their ids never reused (AUTOINCREMENT), so the ids and names read are remembered.

    `_rows` holds every tick_rates row with `at >= _lo` as SQLite orders them (at, then id), with
    its names and observed values, while `_version` (the file's data_version when it was filled)
    still reads the same: this connection's own writes keep it up to date (add), another's
    commit changes data_version. `_lo` is inf while nothing is held."""

    def __init__(self) -> None:
        self._ids: dict[tuple[str, ...], int] = {}
        self._names: dict[int, tuple[str, ...]] = {}
        self._rows: list[Row] = []
        self._lo = math.inf
        self._version: int | None = None

    def forget(self) -> None:
        """Drop the rows held (a write that may not have committed: Store.add_rates)."""
        self._rows, self._lo, self._version = [], math.inf, None

    def _held(self, db: sqlite3.Connection, since: float) -> bool:
        """Whether the rows held cover [since, inf) and no other connection wrote meanwhile."""
        if since < self._lo:
            return False
        if int(db.execute("PRAGMA data_version").fetchone()[0]) != self._version:
            self.forget()
            return False
        return True

    def _fill(self, db: sqlite3.Connection, since: float) -> None:
        """Hold the rows from `since` on, read from SQLite."""
        version = int(db.execute("PRAGMA data_version").fetchone()[0])
        rows = db.execute("SELECT at, names, observed FROM tick_rates WHERE at >= ? ORDER BY at, id", (since,))
        self._rows = [(at, self._names_of(db, nid), _row_values(blob)) for at, nid, blob in rows.fetchall()]
        self._lo, self._version = since, version

    def _hold(self, now: float, names: tuple[str, ...], observed: bytes, keep_s: float) -> None:
        """This connection's new row (after the rows of the same time: its id is the largest),
        and the rows older than `keep_s` dropped, as add does in SQLite."""
        if now >= self._lo and names:
            bisect.insort_right(self._rows, (now, names, _row_values(observed)), key=_AT)
        cut = now - keep_s
        if cut > self._lo:
            del self._rows[: bisect.bisect_left(self._rows, cut, key=_AT)]
            self._lo = cut

    def window(self, db: sqlite3.Connection, since: float, until: float = math.inf, keep: bool = False) -> Columns:
        """The observed rates of the rows in [since, until], as columns (NaN: not observed), from
        the rows held (filled from SQLite when they do not cover `since`); unless `keep`, the
        rows before `since` are dropped from memory: the forecast reads from a later `since`
        each tick (the reach watch, reading a shorter stretch after it, keeps them)."""
        if not self._held(db, since):
            self._fill(db, since)
        start = bisect.bisect_left(self._rows, since, key=_AT)
        if not keep:
            del self._rows[:start]
            self._lo, start = since, 0
        return _columns(self._rows[start : bisect.bisect_right(self._rows, until, key=_AT)])

    def add(
        self,
        db: sqlite3.Connection,
        now: float,
        observed: Mapping[str, float | None],
        planned: Mapping[str, float | None],
        keep_s: float,
    ) -> None:
        """One row for the tick; and the rows older than `keep_s` go."""
        names = tuple(sorted(set(observed) | set(planned)))
        seen = _pack(observed.get(w) for w in names)
        if names:
            db.execute(
                "INSERT INTO tick_rates(at, names, observed, planned) VALUES(?,?,?,?)",
                (now, self._id(db, names), seen, _pack(planned.get(w) for w in names)),
            )
        db.execute("DELETE FROM tick_rates WHERE at < ?", (now - keep_s,))
        self._hold(now, names, seen, keep_s)

    def _id(self, db: sqlite3.Connection, names: tuple[str, ...]) -> int:
        nid = self._ids.get(names)
        if nid is not None and db.execute("SELECT 1 FROM rate_names WHERE id=?", (nid,)).fetchone() is None:
            nid = None  # forgotten meanwhile by another process on the same file
        if nid is None:
            text = json.dumps(names)
            digest = hashlib.sha256(text.encode()).hexdigest()
            db.execute("INSERT OR IGNORE INTO rate_names(digest, names) VALUES(?,?)", (digest, text))
            nid = int(db.execute("SELECT id FROM rate_names WHERE digest=?", (digest,)).fetchone()[0])
            self._ids[names], self._names[nid] = nid, names
        return nid

    def _names_of(self, db: sqlite3.Connection, nid: int) -> tuple[str, ...]:
        names = self._names.get(nid)
        if names is None:
            row = db.execute("SELECT names FROM rate_names WHERE id=?", (nid,)).fetchone()
            names = self._names[nid] = tuple(json.loads(row[0])) if row else ()
        return names

    def history(self, db: sqlite3.Connection, since: float, until: float) -> dict[str, list[tuple[float, float]]]:
        """Observed (time, rate) per workload in [since, until], oldest first (missing skipped);
        from the rows held where they cover `since`."""
        if self._held(db, since):
            lo = bisect.bisect_left(self._rows, since, key=_AT)
            hi = bisect.bisect_right(self._rows, until, key=_AT)
            rows = [(at, names, values.tolist()) for at, names, values in self._rows[lo:hi]]
        else:
            rows = [
                (at, self._names_of(db, nid), _unpack(blob))
                for at, nid, blob in db.execute(
                    "SELECT at, names, observed FROM tick_rates WHERE at >= ? AND at <= ? ORDER BY at, id",
                    (since, until),
                ).fetchall()
            ]
        out: dict[str, list[tuple[float, float]]] = {}
        for at, names, values in rows:
            for w, v in zip(names, values, strict=False):
                if v == v:  # NaN: not observed
                    points = out.get(w)
                    if points is None:
                        points = out[w] = []
                    points.append((at, v))
        return out

    def forget_unused_names(self, db: sqlite3.Connection) -> None:
        """Names rows no tick row refers to any more (the workloads changed a day ago)."""
        db.execute("DELETE FROM rate_names WHERE id NOT IN (SELECT DISTINCT names FROM tick_rates)")
        gone = set(self._names) - {r[0] for r in db.execute("SELECT id FROM rate_names").fetchall()}
        for nid in gone:
            self._ids.pop(self._names.pop(nid), None)

    def migrate(self, db: sqlite3.Connection) -> None:
        """An older file's `rates` table (a row per workload a tick) into tick_rates, then dropped."""
        if db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='rates'").fetchone() is None:
            return
        rows = db.execute("SELECT at, workload, observed, planned FROM rates ORDER BY at, rowid").fetchall()
        ticks: dict[float, tuple[dict[str, float | None], dict[str, float | None]]] = {}
        for at, w, obs, plan in rows:
            observed, planned = ticks.setdefault(at, ({}, {}))
            observed[w], planned[w] = obs, plan
        for at, (observed, planned) in ticks.items():
            self.add(db, at, observed, planned, math.inf)
        db.execute("DROP TABLE rates")


def _columns(rows: list[Row]) -> Columns:
    """Rows as one matrix: a column per workload named in any of them (sorted), NaN where a row
    does not name it; rows that all share their names (the usual case) are stacked as they are."""
    times = np.fromiter((r[0] for r in rows), dtype=np.float64, count=len(rows))
    kinds = {r[1] for r in rows}
    if len(kinds) <= 1 and all(len(r[2]) == len(r[1]) for r in rows):
        names = next(iter(kinds), ())
        values = np.vstack([r[2] for r in rows]) if rows else np.empty((0, 0))
        return Columns(times, names, values.reshape(len(rows), len(names)))
    names = tuple(sorted(set().union(*kinds)))
    index = {w: i for i, w in enumerate(names)}
    values = np.full((len(rows), len(names)), np.nan)
    at = {k: np.fromiter((index[w] for w in k), dtype=np.intp, count=len(k)) for k in kinds}
    for i, (_, k, v) in enumerate(rows):
        n = min(len(k), len(v))  # as zip pairs them in `history`
        values[i, at[k][:n]] = v[:n]
    return Columns(times, names, values)
