"""The headroom estimator packed (core/capacity/headroom_codec.py) reads back as its JSON arrays did."""

from __future__ import annotations

import array
import base64
import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.core.capacity import headroom_codec
from autoscaler.core.capacity.headroom import _FIELDS, HeadroomState, WorkloadErrors
from autoscaler.loop.state.controller_state import SCHEMA_VERSION, ControllerState
from tests.kit.examples import examples

NUMBER = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-(2**60), 2**60), st.just(-0.0))
MAYBE = st.one_of(st.none(), NUMBER)
ERRORS = st.builds(
    WorkloadErrors,
    forecasts=st.lists(st.tuples(NUMBER, NUMBER, NUMBER, MAYBE), max_size=6).map(tuple),
    weights=st.lists(NUMBER, max_size=52).map(tuple),
    observed_at=MAYBE,
    samples_s=NUMBER,
    attain=st.lists(st.tuples(NUMBER, NUMBER, NUMBER), max_size=4).map(tuple),
    peaks=st.lists(st.tuples(NUMBER, NUMBER), max_size=6).map(tuple),
    allowance=MAYBE,
)


def as_arrays(state: HeadroomState) -> dict[str, dict[str, object]]:
    """The state as every version before v2 wrote it: JSON arrays per workload."""
    return {
        w: dict(zip(_FIELDS, (e.forecasts, e.weights, e.observed_at, e.samples_s, e.attain, e.peaks, e.allowance)))
        for w, e in sorted(state.workloads.items())
    }


def through_text(data: object) -> HeadroomState:
    return HeadroomState.from_json(json.loads(json.dumps(data)))


@pytest.mark.property
@settings(max_examples=examples(80), deadline=None)
@given(st.dictionaries(st.text(max_size=8), ERRORS, max_size=4))
def test_packed_reads_back_as_the_arrays_did(workloads: dict[str, WorkloadErrors]) -> None:
    """Every number the float it was (ints as floats, as JSON's reading made them), a None a None
    and a NaN a NaN (repr tells them and 1 from 1.0 apart), and each workload is packed; the
    same with the workloads packed() says read back as themselves (`known`) as without them."""
    state = HeadroomState(workloads)
    data, known = state.packed()
    assert data == state.to_json() and all(isinstance(v, str) for v in data.values())
    arrays = repr(through_text(as_arrays(state)))
    assert repr(through_text(data)) == repr(HeadroomState.from_json(data, known)) == arrays  # known
    assert repr(HeadroomState.from_json(data)) == arrays  # unpacked


@pytest.mark.unit
def test_a_workload_of_floats_is_read_back_without_unpacking() -> None:
    """What a save reads back (controller_state.Decoded) is the workload itself where its string
    unpacks as it; one with an int (3 -> 3.0) is unpacked."""
    floats = WorkloadErrors(forecasts=((1.0, 2.0, 0.1, None),), weights=(0.5,), samples_s=3.0, peaks=((1.0, 2.0),))
    ints = WorkloadErrors(weights=(0.5,), samples_s=3)
    plans = WorkloadErrors(forecasts=([1.0, 2.0, 0.1, None],))  # type: ignore[arg-type]
    peaks = WorkloadErrors(peaks=([1.0, 2.0],))  # type: ignore[arg-type]
    data, known = HeadroomState({"f": floats, "i": ints, "l": plans, "p": peaks}).packed()
    back = HeadroomState.from_json(data, known)
    assert back.workloads["f"] is floats and HeadroomState.from_json(data).workloads["f"] is not floats
    assert type(back.workloads["l"].forecasts[0]) is tuple and type(back.workloads["p"].peaks[0]) is tuple
    assert (
        back.workloads["i"] is not ints and back.workloads["i"] == ints and type(back.workloads["i"].samples_s) is float
    )


@pytest.mark.unit
def test_none_and_nan_stay_apart() -> None:
    e = WorkloadErrors(
        forecasts=((1.0, 2.0, 0.1, None), (3.0, 4.0, 0.1, math.nan), (5.0, 6.0, 0.1, 7.0)),
        weights=(0.5, math.inf),
        observed_at=None,
        samples_s=3,
        attain=((0.0, 15.0, 15.0),),
        peaks=((1.0, -0.0),),
        allowance=math.nan,
    )
    back = through_text(HeadroomState({"a": e}).to_json()).workloads["a"]
    assert back.forecasts[0][3] is None and math.isnan(back.forecasts[1][3]) and back.forecasts[2][3] == 7.0
    assert back.observed_at is None and back.allowance is not None and math.isnan(back.allowance)
    assert type(back.samples_s) is float and math.copysign(1.0, back.peaks[0][1]) == -1.0
    assert back.weights == (0.5, math.inf) and back.attain == ((0.0, 15.0, 15.0),)


