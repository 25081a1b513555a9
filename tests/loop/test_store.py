"""SQLite store: records with history, intents surviving reopen, layouts, generations, rates."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoscaler.core.fleet.lifecycle import Reason, State, new_record, transition
from autoscaler.core.layout.layout_types import Layout, PlannedServer, SlotSpec
from autoscaler.loop.state import store_slots
from autoscaler.loop.state.store import Store
from autoscaler.planner.types import Unplaced

pytestmark = pytest.mark.unit


def test_records_history_and_reopen(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    store = Store(path)
    epoch = store.epoch
    ch = transition(new_record("s0", 0, "p3", 1.0), Reason.REQUEST, 1.0, "planned")
    store.apply([ch])
    store.apply([transition(ch.record, Reason.LAUNCHED, 2.0, instance_id="i-1")])
    aid = store.begin_action(1, "launch", "s0", {"x": 1}, 1.0)
    store.close()

    again = Store(path)
    assert again.epoch == epoch
    [rec] = again.open_records()
    assert (rec.state, rec.instance_id, rec.created_at, rec.updated_at) == (State.PENDING, "i-1", 1.0, 2.0)
    hist = again.history("s0")
    assert [(h["from"], h["to"], h["reason"]) for h in hist] == [
        ("new", "requested", "request"),
        ("requested", "pending", "launched"),
    ]
    assert again.actions()[0]["id"] == aid and again.actions()[0]["status"] == "interrupted"
    assert again.max_attempts() == {"s0": 0}


def test_closed_records_leave_open_set(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite")
    rec = transition(new_record("s0", 0, "p3", 1.0), Reason.REQUEST, 1.0).record
    store.apply([transition(rec, Reason.SCALE_IN, 2.0)])
    assert store.open_records() == [] and store.closed_among([("s0", 0), ("s0", 1), ("s1", 0)]) == {("s0", 0)}
    assert [r.state for r in store.all_records()] == [State.TERMINATED]
    store.apply([transition(new_record("s0", 1, "p3", 3.0), Reason.REQUEST, 3.0)])
    assert store.closed_among([("s0", 1)]) == frozenset() and store.closed_among([]) == frozenset()


def test_generation_is_monotonic(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite")
    assert [store.next_assignment_generation() for _ in range(3)] == [1, 2, 3]
    assert store.next_assignment_generation(at_least=10) == 10
    assert store.next_assignment_generation(at_least=5) == 11


def test_layouts_applied_and_rates(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite")
    assert store.current_layout() is None
    spec = PlannedServer(name="a-0", workload="a", model="alexnet", gpu_index=0, index=0, batch=4, mps_percent=30.0)
    layout = Layout("x", (SlotSpec("s0", "p3", 3.0, ("v100",), (spec,)),), (), {"a": 10.0})
    store.save_layout(layout, "target", 1.0)
    assert store.current_layout() == layout
    store.set_applied(("s0", 0), (spec,), 4, 1.0)
    assert store.applied() == {("s0", 0): (4, (spec,))}
    store.prune_applied(set())
    assert store.applied() == {}
    store.add_rates(10.0, {"a": 5.0, "b": None}, {"a": 6.0})
    store.add_rates(20.0, {"a": 7.0}, {})
    assert store.rate_history(0.0) == {"a": [(10.0, 5.0), (20.0, 7.0)]}
    assert store.rate_history(15.0) == {"a": [(20.0, 7.0)]}
    store.put("k", {"x": [1, 2]})
    assert store.get("k") == {"x": [1, 2]} and store.get("missing", 3) == 3


def test_applied_rows_are_parsed_once(tmp_path: Path) -> None:
    """applied() runs several times a tick: an unchanged row must not be parsed again."""
    store = Store(tmp_path / "s.sqlite")
    spec = PlannedServer(name="a-0", workload="a", model="alexnet", gpu_index=0, index=0, batch=4, mps_percent=30.0)
    store.set_applied(("s0", 0), (spec,), 4, 1.0)
    first = store.applied()[("s0", 0)][1]
    assert store.applied()[("s0", 0)][1] is first
    bigger = PlannedServer(name="a-0", workload="a", model="alexnet", gpu_index=0, index=0, batch=8, mps_percent=60.0)
    store.set_applied(("s0", 0), (bigger,), 5, 2.0)
    assert store.applied() == {("s0", 0): (5, (bigger,))}


def test_identical_layout_is_not_saved_again(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite")
    spec = PlannedServer(name="a-0", workload="a", model="alexnet", gpu_index=0, index=0, batch=4, mps_percent=30.0)
    layout = Layout("x", (SlotSpec("s0", "p3", 3.0, ("v100",), (spec,)),), (), {"a": 10.0})
    assert store.save_layout(layout, "target", 1.0) is True
    assert store.save_layout(layout, "hold", 2.0) is False
    moved = Layout("x", layout.slots, (), {"a": 11.0})
    assert store.save_layout(moved, "target", 3.0) is True
    assert store.current_layout() == moved
    store.close()
    again = Store(tmp_path / "s.sqlite")
    assert again.save_layout(moved, "target", 4.0) is False and again.current_layout() == moved
    count = again._db.execute("SELECT COUNT(*) FROM layouts").fetchone()[0]
    assert count == 2


def test_the_newest_layout_is_the_one_saved_and_reads_back_as_itself(tmp_path: Path) -> None:
    """save_layout hands out the Layout it was given (no parse of its row), so it must be what a
    restart parses from that row: equal, and of the same types (repr: floats stay floats, tuples
    tuples), MIG fields and an unplaced workload included."""
    store = Store(tmp_path / "s.sqlite")
    mps = PlannedServer(name="a-0", workload="a", model="alexnet", gpu_index=0, index=0, batch=4, mps_percent=30.0)
    mig = PlannedServer(
        name="b-0", workload="b", model="resnet50", gpu_index=1, index=1, batch=2, mps_percent=100.0,
        mig_profile="3g.40gb", mig_start=4, processes=2,
    )  # fmt: skip
    slot = SlotSpec("s0", "p4de", 40.97, ("a100-80gb", "a100-80gb"), (mps, mig))
    layout = Layout("igniter", (slot,), (Unplaced("c", "no room"),), {"a": 10.0, "b": 2.5, "c": 1.0})
    assert store.save_layout(layout, "target", 1.0)
    assert store.current_layout() is layout
    store.close()
    parsed = Store(tmp_path / "s.sqlite").current_layout()
    assert parsed == layout and repr(parsed) == repr(layout)


def _launched(store: Store, slot: str, attempt: int, at: float) -> None:
    rec = new_record(slot, attempt, "p3", at, 1)
    store.apply([transition(rec, Reason.REQUEST, at, "")])


def test_slot_tops_are_each_stems_highest_number_and_an_older_file_gets_them_filled(tmp_path: Path) -> None:
    """What SlotNames needs of every slot name ever used, kept as records are written; a state
    file from before the table, or records an older igniter wrote without it, count from the
    next opening."""
    path = tmp_path / "state.sqlite"
    store = Store(path)
    slots = ["f-p3-0", "f-p3-7", "f-p3-spot-2", "f-p3-surge3", "f-p3-surge1", "odd"]
    for i, slot in enumerate(slots):
        _launched(store, slot, 0, float(i))
    _launched(store, "f-p3-7", 1, 9.0)
    tops = {"f-p3-": 7, "f-p3-spot-": 2, "f-p3-surge": 3}
    assert store.slot_tops() == tops
    assert store.max_attempts(["f-p3-7", "f-p3-0", "never"]) == {"f-p3-7": 1, "f-p3-0": 0}
    store._db.execute("DROP TABLE slot_tops")
    store.close()
    again = Store(path)  # as a file written before slot_tops existed
    assert again.slot_tops() == tops
    again._db.execute(  # a record an older igniter wrote, raising no stem
        "INSERT INTO instances(slot, attempt, instance_type, state, created_at, updated_at) "
        "VALUES('f-p3-spot-9', 0, 'p3', 'terminated', 1.0, 2.0)"
    )
    again.close()
    assert Store(path).slot_tops() == {**tops, "f-p3-spot-": 9}


def test_a_going_records_deadline_is_kept_and_old_files_gain_the_column(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)  # a state file from before leaves_at (and capacity_type)
    db.executescript(
        "CREATE TABLE instances (slot TEXT NOT NULL, attempt INTEGER NOT NULL, instance_type TEXT NOT NULL, "
        "state TEXT NOT NULL, instance_id TEXT, generation INTEGER NOT NULL DEFAULT 0, created_at REAL NOT NULL, "
        "updated_at REAL NOT NULL, PRIMARY KEY (slot, attempt));"
        "INSERT INTO instances VALUES('s0', 0, 'p3', 'ready', 'i-1', 1, 1.0, 2.0);"
    )
    db.commit()
    db.close()
    store = Store(path)
    [rec] = store.open_records()
    assert rec.leaves_at is None and rec.capacity_type == "on-demand"
    store.apply([transition(rec, Reason.INTERRUPTION, 3.0, "spot terminate", leaves_at=123.0)])
    store.close()
    [going] = Store(path).open_records()
    assert (going.state, going.leaves_at) == (State.GOING_AWAY, 123.0)


def _truth(store: Store) -> tuple[object, ...]:
    """What SQLite holds now, read past any remembered reads."""
    return (
        store._read_records("1=1", ()),
        store._read_max_attempts(),
        store._read_applied(),
        store_slots.read(store._db),
    )


def _seen(store: Store) -> tuple[object, ...]:
    return store.all_records(), store.max_attempts(), store.applied(), store.slot_tops()


@pytest.mark.parametrize("where", [":memory:", "file"])
def test_reads_follow_every_write_that_changes_them(tmp_path: Path, where: str) -> None:
    """An in-memory store remembers its reads until it writes the table they came from
    (store_reads.py): after each write, what it answers is what SQLite holds."""
    store = Store(":memory:" if where == ":memory:" else tmp_path / "s.sqlite")
    spec = PlannedServer(name="a-0", workload="a", model="alexnet", gpu_index=0, index=0, batch=4, mps_percent=30.0)
    ch = transition(new_record("s0", 0, "p3", 1.0), Reason.REQUEST, 1.0, "planned")
    writes = [
        lambda: store.apply([ch]),
        lambda: store.set_applied(("s0", 0), (spec,), 4, 1.0),
        lambda: store.apply([transition(ch.record, Reason.LAUNCHED, 2.0, instance_id="i-1")]),
        lambda: store.apply([transition(new_record("s0", 1, "p3", 3.0), Reason.REQUEST, 3.0)]),
        lambda: store.prune_applied(set()),
        lambda: store.apply([transition(store.open_records()[0], Reason.SCALE_IN, 4.0)]),
    ]
    for write in writes:
        assert _seen(store) == _truth(store)
        write()
        assert _seen(store) == _truth(store)
        assert store.open_records() == [r for r in store._read_records("1=1", ()) if r.state is not State.TERMINATED]


def test_an_in_memory_store_reads_a_table_again_only_after_writing_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Writes to other tables (a tick's rates, layouts, actions, state) keep the records read."""
    store = Store(":memory:")
    store.apply([transition(new_record("s0", 0, "p3", 1.0), Reason.REQUEST, 1.0)])
    before = store.open_records()

    def no_read(*_: object) -> None:
        raise AssertionError("read from SQLite again")

    monkeypatch.setattr(store, "_read_records", no_read)
    tick = store.begin_tick(5.0)
    store.add_rates(5.0, {"a": 1.0}, {"a": 2.0})
    store.put("k", 1)
    store.end_tick(tick, 6.0, True, {})
    assert store.open_records() == before
    monkeypatch.undo()
    store.apply([transition(before[0], Reason.SCALE_IN, 7.0)])
    assert store.open_records() == []
