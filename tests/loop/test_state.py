"""The controller's cross-tick state: typed, versioned, saved once per tick, migrated from the old keys."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import fields, replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.core.capacity.headroom import HeadroomState, WorkloadErrors
from autoscaler.core.capacity.slo_guard import GuardState
from autoscaler.loop.state.controller_state import (
    _CODECS,
    SCHEMA_VERSION,
    Backoff,
    ControllerState,
    Decoded,
    Quarantine,
    StateError,
)
from autoscaler.loop.state.store import LEGACY_STATE_KEYS, STATE_KEY, Store
from tests.kit.control import Clock, make_controller, make_policy
from tests.kit.examples import examples

pytestmark = pytest.mark.unit


FULL = ControllerState(
    agent_seen={("f-p3-0", 0): 10.0, ("f-p3-1", 2): 20.5},
    slo_guard=GuardState({"a": 1.2}, {"b": 2}),
    cheaper_since=99.0,
    plan_generation=7,
    unavailable={"p3.2xlarge": 500.0},
    quarantined={"i-1": Quarantine(slot="f-p3-0", reason="host key mismatch", since=5.0)},
    backoff=Backoff(failures=2, until=60.0, reason="throttled: RequestLimitExceeded"),
    rejected={("f-p3-1", 2): "abc123"},
    headroom=HeadroomState(
        {
            "a": WorkloadErrors(
                forecasts=((100.0, 50.0, 0.2, 60.0), (130.0, 55.0, 0.25, None)),
                weights=(30.0,) + (0.0,) * 48 + (1.5,),
                observed_at=130.0,
                samples_s=60.0,
                attain=((0.0, 30.0, 60.0),),
            )
        }
    ),
    rollout_baseline={"a": 1200.0, "b": 0.0},
)


def test_every_field_has_a_codec_and_survives_a_round_trip() -> None:
    assert {f.name for f in fields(ControllerState)} == set(_CODECS)
    data = json.loads(json.dumps(FULL.to_json()))
    assert data["version"] == SCHEMA_VERSION
    assert ControllerState.from_json(data) == FULL
    assert ControllerState.from_json(None) == ControllerState()
    assert ControllerState.from_json({"version": SCHEMA_VERSION}) == ControllerState()  # fields default


def test_a_newer_state_version_is_refused_not_overwritten(tmp_path: Path) -> None:
    with pytest.raises(StateError, match="newer igniter"):
        ControllerState.from_json({"version": SCHEMA_VERSION + 1})
    path = tmp_path / "state.sqlite"
    store = Store(path)
    store.put(STATE_KEY, {"version": SCHEMA_VERSION + 1, "future": 1})
    ctl, prov, _, _ = make_controller(make_policy(tmp_path), store=store)
    report = ctl.tick()
    assert not report.ok and "newer igniter" in (report.error or "") and prov.mutating_calls() == []
    assert store.get(STATE_KEY) == {"version": SCHEMA_VERSION + 1, "future": 1}


def test_legacy_keys_are_migrated_once(tmp_path: Path) -> None:
    """A state file from before ControllerState: its five loose keys are read, then replaced."""
    path = tmp_path / "state.sqlite"
    store = Store(path)
    legacy = {
        "agent_seen": {"test-p3.2xlarge-0#0": 123.0},
        "slo_guard": {"corrections": {"res": 1.44}, "over": {"alex": 1.0}},
        "cheaper_since": 55.0,
        "plan_generation": 4,
        "unavailable": {"p3.8xlarge": 2_000_000.0},
    }
    for key, value in legacy.items():
        store.put(key, value)
    state = store.load_state()
    assert state.agent_seen == {("test-p3.2xlarge-0", 0): 123.0}
    assert state.slo_guard == GuardState({"res": 1.44}, {"alex": 1})
    assert (state.cheaper_since, state.plan_generation) == (55.0, 4)
    assert state.unavailable == {"p3.8xlarge": 2_000_000.0}
    clock = Clock()
    ctl, _, _, _ = make_controller(make_policy(tmp_path), clock, store=store)
    ctl.tick()
    assert ctl.current_state().plan_generation == 5  # continued from the migrated value
    assert ctl.current_state().slo_guard.corrections == {"res": 1.44}
    rows = dict(sqlite3.connect(path).execute("SELECT key, value FROM meta").fetchall())
    assert not set(LEGACY_STATE_KEYS) & set(rows) and json.loads(rows[STATE_KEY])["version"] == SCHEMA_VERSION
    store.put("plan_generation", 99)  # a stray old key no longer wins over the saved object
    assert store.load_state().plan_generation == 5


def test_state_is_saved_once_per_tick(tmp_path: Path) -> None:
    store = Store(":memory:")
    saves: list[ControllerState] = []
    real = store.save_state
    store.save_state = lambda s: (saves.append(s), real(s))[1]  # type: ignore[method-assign]
    ctl, _, _, _ = make_controller(make_policy(tmp_path), store=store)
    ctl.tick()
    assert len(saves) == 1 and saves[0] == ctl.current_state() == store.load_state()
    assert saves[0].plan_generation == 1


def test_backoff_doubles_and_is_bounded() -> None:
    b = Backoff()
    waits = []
    for _ in range(8):
        b = b.failed(1000.0, "throttled")
        waits.append(b.until - 1000.0)
    assert waits == [15.0, 30.0, 60.0, 120.0, 240.0, 300.0, 300.0, 300.0]
    assert b.active(1299.0) and not b.active(1300.0) and not Backoff().active(0.0)


# Random states as a tick makes them: ints where floats are meant too (a clock may give either),
# tuples and lists, any order of keys.
_name = st.text("abc-#0", min_size=1, max_size=6)
_num = st.one_of(st.floats(-1e6, 1e6, allow_nan=False), st.integers(-1000, 1000))
_key = st.tuples(_name, st.integers(0, 5))
_errors = st.builds(
    WorkloadErrors,
    forecasts=st.lists(st.tuples(_num, _num, _num, st.one_of(st.none(), _num)), max_size=3).map(tuple),
    weights=st.lists(_num, max_size=4).map(tuple),
    observed_at=st.one_of(st.none(), _num),
    samples_s=_num,
    attain=st.lists(st.tuples(_num, _num, _num), max_size=2).map(tuple),
    peaks=st.lists(st.tuples(_num, _num), max_size=2).map(tuple),
    allowance=st.one_of(st.none(), _num),
)
STATES = st.builds(
    ControllerState,
    agent_seen=st.dictionaries(_key, _num, max_size=4),
    slo_guard=st.builds(
        GuardState, st.dictionaries(_name, _num, max_size=3), st.dictionaries(_name, st.integers(0, 9))
    ),
    cheaper_since=st.one_of(st.none(), _num),
    plan_generation=st.integers(0, 10**6),
    unavailable=st.dictionaries(_name, _num, max_size=2),
    quarantined=st.dictionaries(_name, st.builds(Quarantine, _name, _name, _num), max_size=2),
    backoff=st.builds(Backoff, st.integers(0, 9), _num, _name),
    rejected=st.dictionaries(_key, _name, max_size=2),
    headroom=st.builds(HeadroomState, st.dictionaries(_name, _errors, max_size=3)),
    rollout_baseline=st.one_of(st.none(), st.dictionaries(_name, _num, max_size=3)),
    gateway_drains=st.dictionaries(_name, _num, max_size=3),
)


@pytest.mark.property
@settings(max_examples=examples(60), deadline=None)
@given(STATES)
def test_the_state_kept_for_a_write_is_the_state_its_text_reads_back_as(state: ControllerState) -> None:
    """Decoded.wrote keeps from_json(to_json(state)) for the text written: exactly (by repr: 1 is
    not 1.0, a list is not a tuple, key order counts) what decoding that text gives."""
    data = state.to_json()
    text = json.dumps(data)
    kept = Decoded()
    kept.wrote(text, data)
    assert repr(kept.read(text)) == repr(ControllerState.from_json(json.loads(text)))


def test_the_state_itself_is_not_always_what_its_text_reads_back_as() -> None:
    """Why Decoded keeps from_json(to_json(state)) and not the state: 500 reads back as 500.0."""
    state = replace(FULL, unavailable={"p3.2xlarge": 500})
    back = ControllerState.from_json(json.loads(json.dumps(state.to_json())))
    assert back == state and repr(back) != repr(state)
    kept = Decoded()
    kept.wrote(json.dumps(state.to_json()), state.to_json())
    assert repr(kept.read(json.dumps(state.to_json()))) == repr(back)


def test_a_store_decodes_its_own_state_once_and_another_writer_s_afresh(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    store = Store(path)
    store.save_state(FULL)
    first = store.load_state()
    assert first == FULL and store.load_state() is first  # not decoded again
    other = replace(FULL, plan_generation=8)  # another process writes the file
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value=? WHERE key=?", (json.dumps(other.to_json()), STATE_KEY))
    assert store.load_state() == other
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value=? WHERE key=?", (json.dumps({"version": SCHEMA_VERSION + 1}), STATE_KEY))
    with pytest.raises(StateError, match="newer igniter"):
        store.load_state()
