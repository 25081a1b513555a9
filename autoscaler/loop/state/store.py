"""SQLite state: instance records with their lifecycle history, layouts (plans), actions, rates.

Crash safety comes from ordering, not from luck: the controller writes an intent (a record in
`requested`, an action row in `started`) and commits it *before* calling the provider or an agent,
then records the outcome. A crash at any point leaves either an intent the next tick resumes
idempotently (same slot, attempt and launch token) or a finished action. Actions still `started`
when the store is opened are marked `interrupted`.

Time is passed in by the caller; the store never reads a clock.
"""

from __future__ import annotations

import json
import math
import secrets
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from autoscaler.core.capacity.forecast import Columns
from autoscaler.core.fleet.lifecycle import OPEN, Change, Record, State
from autoscaler.core.layout.layout_types import Layout, PlannedServer, layout_from_json
from autoscaler.loop.state import statefile, store_history, store_slots
from autoscaler.loop.state.controller_state import ControllerState, Decoded, StateError
from autoscaler.loop.state.store_reads import TABLES, TableReads

STATE_KEY = "controller_state"
ROW_TABLES = ("instances", "instance_history", "layouts", "applied", "actions", "tick_rates", "rate_names", "ticks")
OPEN_WHERE, OPEN_ARGS = f"state IN ({','.join('?' * len(OPEN))})", tuple(s.value for s in OPEN)  # open_records
# The loose keys the controller kept before ControllerState (state version 0): read once, while
# no state object was saved yet, and deleted by the first save.
LEGACY_STATE_KEYS = ("agent_seen", "slo_guard", "cheaper_since", "plan_generation", "unavailable")

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS instances (
  slot TEXT NOT NULL, attempt INTEGER NOT NULL, instance_type TEXT NOT NULL, state TEXT NOT NULL,
  instance_id TEXT, generation INTEGER NOT NULL DEFAULT 0,
  created_at REAL NOT NULL, updated_at REAL NOT NULL, capacity_type TEXT NOT NULL DEFAULT 'on-demand',
  leaves_at REAL, PRIMARY KEY (slot, attempt));
