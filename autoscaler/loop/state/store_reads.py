"""Reads of an in-memory state store, remembered per table until that table is written.

The simulator replays thousands of ticks against a ':memory:' store, and a tick reads the
instance records a dozen times (sync, the view, the layout's names, the limits, the wake) while
writing them at most once or twice. No other connection can write to an in-memory database, so
a read stays true until this store writes the table it read: each write transaction names the
tables it writes (`Store._tx`), and only their remembered reads are dropped. A state file may be
written by another process (an operator's command), so a file-backed store remembers nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

T = TypeVar("T")

# Every table of the schema: what a write transaction that names none is taken to write.
TABLES = frozenset(
    {
        "meta",
        "instances",
        "instance_history",
        "layouts",
        "applied",
        "actions",
        "tick_rates",
        "rate_names",
        "ticks",
        "slot_tops",
    }
)


class TableReads:
    """Remembered query results per table (`enabled` False: none, every read goes to SQLite).
    Callers get what `read` returned the first time: values that are immutable, or copied by
    the caller before it hands them out."""

    def __init__(self, enabled: bool) -> None:
        self._seen: dict[str, dict[Any, Any]] | None = {} if enabled else None

    def get(self, table: str, key: Any, read: Callable[[], T]) -> T:
        if self._seen is None:
            return read()
        by_key = self._seen.setdefault(table, {})
        if key not in by_key:
            by_key[key] = read()
        value: T = by_key[key]
        return value

    def written(self, tables: Iterable[str]) -> None:
        """Forget what was read from `tables` (called before the write begins)."""
        if self._seen is not None:
            for table in tables:
                self._seen.pop(table, None)
