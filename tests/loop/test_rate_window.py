"""store_history.Rates keeps the newest rate rows in memory (issue 50: a tick read its hour of rates
back from SQLite): its window and the history it serves are what SQLite holds, row for row, while
ticks come out of order, workloads change, rows age out (keep_s), another process writes the file
or a write fails."""

from __future__ import annotations

import math
import random
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from autoscaler.loop.state.store import Store
from autoscaler.loop.state.store_history import Rates

pytestmark = pytest.mark.unit


def _from_sqlite(store: Store, since: float, until: float = math.inf) -> dict[str, list[tuple[float, float]]]:
    """The history read straight from SQLite (a fresh Rates: nothing held)."""
    return Rates().history(store._db, since, until)


def _as_history(store: Store, since: float) -> dict[str, list[tuple[float, float]]]:
    cols = store.rate_window(since)
    return {w: pts for j, w in enumerate(cols.names) if (pts := cols.points(j))}


@pytest.mark.parametrize("seed", range(6))
def test_the_window_held_is_what_sqlite_holds(seed: int) -> None:
    rng, store = random.Random(seed), Store(":memory:")
    names, now = ["a", "b", "c"], 0.0
    for n in range(60):
        if n % 17 == 5:
            names = rng.sample(["a", "b", "c", "d", "e"], rng.randint(1, 4))
        now += rng.choice([15.0, 15.0, 30.0, 0.0, -45.0])  # repeated and earlier times too
        observed = {w: rng.choice([None, math.nan, rng.uniform(0, 1e3)]) for w in names if rng.random() < 0.9}
        store.add_rates(now, observed, dict.fromkeys(names, 1.0), keep_s=rng.choice([600.0, 900.0, 200.0]))
        since = now - rng.choice([300.0, 450.0, 60.0, 900.0])
        assert _as_history(store, since) == _from_sqlite(store, since)
        until = now - rng.choice([0.0, 30.0])
        assert store.rate_history(since + 15.0, until) == _from_sqlite(store, since + 15.0, until)
        assert store.rate_history(since - 200.0) == _from_sqlite(store, since - 200.0)


def test_the_window_is_read_from_memory_and_kept_up_to_date() -> None:
    """After the first read, a tick's window costs no SQLite read of tick_rates: it is held (a
    mutation that forgets the held rows on each add, or never holds them, fails the count)."""
    store = Store(":memory:")
    for n in range(10):
        store.add_rates(15.0 * n, {"a": float(n)}, {"a": 1.0}, keep_s=3600.0)
    reads: list[str] = []
    store._db.set_trace_callback(lambda sql: reads.append(sql) if "FROM tick_rates" in sql else None)
    for n in range(10, 20):
        cols = store.rate_window(15.0 * n - 100.0)
        store.add_rates(15.0 * n, {"a": float(n)}, {"a": 1.0}, keep_s=3600.0)
    assert len([r for r in reads if r.startswith("SELECT")]) == 1
    assert cols.times.tolist() == [15.0 * k for k in range(13, 19)] and cols.values[:, 0].tolist() == [*range(13, 19)]


def test_another_connection_s_write_is_seen(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    store = Store(path)
    store.add_rates(0.0, {"a": 1.0}, {"a": 1.0})
    assert _as_history(store, -1.0) == {"a": [(0.0, 1.0)]}
    other = Store(path)
    other.add_rates(15.0, {"a": 2.0, "b": 3.0}, {})
    other.close()
    assert _as_history(store, -1.0) == {"a": [(0.0, 1.0), (15.0, 2.0)], "b": [(15.0, 3.0)]}
    store.close()


def test_a_failed_write_drops_what_is_held() -> None:
    store = Store(":memory:")
    store.add_rates(0.0, {"a": 1.0}, {"a": 1.0})
    store.rate_window(-1.0)
    store._db.execute(
        "CREATE TRIGGER no BEFORE INSERT ON tick_rates WHEN NEW.at > 10 BEGIN SELECT RAISE(ABORT, 'x'); END"
    )
    with pytest.raises(sqlite3.IntegrityError):
        store.add_rates(15.0, {"a": 2.0}, {"a": 1.0})
    assert _as_history(store, -1.0) == {"a": [(0.0, 1.0)]} == _from_sqlite(store, -1.0)


def test_rows_of_other_workloads_make_one_matrix() -> None:
    store = Store(":memory:")
    store.add_rates(0.0, {"b": 1.0}, {"b": 1.0})
    store.add_rates(15.0, {"a": 2.0}, {"a": 1.0, "c": 1.0})
    cols = store.rate_window(0.0)
    assert cols.names == ("a", "b", "c")
    assert np.array_equal(cols.values, [[np.nan, 1.0, np.nan], [2.0, np.nan, np.nan]], equal_nan=True)


def test_a_kept_window_leaves_the_older_rows_held() -> None:
    """The reach watch reads [now - 1 h, now] after the forecast's longer window: the rows before
    its `since` stay in memory (the next tick's forecast window reads no SQLite)."""
    store = Store(":memory:")
    for n in range(10):
        store.add_rates(15.0 * n, {"a": float(n)}, {"a": 1.0}, keep_s=3600.0)
    store.rate_window(0.0)
    reads: list[str] = []
    store._db.set_trace_callback(lambda sql: reads.append(sql) if "FROM tick_rates" in sql else None)
    kept = store.rate_window(60.0, 105.0, keep=True)
    assert kept.times.tolist() == [60.0, 75.0, 90.0, 105.0] and _from_sqlite(store, 60.0, 105.0) == {
        "a": kept.points(0)
    }
    reads.clear()
    assert store.rate_window(15.0).times.tolist() == [15.0 * k for k in range(1, 10)] and not reads