CREATE TABLE IF NOT EXISTS instance_history (
  id INTEGER PRIMARY KEY AUTOINCREMENT, slot TEXT NOT NULL, attempt INTEGER NOT NULL,
  from_state TEXT NOT NULL, to_state TEXT NOT NULL, reason TEXT NOT NULL, detail TEXT NOT NULL,
  instance_id TEXT, at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS layouts (
  id INTEGER PRIMARY KEY AUTOINCREMENT, at REAL NOT NULL, kind TEXT NOT NULL,
  cost_per_hour REAL NOT NULL, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS applied (
  slot TEXT NOT NULL, attempt INTEGER NOT NULL, generation INTEGER NOT NULL, servers TEXT NOT NULL,
  at REAL NOT NULL, PRIMARY KEY (slot, attempt));
CREATE TABLE IF NOT EXISTS actions (
  id INTEGER PRIMARY KEY AUTOINCREMENT, tick INTEGER, kind TEXT NOT NULL, slot TEXT NOT NULL,
  detail TEXT NOT NULL, status TEXT NOT NULL, error TEXT, started_at REAL NOT NULL, finished_at REAL);
CREATE TABLE IF NOT EXISTS ticks (
  id INTEGER PRIMARY KEY AUTOINCREMENT, started_at REAL NOT NULL, finished_at REAL,
  ok INTEGER, summary TEXT, full_summary TEXT);
CREATE INDEX IF NOT EXISTS ticks_by_time ON ticks (started_at);
CREATE INDEX IF NOT EXISTS actions_by_time ON actions (started_at);
CREATE INDEX IF NOT EXISTS actions_by_tick ON actions (tick);
CREATE INDEX IF NOT EXISTS history_by_time ON instance_history (at);
CREATE INDEX IF NOT EXISTS instances_by_update ON instances (updated_at);
CREATE INDEX IF NOT EXISTS instances_by_state ON instances (state);
"""
HISTORY_S = 7 * 86400.0  # policy state.history_s's default: what end_tick keeps of the past
PRUNE_EVERY_S = 600.0  # how far the cut-off moves between two prunes
# Closed records older than the history, except each slot's newest attempt (a new attempt must
# number above it: its launch token is derived from it) and the fleet's first (first_launch).
PRUNE_CLOSED = f"""DELETE FROM instances WHERE NOT ({OPEN_WHERE}) AND updated_at < ?
  AND attempt < (SELECT MAX(i.attempt) FROM instances i WHERE i.slot = instances.slot)
  AND created_at > (SELECT MIN(created_at) FROM instances)"""


class Store:
    """One SQLite file (or ':memory:'). Thread-safe: every call holds a lock."""

    def __init__(self, path: str | Path) -> None:
        """Open (or create) the state file; a file that cannot be one raises StateFileError naming
        it and what to do, before anything else happens (statefile.py)."""
        file = None if str(path) == ":memory:" else Path(path)
        if file is not None:
            statefile.prepare(file)
        self._lock = threading.RLock()
        self._parsed: dict[str, tuple[PlannedServer, ...]] = {}  # applied.servers text -> specs (see applied)
        self._layout_row: tuple[int, str, Layout] | None = None  # newest layouts row: id, body, parsed
        self._pack = file is not None  # layouts compressed on disk; a replay's in-memory store keeps the text
        self._last_body: tuple[Layout, str] | None = None  # the last layout saved, and its JSON (_body)
        self._pruned_to = -math.inf  # the cut-off of the last prune
        self._state = Decoded()  # the controller state's text last written or read, decoded
        self._rates = store_history.Rates()
        self._reads = TableReads(enabled=file is None)  # an in-memory store's reads (store_reads.py)
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        try:
            self._open(file)
        except sqlite3.Error as exc:
            self._db.close()
            raise statefile.broken(file or Path(":memory:"), exc) from None
        except statefile.StateFileError:
            self._db.close()
            raise

    def _open(self, file: Path | None) -> None:
        if file is not None:
            statefile.check(self._db, file)  # first: WAL mode already writes to the file
            if statefile.check_meta(self._db, file):
                self._check_state(file)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(SCHEMA + store_history.SCHEMA + store_slots.SCHEMA)
        self._migrate()
        with self._tx("meta", "actions") as db:
            if self._get(db, "epoch") is None:
                self._put(db, "epoch", secrets.token_hex(6))
            db.execute("UPDATE actions SET status='interrupted' WHERE status='started'")

    def _migrate(self) -> None:
        """Columns added since a state file was created (kept files stay usable after an upgrade)."""
        cols = {r[1] for r in self._db.execute("PRAGMA table_info(instances)").fetchall()}
        if "capacity_type" not in cols:
            self._db.execute("ALTER TABLE instances ADD COLUMN capacity_type TEXT NOT NULL DEFAULT 'on-demand'")
        if "leaves_at" not in cols:
            self._db.execute("ALTER TABLE instances ADD COLUMN leaves_at REAL")
        if "full_summary" not in {r[1] for r in self._db.execute("PRAGMA table_info(ticks)").fetchall()}:
            self._db.execute("ALTER TABLE ticks ADD COLUMN full_summary TEXT")
        with self._tx("tick_rates", "rate_names") as db:
            self._rates.migrate(db)
        with self._tx("slot_tops") as db:
            store_slots.fill(db)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    @contextmanager
    def _tx(self, *tables: str) -> Iterator[sqlite3.Connection]:
        """A write transaction on `tables` (none named: any table), whose remembered reads it drops."""
        with self._lock:
            self._reads.written(tables or TABLES)
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    # -- meta ---------------------------------------------------------------------------------
    @staticmethod
    def _get(db: sqlite3.Connection, key: str) -> Any:
        row = db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    @staticmethod
    def _put(db: sqlite3.Connection, key: str, value: Any) -> None:
        db.execute(
            "INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
            (key, json.dumps(value)),
        )

    def get(self, key: str, default: Any = None) -> Any:
        with self._lock:
            value = self._get(self._db, key)
        return default if value is None else value

    def put(self, key: str, value: Any) -> None:
        with self._tx("meta") as db:
            self._put(db, key, value)

    def load_state(self) -> ControllerState:
        """The controller's cross-tick state (loop/state/controller_state.py), migrated from older layouts."""
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE key=?", (STATE_KEY,)).fetchone()
            state = None if row is None else self._state.read(row[0])  # decoded once per text (Decoded)
            if state is not None:
                return state
            legacy = {k: v for k in LEGACY_STATE_KEYS if (v := self._get(self._db, k)) is not None}
            raw = {"version": 0, **legacy} if legacy else None
        return ControllerState.from_json(raw)

    def _check_state(self, file: Path) -> None:
        """The controller state reads (any known version): else the file is refused at open."""
        try:
            self.load_state()
        except (StateError, TypeError, ValueError, KeyError, AttributeError) as exc:
            raise statefile.StateFileError(file, str(exc), statefile.MOVE_ASIDE, field=STATE_KEY) from None

    def save_state(self, state: ControllerState) -> None:
        """Replace the state object (and drop the legacy keys it was migrated from)."""
        data, known = state.encoded()
        text = json.dumps(data)
        with self._tx("meta") as db:
            db.execute(
                "INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                (STATE_KEY, text),
            )
            db.execute(f"DELETE FROM meta WHERE key IN ({','.join('?' * len(LEGACY_STATE_KEYS))})", LEGACY_STATE_KEYS)
        self._state.wrote(text, data, known)  # kept by its text: a write that did not land is decoded as before

    @property
    def epoch(self) -> str:
        """Random id of this state file, salted into launch tokens (see fleet/base.py launch_token)."""
        return str(self.get("epoch"))

    def next_assignment_generation(self, at_least: int = 0) -> int:
        """A fleet-wide, strictly increasing assignment generation (meta key `generation`) (at least `at_least`: an agent
        that already holds a higher one, e.g. after the state file was lost, would refuse less)."""
        with self._tx("meta") as db:
            gen = max(int(self._get(db, "generation") or 0) + 1, at_least)
            self._put(db, "generation", gen)
        return gen

    # -- instance records ---------------------------------------------------------------------
    def open_records(self) -> list[Record]:
        return self._records(OPEN_WHERE, OPEN_ARGS)

    def all_records(self) -> list[Record]:
        return self._records("1=1", ())

    def records_since(self, since: float) -> list[Record]:
        """Records created at `since` or later, open or closed (the warm pool's recent launches)."""
        return self._records("created_at >= ?", (since,))

    def first_launch(self) -> float | None:
        """When the fleet's first instance was asked for (the warm pool's auto leaves its bring-up out)."""
        with self._lock:
            row = self._db.execute("SELECT MIN(created_at) FROM instances").fetchone()
        return None if row is None or row[0] is None else float(row[0])

    def _records(self, where: str, args: tuple[Any, ...]) -> list[Record]:
        with self._lock:  # a write between the read and the remembering would be lost
            records = self._reads.get("instances", (where, args), lambda: self._read_records(where, args))
        return list(records)  # Records are frozen; the list is the caller's

    def _read_records(self, where: str, args: tuple[Any, ...]) -> list[Record]:
        with self._lock:
            rows = self._db.execute(
                "SELECT slot, attempt, instance_type, state, created_at, updated_at, instance_id, generation, "
                f"capacity_type, leaves_at FROM instances WHERE {where} ORDER BY slot, attempt",
                args,
            ).fetchall()
        return [
            Record(
                slot=r[0],
                attempt=r[1],
                instance_type=r[2],
                state=State(r[3]),
                created_at=r[4],
                updated_at=r[5],
                instance_id=r[6],
                plan_generation=r[7],
                capacity_type=r[8],
                leaves_at=r[9],
            )
            for r in rows
        ]

    def closed_among(self, keys: Iterable[tuple[str, int]]) -> frozenset[tuple[str, int]]:
        """Which of `keys` (slot, attempt) name a terminated record. Callers ask only about the
        instances listed that no open record names (few: a lost state file's, a terminate that
        did not finish), so a tick looks up those and never reads the closed records, which grow
        with the fleet's history (every slot's newest attempt is kept: PRUNE_CLOSED)."""
        sql = "SELECT 1 FROM instances WHERE slot=? AND attempt=? AND state=?"
        with self._lock:
            return frozenset(
                (slot, attempt)
                for slot, attempt in set(keys)
                if self._db.execute(sql, (slot, attempt, State.TERMINATED.value)).fetchone() is not None
            )

    def max_attempts(self, slots: Iterable[str] | None = None) -> dict[str, int]:
        """Slot -> its newest attempt: of `slots` (the ones a tick may launch: a lookup each), or
        of every slot the fleet ever had (None: a pass that grows with its history)."""
        with self._lock:
            if slots is not None:
                return store_slots.max_attempts(self._db, slots)
            return dict(self._reads.get("instances", "max_attempts", self._read_max_attempts))

    def slot_tops(self) -> dict[str, int]:
        """The highest number per slot-name stem ever used (store_slots.py; core/layout/slots.py
        SlotNames names new slots above them)."""
        with self._lock:
            return dict(self._reads.get("slot_tops", "all", lambda: store_slots.read(self._db)))

    def _read_max_attempts(self) -> dict[str, int]:
        rows = self._db.execute("SELECT slot, MAX(attempt) FROM instances GROUP BY slot").fetchall()
        return {r[0]: r[1] for r in rows}

    def apply(self, changes: list[Change]) -> None:
        """Persist transitions (record + history row each) in one transaction."""
        if not changes:
            return
        with self._tx("instances", "instance_history", "slot_tops") as db:
            store_slots.raise_tops(db, (ch.record.slot for ch in changes))
            for ch in changes:
                r = ch.record
                db.execute(
                    "INSERT INTO instances(slot, attempt, instance_type, state, instance_id, generation, created_at, "
                    "updated_at, capacity_type, leaves_at) VALUES(?,?,?,?,?,?,?,?,?,?) ON CONFLICT(slot, attempt) "
                    "DO UPDATE SET state=excluded.state, instance_id=excluded.instance_id, "
                    "updated_at=excluded.updated_at, leaves_at=excluded.leaves_at",
                    (
                        r.slot,
                        r.attempt,
                        r.instance_type,
                        r.state.value,
                        r.instance_id,
                        r.plan_generation,
                        r.created_at,
                        r.updated_at,
                        r.capacity_type,
                        r.leaves_at,
                    ),
                )
                db.execute(
                    "INSERT INTO instance_history(slot, attempt, from_state, to_state, reason, detail, "
                    "instance_id, at) VALUES(?,?,?,?,?,?,?,?)",
                    (
                        r.slot,
                        r.attempt,
                        ch.before.value,
                        r.state.value,
                        ch.reason.value,
                        ch.detail,
                        r.instance_id,
                        r.updated_at,
                    ),
                )

    def history(self, slot: str | None = None) -> list[dict[str, Any]]:
        sql = "SELECT slot, attempt, from_state, to_state, reason, detail, instance_id, at FROM instance_history"
        args: tuple[Any, ...] = ()
        if slot is not None:
            sql, args = sql + " WHERE slot=?", (slot,)
        with self._lock:
            rows = self._db.execute(sql + " ORDER BY id", args).fetchall()
        keys = ("slot", "attempt", "from", "to", "reason", "detail", "instance_id", "at")
        return [dict(zip(keys, r)) for r in rows]

    # -- layouts and applied assignments ----------------------------------------------------------
    def save_layout(self, layout: Layout, kind: str, now: float) -> bool:
        """Append `layout` unless it is identical to the newest one (most ticks re-plan the same
        fleet; a row per tick only grew the file), compressed; the newest LAYOUTS_KEPT are kept.
        Returns whether a row was written. The newest row's Layout handed out after is `layout`
        itself, not a parse of the row: it reads back from its JSON as itself (types included;
        tests/loop/test_store.py, and every tick of tests/sim/test_rollout_property.py), and
        parsing it again cost a fiftieth of a replay tick at 1,000 workloads."""
        body = self._body(layout)
        with self._tx("layouts") as db:
            newest = self._newest_layout(db)
            if newest is not None and newest[1] == body:
                return False
            cur = db.execute(
                "INSERT INTO layouts(at, kind, cost_per_hour, body) VALUES(?,?,?,?)",
                (now, kind, layout.cost_per_hour, store_history.pack_layout(body) if self._pack else body),
            )
            kept = store_history.LAYOUTS_KEPT
            db.execute("DELETE FROM layouts WHERE id <= (SELECT MAX(id) FROM layouts) - ?", (kept,))
            self._layout_row = (int(cur.lastrowid or 0), body, layout)
        return True

    def _body(self, layout: Layout) -> str:
        """The layout's JSON; the last one's kept with it (a Layout is frozen, and a tick that
        makes the same layout as the tick before hands over that very object, loop/tick/last_layout.py)."""
        last = self._last_body
        if last is None or last[0] is not layout:
            last = self._last_body = (layout, json.dumps(layout.to_json()))
        return last[1]

    def current_layout(self) -> Layout | None:
        with self._lock:
            newest = self._newest_layout(self._db)
        return None if newest is None else newest[2]

    def _newest_layout(self, db: sqlite3.Connection) -> tuple[int, str, Layout] | None:
        """The newest row, parsed once per row id (read every tick, changed rarely)."""
        row = db.execute("SELECT id FROM layouts ORDER BY id DESC LIMIT 1").fetchone()
        if row is None:
            return None
        if self._layout_row is None or self._layout_row[0] != row[0]:
            body = store_history.unpack_layout(
                db.execute("SELECT body FROM layouts WHERE id=?", (row[0],)).fetchone()[0]
            )
            self._layout_row = (row[0], body, layout_from_json(json.loads(body)))
        return self._layout_row

    def set_applied(
        self, key: tuple[str, int], servers: tuple[PlannedServer, ...], generation: int, now: float
    ) -> None:
        """What the agent of (slot, attempt) was last told to run, and under which assignment generation."""
        body = json.dumps([s.to_json() for s in servers])
        with self._tx("applied") as db:
            db.execute(
                "INSERT INTO applied(slot, attempt, generation, servers, at) VALUES(?,?,?,?,?) "
                "ON CONFLICT(slot, attempt) DO UPDATE SET generation=excluded.generation, "
                "servers=excluded.servers, at=excluded.at",
                (*key, generation, body, now),
            )

    def applied(self) -> dict[tuple[str, int], tuple[int, tuple[PlannedServer, ...]]]:
        """Per (slot, attempt): assignment generation and servers. Called several times a tick; each stored
        servers text is parsed once (PlannedServer is frozen, so sharing the tuples is safe)."""
        with self._lock:
            return dict(self._reads.get("applied", "all", self._read_applied))

    def _read_applied(self) -> dict[tuple[str, int], tuple[int, tuple[PlannedServer, ...]]]:
        rows = self._db.execute("SELECT slot, attempt, generation, servers FROM applied").fetchall()
        parsed = {r[3]: self._parsed.get(r[3]) or _parse_servers(r[3]) for r in rows}
        self._parsed = parsed
        return {(r[0], r[1]): (r[2], parsed[r[3]]) for r in rows}

    def prune_applied(self, keep: set[tuple[str, int]]) -> None:
        """Forget assignments of closed records (no write when there is none: a write drops the
        remembered reads of the table, store_reads.py)."""
        if all(key in keep for key in self.applied()):
            return
        with self._tx("applied") as db:
            for slot, attempt in db.execute("SELECT slot, attempt FROM applied").fetchall():
                if (slot, attempt) not in keep:
                    db.execute("DELETE FROM applied WHERE slot=? AND attempt=?", (slot, attempt))

    # -- actions, ticks, rates --------------------------------------------------------------------
    def begin_action(self, tick: int | None, kind: str, slot: str, detail: Mapping[str, Any], now: float) -> int:
        """The intent, written before the call (an assignment in `detail` is kept as its generation
        and number of servers: store_history.action_detail)."""
        with self._tx("actions") as db:
            cur = db.execute(
                "INSERT INTO actions(tick, kind, slot, detail, status, started_at) VALUES(?,?,?,?,?,?)",
                (tick, kind, slot, store_history.action_detail(detail), "started", now),
            )
        return int(cur.lastrowid or 0)

    def finish_action(self, action_id: int, status: str, now: float, error: str | None = None) -> None:
        with self._tx("actions") as db:
            db.execute(
                "UPDATE actions SET status=?, error=?, finished_at=? WHERE id=?", (status, error, now, action_id)
            )

    def actions(self, tick: int | None = None) -> list[dict[str, Any]]:
        sql = "SELECT id, tick, kind, slot, detail, status, error, started_at FROM actions"
        args: tuple[Any, ...] = () if tick is None else (tick,)
        with self._lock:
            rows = self._db.execute(
                sql + (" WHERE tick=?" if tick is not None else "") + " ORDER BY id", args
            ).fetchall()
        keys = ("id", "tick", "kind", "slot", "detail", "status", "error", "at")
        return [dict(zip(keys, (*r[:4], json.loads(r[4]), *r[5:]))) for r in rows]

    def last_error(self, kind: str, slot: str) -> str | None:
        """The error of the slot's newest failed action of this kind (health names a refusal by it)."""
        sql = "SELECT error FROM actions WHERE kind=? AND slot=? AND status='failed' ORDER BY id DESC LIMIT 1"
        with self._lock:
            row = self._db.execute(sql, (kind, slot)).fetchone()
        return None if row is None else row[0]

    def begin_tick(self, now: float) -> int:
        with self._tx("ticks") as db:
            cur = db.execute("INSERT INTO ticks(started_at) VALUES(?)", (now,))
        return int(cur.lastrowid or 0)

    def end_tick(self, tick: int, now: float, ok: bool, summary: Mapping[str, Any], keep_s: float = HISTORY_S) -> None:
        """The tick's outcome, its summary compact and whole (store_history.end_tick); and what is
        older than `keep_s` goes (retention: `prune`)."""
        with self._tx("ticks") as db:
            store_history.end_tick(db, tick, now, ok, summary)
        self.prune(now - keep_s)

    def prune(self, before: float) -> None:
        """Drop ticks, finished actions, lifecycle history and closed records from before
        `before`, at most once per PRUNE_EVERY_S of it (each an indexed range: the work is what
        goes, not what stays; and a write forgets the remembered reads, store_reads.py)."""
        if before < self._pruned_to + PRUNE_EVERY_S:
            return
        self._pruned_to = before
        with self._tx("ticks", "actions", "instance_history") as db:
            db.execute("DELETE FROM ticks WHERE started_at < ?", (before,))
            db.execute("DELETE FROM actions WHERE started_at < ? AND status != 'started'", (before,))
            db.execute("DELETE FROM instance_history WHERE at < ?", (before,))
        with self._tx("rate_names") as db:
            self._rates.forget_unused_names(db)
        with self._lock:
            closed = self._db.execute(PRUNE_CLOSED.replace("DELETE", "SELECT 1", 1) + " LIMIT 1", (*OPEN_ARGS, before))
            if closed.fetchone() is None:
                return
        with self._tx("instances") as db:
            db.execute(PRUNE_CLOSED, (*OPEN_ARGS, before))

    def row_counts(self) -> dict[str, int]:
        """Rows per table (what retention bounds; the fleet-size docs and tests read it)."""
        with self._lock:
            return {t: int(self._db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]) for t in ROW_TABLES}

    def add_rates(
        self,
        now: float,
        observed: Mapping[str, float | None],
        planned: Mapping[str, float | None],
        keep_s: float = 86400.0,
    ) -> None:
        """The tick's rates, one row (store_history.Rates); those older than `keep_s` go. A write
        that fails drops the rows Rates holds in memory (they may be ahead of the file)."""
        try:
            with self._tx("tick_rates", "rate_names") as db:
                self._rates.add(db, now, observed, planned, keep_s)
        except BaseException:
            with self._lock:
                self._rates.forget()
            raise

    def rate_history(self, since: float, until: float = math.inf) -> dict[str, list[tuple[float, float]]]:
        """Observed (time, rate) per workload in [since, until], oldest first (missing samples skipped)."""
        with self._lock:
            return self._rates.history(self._db, since, until)

    def rate_window(self, since: float, until: float = math.inf, keep: bool = False) -> Columns:
        """The observed rates in [since, until] as columns (NaN: missing), from the rows Rates keeps
        in memory: what each tick's forecast reads (store_history.Rates.window; `keep`: the rows
        before `since` stay held)."""
        with self._lock:
            return self._rates.window(self._db, since, until, keep)


def _parse_servers(body: str) -> tuple[PlannedServer, ...]:
    return tuple(PlannedServer(**v) for v in json.loads(body))
