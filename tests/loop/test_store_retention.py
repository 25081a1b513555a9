"""Bounded state (issue 50 item 3): the store keeps `state.history_s` of ticks, actions, lifecycle
history and closed records, so its size does not grow with the fleet's age."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from autoscaler.config.policy import Policy
from autoscaler.core.fleet.lifecycle import Reason, Record, State, new_record, transition
from autoscaler.core.layout.slots import top_numbers
from autoscaler.loop.state.store import OPEN_WHERE, PRUNE_EVERY_S, Store
from autoscaler.sim.engine import Replay, SimOptions, default_plan_fn
from autoscaler.sim.traces import Trace

HISTORY_S = 3600.0


def _waves(hours: int) -> Trace:
    """1-minute rows whose rate swings between 300 and 1500 req/s every 40 minutes: instances
    come and go all along, so every table gets rows."""
    t = np.arange(hours * 60)
    rows = np.where((t // 40) % 2 == 0, 300.0, 1500.0)
    return Trace("waves.csv", t * 60.0, {"a": rows}, 60.0)


@pytest.mark.e2e
def test_row_counts_stay_bounded_over_many_simulated_ticks(make_policy: Callable[..., Policy]) -> None:
    policy = make_policy(scaling={"headroom": 0.1, "fast_path": {"enabled": False}}, state={"history_s": HISTORY_S})
    trace = _waves(8)
    replay = Replay(policy, trace, SimOptions(), default_plan_fn(policy))
    replay.warm_start()
    t0, counts, made = float(trace.times[0]), [], 0
    for row in range(1, len(trace.times)):
        made += len(replay.tick(t0 + row * 60.0).outcome.done)
        if row % 60 == 0 and row >= 120:
            counts.append(replay.store.row_counts())
    ticks_kept = (HISTORY_S + PRUNE_EVERY_S) / 60.0 + 1
    assert max(c["ticks"] for c in counts) <= ticks_kept < replay.ticks / 4  # most ticks are gone
    for table in ("actions", "instance_history", "instances"):
        kept = [c[table] for c in counts]
        assert 0 < min(kept) and max(kept) <= 3 * min(kept), (table, kept)  # flat from 2 h to 8 h
    assert max(c["actions"] for c in counts) * 3 < made  # launches, configures, terminations all day


@pytest.mark.unit
def test_a_slot_keeps_its_newest_attempt_and_the_fleet_its_first_launch() -> None:
    """A new attempt must number above the old ones (its launch token is derived from it), and
    the warm pool's auto sizing reads when the fleet first launched: those rows outlive the history."""
    store = Store(":memory:")
    for attempt, at in ((0, 0.0), (1, 100.0), (2, 200.0)):
        rec = new_record("s", attempt, "g4dn.xlarge", at, 1)
        change = transition(rec, Reason.REQUEST, at, "")
        store.apply([change, transition(change.record, Reason.SCALE_IN, at + 1, "")])
    store.end_tick(store.begin_tick(10_000.0), 10_000.0, True, {}, keep_s=HISTORY_S)
    assert sorted(r.attempt for r in store.all_records()) == [0, 2]
    assert store.max_attempts() == {"s": 2} and store.first_launch() == 0.0
    assert store.row_counts()["instance_history"] == 0 and store.row_counts()["ticks"] == 1


@pytest.mark.e2e
def test_a_tick_reads_the_open_records_only(
    make_policy: Callable[..., Policy], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The closed records a fleet's history leaves (each slot's newest attempt stays: its launch
    token is derived from it) are never read by a tick: its work does not grow with the fleet's
    age. New slot names come from the highest number per stem (Store.slot_tops), the attempts
    from the slots a tick may launch; a listed instance no open record names is looked up by its
    key (Store.closed_among)."""
    policy = make_policy(scaling={"headroom": 0.1, "fast_path": {"enabled": False}})
    trace = _waves(3)
    replay = Replay(policy, trace, SimOptions(), default_plan_fn(policy))
    replay.warm_start()
    t0 = float(trace.times[0])
    for row in range(1, 121):
        replay.tick(t0 + row * 60.0)
    closed = [r for r in replay.store.all_records() if r.state is State.TERMINATED]
    assert closed  # a history that a tick must not read
    reads: list[str] = []
    read = Store._read_records

    def counted(store: Store, where: str, args: tuple[object, ...]) -> list[Record]:
        reads.append(where)
        return read(store, where, args)

    def every_slot(store: Store) -> dict[str, int]:
        raise AssertionError("a tick passed over every slot the fleet ever had")

    monkeypatch.setattr(Store, "_read_records", counted)
    monkeypatch.setattr(Store, "_read_max_attempts", every_slot)
    reports = [replay.tick(t0 + row * 60.0) for row in range(121, 180)]
    assert all(r.ok for r in reports), [r.error for r in reports if not r.ok]
    assert sum(len(r.outcome.done) for r in reports) > 0 and reads and set(reads) == {OPEN_WHERE}
    monkeypatch.undo()
    assert replay.store.slot_tops() == top_numbers(r.slot for r in replay.store.all_records())
