"""The store's history kept small (loop/state/store_history.py): compact tick summaries with the
whole one for the newest ticks, compressed layouts, actions without their assignment's body, rates
one row a tick with the same answers as a row per workload; and a file of the older form opens."""

from __future__ import annotations

import json
import math
import random
import sqlite3
from pathlib import Path

import pytest

from autoscaler.core.layout.layout_types import Layout, PlannedServer, SlotSpec
from autoscaler.loop.state.store import Store
from autoscaler.loop.state.store_history import COMPACT_ITEMS, FULL_TICKS, LAYOUTS_KEPT, compact

pytestmark = pytest.mark.unit

SPEC = PlannedServer(name="a-0", workload="a", model="alexnet", gpu_index=0, index=0, batch=4, mps_percent=30.0)


def _layout(rate: float) -> Layout:
    return Layout("x", (SlotSpec("s0", "p3", 3.0, ("v100",), (SPEC,)),), (), {"a": rate})


def test_a_summary_keeps_its_scalars_and_short_lists_and_counts_the_long_ones() -> None:
    many = {f"w{k}": float(k) for k in range(COMPACT_ITEMS + 5)}
    notes = [f"note {k}" for k in range(COMPACT_ITEMS + 3)]
    small = {"ok": True, "observed": {"a": 1.0}, "gateway": {"ops": ["add a"], "failed": []}, "wake_at": None}
    assert compact(small) == small
    top = {f"key{k}": k for k in range(COMPACT_ITEMS + 5)}  # the summary itself is never cut down
    assert compact(top) == top
    out = compact({"ok": False, "observed": many, "notes": notes, "gateway": {"ops": notes}})
    assert out["ok"] is False and out["observed"] == {"count": COMPACT_ITEMS + 5}
    assert out["notes"] == notes[:COMPACT_ITEMS] + ["... and 3 more"] and out["gateway"]["ops"] == out["notes"]


