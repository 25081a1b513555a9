"""The controller's cross-tick state: one typed, versioned object, loaded and saved once per tick.

Everything the controller remembers between ticks besides the store's tables (instance records,
layouts, applied assignments, actions, rates) lives here, so it is visible in one place, typed,
and read by the status server through `Controller.current_state()` instead of through store keys.

Adding a field: give it a default (an old state file must still load), add one line to `_CODECS`
(how it is written to JSON and read back), and say what it is for in its comment. Change the
meaning or shape of an existing field only with a new `SCHEMA_VERSION` and a step in `MIGRATIONS`.
tests/loop/test_state.py checks that every field has a codec and survives a round trip.

Version 0 is the layout before this object existed: loose store keys (`agent_seen`, `slo_guard`,
`cheaper_since`, `plan_generation`, `unavailable`) with the same JSON shapes; the store reads them
once, while no state object was saved yet, and deletes them on the first save (loop/state/store.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from autoscaler.core.capacity.headroom import HeadroomState, WorkloadErrors
from autoscaler.core.capacity.slo_guard import GuardState

SCHEMA_VERSION = 2
BACKOFF_BASE_S = 15.0  # the first wait after a throttled or unauthorised provider call
BACKOFF_MAX_S = 300.0  # the longest: doubling stops here (bounded exponential)

Key = tuple[str, int]  # (slot, attempt): one launch attempt


class StateError(ValueError):
    """The state object cannot be read (written by a newer igniter, or not an object)."""


@dataclass(frozen=True, slots=True)
class Backoff:
    """Provider calls that change the fleet (launch, terminate) wait until `until` after
    `failures` throttled or unauthorised calls in a row; a successful one clears it."""

    failures: int = 0
    until: float = 0.0
    reason: str = ""

    def active(self, now: float) -> bool:
        return self.failures > 0 and now < self.until

    def failed(self, now: float, reason: str) -> Backoff:
        """One more failure: wait BACKOFF_BASE_S, doubled per failure in a row, at most BACKOFF_MAX_S."""
        delay = min(BACKOFF_MAX_S, BACKOFF_BASE_S * 2.0 ** min(self.failures, 30))
        return Backoff(failures=self.failures + 1, until=now + delay, reason=reason)

    def to_json(self) -> dict[str, Any]:
        return {"failures": self.failures, "until": self.until, "reason": self.reason}

    @staticmethod
    def from_json(data: Mapping[str, Any] | None) -> Backoff:
        data = data or {}
        return Backoff(
            failures=int(data.get("failures", 0)),
            until=float(data.get("until", 0.0)),
            reason=str(data.get("reason", "")),
        )


@dataclass(frozen=True, slots=True)
class Quarantine:
    """A node the controller no longer contacts (its host key changed, or SSH refused our key):
    kept until the provider stops listing the instance; reconcile replaces it meanwhile, since
    its agent never answers again (provider.ready_timeout_s)."""

    slot: str
    reason: str
    since: float

    def to_json(self) -> dict[str, Any]:
        return {"slot": self.slot, "reason": self.reason, "since": self.since}

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> Quarantine:
        return Quarantine(slot=str(data["slot"]), reason=str(data["reason"]), since=float(data["since"]))


@dataclass(frozen=True, slots=True)
class ControllerState:
    """See the module docstring. Frozen: each step returns a new one (dataclasses.replace)."""

    agent_seen: Mapping[Key, float] = field(default_factory=dict)  # when each live attempt's agent last answered
    slo_guard: GuardState = field(default_factory=GuardState)  # correction factors (core/capacity/slo_guard.py)
    cheaper_since: float | None = None  # since when a cheaper plan than the held one exists (scaling.choose)
    plan_generation: int = 0  # the plan's generation: +1 whenever the layout's shape changes
    unavailable: Mapping[str, float] = field(
        default_factory=dict
    )  # offering (<type>, <type>@spot) -> no capacity until
    quarantined: Mapping[str, Quarantine] = field(default_factory=dict)  # instance id -> why it is not contacted
    backoff: Backoff = field(default_factory=Backoff)  # provider mutations wait (throttled, unauthorised)
    rejected: Mapping[Key, str] = field(
        default_factory=dict
    )  # attempt -> fingerprint of the assignment its agent refused
    headroom: HeadroomState = field(
        default_factory=HeadroomState
    )  # forecast errors, attainment (core/capacity/headroom.py)
    rollout_baseline: Mapping[str, float] | None = None  # capacity per workload when the change under way
    # began (reconcile's Diff.baseline: the invariant's "before"); None while the fleet is at rest
    gateway_drains: Mapping[str, float] = field(
        default_factory=dict
    )  # server -> when the gateway began draining it (core/routing/routes.py drain_progress)

    def to_json(self) -> dict[str, Any]:
        return self.encoded()[0]

    def encoded(self) -> tuple[dict[str, Any], Mapping[str, WorkloadErrors]]:
        """to_json's object, and the headroom workloads that read back as themselves
        (HeadroomState.packed): from_json's `known`, so a save's read-back unpacks none of them."""
        out: dict[str, Any] = {"version": SCHEMA_VERSION}
        for f in fields(self):
            if f.name != "headroom":
                out[f.name] = _CODECS[f.name][0](getattr(self, f.name))
        out["headroom"], known = self.headroom.packed()
        return out, known

    @staticmethod
    def from_json(data: Mapping[str, Any] | None, known: Mapping[str, WorkloadErrors] | None = None) -> ControllerState:
        """Read any known version (migrating it first); missing fields take their defaults.
        `known`: see encoded."""
        if data is None:
            return ControllerState()
        if not isinstance(data, Mapping):
            raise StateError(f"controller state is not an object: {str(data)[:100]}")
        current = migrate(dict(data))
        decoded = {
            k: dec(current[k]) for k, (_, dec) in _CODECS.items() if k != "headroom" and current.get(k) is not None
        }
        if current.get("headroom") is not None:
            decoded["headroom"] = HeadroomState.from_json(current["headroom"], known)
        return ControllerState(**decoded)


def migrate(data: dict[str, Any]) -> dict[str, Any]:
    """Bring a stored state up to SCHEMA_VERSION, one step at a time."""
    version = int(data.get("version", 0))
    if version > SCHEMA_VERSION:
        raise StateError(f"the state file was written by a newer igniter (state version {version} > {SCHEMA_VERSION})")
    while version < SCHEMA_VERSION:
        data = MIGRATIONS[version](data)
        version = int(data["version"])
    return data


def _from_v0(data: dict[str, Any]) -> dict[str, Any]:
    """v0 (loose store keys) -> v1: the same names and shapes, gathered in one object."""
    return {**data, "version": 1}


def _from_v1(data: dict[str, Any]) -> dict[str, Any]:
    """v1 -> v2: v2 writes each workload's headroom estimator packed in one string
    (core/capacity/headroom_codec.py), which HeadroomState.from_json reads beside v1's JSON
    arrays: the data stays as it is. The version says that an igniter reading only arrays
    would lose the estimator's history, so it refuses the file instead."""
    return {**data, "version": 2}


MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {0: _from_v0, 1: _from_v1}


def _keyed_out(values: Mapping[Key, Any]) -> dict[str, Any]:
    return {f"{slot}#{attempt}": v for (slot, attempt), v in values.items()}


def _keyed_in(cast: Callable[[Any], Any]) -> Callable[[Mapping[str, Any]], dict[Key, Any]]:
    def read(values: Mapping[str, Any]) -> dict[Key, Any]:
        out: dict[Key, Any] = {}
        for key, v in values.items():
            slot, _, attempt = key.rpartition("#")
            out[(slot, int(attempt))] = cast(v)
        return out

    return read


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)


# field -> (to JSON, from JSON). One line per field (see the module docstring).
_CODECS: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any]]] = {
    "agent_seen": (_keyed_out, _keyed_in(float)),
    "slo_guard": (lambda g: g.to_json(), GuardState.from_json),
    "cheaper_since": (lambda v: v, _opt_float),
    "plan_generation": (int, int),
    "unavailable": (dict, lambda d: {str(k): float(v) for k, v in d.items()}),
    "quarantined": (
        lambda q: {k: v.to_json() for k, v in q.items()},
        lambda d: {str(k): Quarantine.from_json(v) for k, v in d.items()},
    ),
    "backoff": (lambda b: b.to_json(), Backoff.from_json),
    "rejected": (_keyed_out, _keyed_in(str)),
    "headroom": (lambda h: h.to_json(), HeadroomState.from_json),  # ControllerState.encoded packs it once
    "rollout_baseline": (lambda v: None if v is None else dict(v), lambda d: {str(k): float(v) for k, v in d.items()}),
    "gateway_drains": (dict, lambda d: {str(k): float(v) for k, v in d.items()}),
}


class Decoded:
    """The state text a store last wrote or read, with its state: a tick reads the state its own
    last tick wrote, and decoding it again (about 1 MB of JSON at 1,000 instances: 50-90 ms) only
    gave back what was written. The store still reads the text every time, so a state another
    process wrote (a different text) is decoded as before.

    What is kept for a write is `from_json(to_json(state))`, not the state itself: that is what
    decoding the text gives (JSON keeps every value to_json makes, and from_json makes the same
    types from a tuple as from a list; tests/loop/test_state.py checks it on random states), where
    the state itself may differ from it (a dict's order, a list for a tuple)."""

    def __init__(self) -> None:
        self._kept: tuple[str, ControllerState] | None = None

    def read(self, text: str) -> ControllerState | None:
        """The state of `text` (None for a JSON null: no state saved)."""
        kept = self._kept
        if kept is not None and kept[0] == text:
            return kept[1]
        raw = json.loads(text)
        if raw is None:
            return None
        state = ControllerState.from_json(raw)
        self._kept = (text, state)
        return state

    def wrote(self, text: str, data: Mapping[str, Any], known: Mapping[str, WorkloadErrors] | None = None) -> None:
        """`text` (json.dumps of `data`, a to_json; `known` from the same ControllerState.encoded)
        was written; one that would not read back is not kept, so the next read decodes it and
        fails as it always did."""
        try:
            self._kept = (text, ControllerState.from_json(data, known))
        except (StateError, TypeError, ValueError, KeyError, AttributeError):
            self._kept = None