@pytest.mark.unit
def test_a_workload_that_will_not_pack_goes_as_arrays() -> None:
    odd = WorkloadErrors(forecasts=((1.0, 2.0, 0.1),), weights=(1.0,))  # a plan of 3: unreadable, as before
    data = HeadroomState({"odd": odd, "ok": WorkloadErrors(weights=(1.0,))}).to_json()
    assert isinstance(data["odd"], dict) and isinstance(data["ok"], str)
    back = through_text(data)
    assert back.workloads["odd"] == WorkloadErrors() and back.workloads["ok"].weights == (1.0,)


def _packed(*head: float) -> str:
    return ":" + base64.b64encode(array.array("d", head).tobytes()).decode()


GOOD = _packed(0, 0, 0, 0, 1.0, 2.0, 3.0)
DAMAGED = [
    "",
    "AAAA",
    ":AAAA",  # 3 bytes: not a float64
    "x" + GOOD,
    "99" + GOOD,  # a None past the end
    GOOD[:-4],
    GOOD.replace("A", "!", 1),
    _packed(-1, 0, 0, 0, 1.0, 2.0, 3.0),
    _packed(1, 0, 0, 0, 1.0, 2.0, 3.0),  # a plan named, none there
    _packed(0, 0, 0, 0, 1.0, 2.0, 3.0, 4.0),  # a number too many
]


@pytest.mark.unit
@pytest.mark.parametrize("bad", DAMAGED)
def test_a_damaged_packed_workload_starts_afresh(bad: str) -> None:
    assert headroom_codec.unpack(GOOD)["samples_s"] == 2.0
    with pytest.raises((ValueError, TypeError)):
        headroom_codec.unpack(bad)
    state = HeadroomState.from_json({"a": bad, "b": HeadroomState({"b": WorkloadErrors(samples_s=5.0)}).to_json()["b"]})
    assert state.workloads["a"] == WorkloadErrors() and state.workloads["b"].samples_s == 5.0


@pytest.mark.unit
def test_a_version_1_state_file_still_loads() -> None:
    """v1 wrote the estimator as JSON arrays; v2 reads them as they were, and writes them packed."""
    e = WorkloadErrors(forecasts=((1.0, 2.0, 0.1, None),), weights=(1.0, 0.0), observed_at=4.0, peaks=((4.0, 9.0),))
    v1 = {"version": 1, "plan_generation": 3, "headroom": as_arrays(HeadroomState({"a": e}))}
    state = ControllerState.from_json(json.loads(json.dumps(v1)))
    assert state.headroom == HeadroomState({"a": e}) and state.plan_generation == 3
    again = state.to_json()
    assert again["version"] == SCHEMA_VERSION == 2 and isinstance(again["headroom"]["a"], str)
    assert ControllerState.from_json(json.loads(json.dumps(again))) == state


@pytest.mark.unit
def test_a_state_read_back_whole_saves_again_without_packing(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tick that does not forecast (scaling.plan_on: interval) saves the state it read back: its
    packed answer is the one it was read from, with no workload packed again; a state read back
    with a workload unpacked, or another state, is packed afresh."""
    floats = WorkloadErrors(forecasts=((1.0, 2.0, 0.1, None),), weights=(0.5,), samples_s=3.0, peaks=((1.0, 2.0),))
    other = WorkloadErrors(weights=(0.25,), samples_s=1.0)
    state = HeadroomState({"a": floats, "b": other})
    text = json.dumps(ControllerState(headroom=state).to_json())
    data, known = state.packed()
    back = HeadroomState.from_json(data, known)
    calls = [0]
    pack = headroom_codec.pack

    def counted(*args: object) -> object:
        calls[0] += 1
        return pack(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(headroom_codec, "pack", counted)
    assert back is not state and back.packed() == (data, known) and calls[0] == 0
    assert json.dumps(ControllerState(headroom=back).to_json()) == text and calls[0] == 0
    ints = HeadroomState({"a": floats, "i": WorkloadErrors(weights=(0.5,), samples_s=3)})  # 3 -> 3.0: not known
    idata, iknown = ints.packed()
    assert calls[0] == 2
    assert HeadroomState.from_json(idata, iknown).packed()[0] == idata and calls[0] == 4
    assert HeadroomState({"a": floats, "b": other}).packed() == (data, known) and calls[0] == 6