def test_the_whole_summary_is_kept_for_the_newest_ticks_only(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite")
    big = {"observed": {f"w{k}": 1.0 for k in range(50)}, "ok": True}
    for n in range(FULL_TICKS + 5):
        store.end_tick(store.begin_tick(60.0 * n), 60.0 * n + 1, True, big)
    rows = store._db.execute("SELECT summary, full_summary FROM ticks ORDER BY id").fetchall()
    assert all(json.loads(r[0]) == {"observed": {"count": 50}, "ok": True} for r in rows)
    assert [r[1] is not None for r in rows] == [False] * 5 + [True] * FULL_TICKS
    assert json.loads(rows[-1][1]) == big


def test_layouts_are_compressed_and_the_newest_kept(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite")
    for n in range(LAYOUTS_KEPT + 3):
        assert store.save_layout(_layout(10.0 + n), "target", float(n))
    [(kind, count)] = store._db.execute("SELECT typeof(body), COUNT(*) FROM layouts GROUP BY 1").fetchall()
    assert (kind, count) == ("blob", LAYOUTS_KEPT)
    store.close()
    again = Store(tmp_path / "s.sqlite")
    assert again.current_layout() == _layout(10.0 + LAYOUTS_KEPT + 2)
    assert again.save_layout(_layout(10.0 + LAYOUTS_KEPT + 2), "hold", 999.0) is False


def test_an_in_memory_store_keeps_layouts_as_text() -> None:
    """A replay's store is never written to disk: compressing each new layout only cost CPU."""
    store = Store(":memory:")
    for n in range(3):
        assert store.save_layout(_layout(10.0 + n), "target", float(n))
    [(kind, count)] = store._db.execute("SELECT typeof(body), COUNT(*) FROM layouts GROUP BY 1").fetchall()
    assert (kind, count) == ("text", 3)
    store._layout_row = None  # read the row back, not the copy kept with it
    assert store.current_layout() == _layout(12.0)
    assert store.save_layout(_layout(12.0), "hold", 9.0) is False


def test_an_action_names_its_assignment_by_generation_and_server_count() -> None:
    store = Store(":memory:")
    assignment = {"generation": 7, "servers": [{"name": "a-0", "workload": "a", "port": 8100, "batch": 4}]}
    store.begin_action(1, "configure", "s0", {"reason": "first assignment", "assignment": assignment}, 1.0)
    store.begin_action(1, "launch", "s1", {"instance_type": "p3"}, 1.0)
    details = [a["detail"] for a in store.actions()]
    assert details == [
        {"reason": "first assignment", "assignment": {"generation": 7, "servers": 1}},
        {"instance_type": "p3"},
    ]


def _reference(
    ticks: list[tuple[float, dict[str, float | None]]], since: float, until: float
) -> dict[str, list[tuple[float, float]]]:
    """What a row per workload a tick answered: observed points in [since, until], oldest first."""
    out: dict[str, list[tuple[float, float]]] = {}
    for at, observed in sorted(ticks, key=lambda t: t[0]):
        for w in sorted(observed):
            v = observed[w]
            if since <= at <= until and v is not None and not math.isnan(v):
                out.setdefault(w, []).append((at, v))
    return out


@pytest.mark.parametrize("seed", range(5))
def test_rate_history_answers_as_a_row_per_workload_did(seed: int) -> None:
    """Workloads come and go, rates are missing (None, NaN) or planned only: the same answers,
    over any window; rows older than keep_s go, and names no row uses are forgotten."""
    rng, store = random.Random(seed), Store(":memory:")
    ticks: list[tuple[float, dict[str, float | None]]] = []
    names = ["a", "b", "c", "d"]
    for n in range(40):
        if n % 13 == 0:
            names = rng.sample(["a", "b", "c", "d", "e", "f"], rng.randint(1, 5))
        observed = {w: rng.choice([None, math.nan, rng.uniform(0, 1e4)]) for w in names if rng.random() < 0.8}
        planned = {w: rng.uniform(0, 1e4) for w in names if rng.random() < 0.5}
        store.add_rates(60.0 * n, observed, planned, keep_s=1800.0)
        ticks.append((60.0 * n, {**{w: None for w in planned}, **observed}))
    kept = [t for t in ticks if t[0] >= 60.0 * 39 - 1800.0]
    for since, until in ((0.0, math.inf), (600.0, 1500.0), (1740.0, 1740.0), (5000.0, math.inf)):
        assert store.rate_history(since, until) == _reference(kept, since, until)
    store.prune(1e9)
    used = {r[0] for r in store._db.execute("SELECT DISTINCT names FROM tick_rates").fetchall()}
    assert {r[0] for r in store._db.execute("SELECT id FROM rate_names").fetchall()} == used


def _old_file(path: Path) -> None:
    """A state file of the schema before store_history: rates a row per workload, ticks without
    full_summary, a layout as TEXT."""
    db = sqlite3.connect(path)
    db.executescript(
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
        "CREATE TABLE layouts (id INTEGER PRIMARY KEY AUTOINCREMENT, at REAL NOT NULL, kind TEXT NOT NULL, "
        "cost_per_hour REAL NOT NULL, body TEXT NOT NULL);"
        "CREATE TABLE rates (at REAL NOT NULL, workload TEXT NOT NULL, observed REAL, planned REAL);"
        "CREATE INDEX rates_by_workload ON rates (workload, at);"
        "CREATE TABLE ticks (id INTEGER PRIMARY KEY AUTOINCREMENT, started_at REAL NOT NULL, finished_at REAL, "
        "ok INTEGER, summary TEXT);"
        "INSERT INTO ticks(started_at, finished_at, ok, summary) VALUES (1.0, 2.0, 1, '{\"ok\": true}');"
    )
    db.execute(
        "INSERT INTO layouts(at, kind, cost_per_hour, body) VALUES (1.0, 'target', 3.0, ?)",
        (json.dumps(_layout(10.0).to_json()),),
    )
    rows = [(60.0, "a", 5.0, 6.0), (60.0, "b", None, 2.0), (120.0, "a", 7.0, None), (120.0, "c", 1.5, 1.0)]
    db.executemany("INSERT INTO rates VALUES (?,?,?,?)", rows)
    db.commit()
    db.close()


def test_a_state_file_of_the_older_schema_is_migrated_when_opened(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    _old_file(path)
    store = Store(path)
    assert store.rate_history(0.0) == {"a": [(60.0, 5.0), (120.0, 7.0)], "c": [(120.0, 1.5)]}
    assert store.current_layout() == _layout(10.0)
    tables = {r[0] for r in store._db.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()}
    assert "rates" not in tables and store.row_counts()["tick_rates"] == 2
    store.add_rates(180.0, {"a": 8.0}, {"a": 9.0})
    store.end_tick(store.begin_tick(180.0), 181.0, True, {"ok": True})
    store.close()
    again = Store(path)
    assert again.rate_history(100.0) == {"a": [(120.0, 7.0), (180.0, 8.0)], "c": [(120.0, 1.5)]}
    assert again.row_counts()["ticks"] == 2


def test_the_last_failed_action_of_a_slot_is_found_by_its_own_index() -> None:
    store = Store(":memory:")
    for n, status in enumerate(("failed", "done", "failed", "done")):
        aid = store.begin_action(n, "configure", "s0", {"reason": "r"}, float(n))
        store.finish_action(aid, status, float(n), error=f"refused {n}" if status == "failed" else None)
    assert store.last_error("configure", "s0") == "refused 2" and store.last_error("configure", "s1") is None
    sql = "EXPLAIN QUERY PLAN SELECT error FROM actions WHERE kind=? AND slot=? AND status='failed'"
    assert "actions_failed" in str(store._db.execute(sql, ("configure", "s0")).fetchall())
