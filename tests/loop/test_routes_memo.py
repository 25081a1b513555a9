"""GatewayStep works the desired routes out again only when an input changed (loop/steps/
gateway_step.py `_desired`): whatever the inputs do between ticks, including a caller changing a
mapping it passed before, the routes are what core.routing.routes.desired_routes gives for them."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.core.layout.layout_types import Layout, PlannedServer, SlotSpec
from autoscaler.core.routing.routes import Readiness, desired_routes
from autoscaler.gateway.fake import FakeGateway
from autoscaler.loop.steps import gateway_step
from autoscaler.loop.steps.gateway_step import GatewayStep
from tests.kit.examples import examples


def _server(name: str, workload: str, rate: float, address: str = "") -> PlannedServer:
    return PlannedServer(
        name=name, workload=workload, model="resnet50", gpu_index=0, index=0, batch=4, mps_percent=50.0,
        rate_rps=rate, address=address,
    )  # fmt: skip


def _layout(rates: tuple[float, float]) -> Layout:
    servers = (_server("a-1", "a", rates[0]), _server("b-1", "b", rates[1]))
    return Layout("igniter", (SlotSpec("s-1", "p3.2xlarge", 3.06, ("v100",), servers),))


LAYOUTS = [None, _layout((10.0, 20.0)), _layout((30.0, 20.0))]
SERVERS = [
    _server("a-1", "a", 10.0, "127.0.0.1:8100"),
    _server("b-1", "b", 20.0, "127.0.0.1:8101"),
    _server("a-0", "a", 5.0, "127.0.0.1:8102"),
]
NAMES = [s.name for s in SERVERS]


@pytest.mark.unit
def test_equal_inputs_reuse_the_routes_and_a_changed_one_works_them_out_again(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    def counted(**kwargs: Any) -> Any:
        calls.append(1)
        return desired_routes(**kwargs)

    monkeypatch.setattr(gateway_step, "desired_routes", counted)
    step = GatewayStep(FakeGateway())
    applied = {"s-1#0": tuple(SERVERS)}
    ready = Readiness(ready=frozenset(NAMES), healthy=frozenset(NAMES))
    first = step._desired(layout=LAYOUTS[1], applied=applied, readiness=ready, aliases=None)
    again = step._desired(layout=LAYOUTS[1], applied=dict(applied), readiness=ready, aliases=None)
    assert again is first and len(calls) == 1  # equal inputs, new objects: no second working out
    applied["s-1#0"] = tuple(SERVERS[:2])  # the caller changes the mapping it passed
    changed = step._desired(layout=LAYOUTS[1], applied=applied, readiness=ready, aliases=None)
    assert len(calls) == 2 and changed == desired_routes(
        layout=LAYOUTS[1], applied=applied, readiness=ready, draining=frozenset(), aliases=None
    )
    applied["s-1#0"] = tuple(SERVERS)
    step._desired(layout=LAYOUTS[1], applied=applied, readiness=ready, aliases=None)
    step.removing = frozenset({"a-1"})  # reconcile drains a server: an input too
    drained = step._desired(layout=LAYOUTS[1], applied=applied, readiness=ready, aliases=None)
    assert len(calls) == 4 and {r.name: r.state for r in drained["a"]} == {"a-0": "ready", "a-1": "drain"}


subsets = st.frozensets(st.sampled_from(NAMES))
# Each step changes at most one input from the step before, so a change the memo overlooks is
# not hidden by another input changing with it.
changes = st.one_of(
    st.just(("keep", None)),
    st.tuples(st.just("layout"), st.sampled_from(range(len(LAYOUTS)))),
    st.tuples(st.just("servers"), st.lists(st.sampled_from(range(len(SERVERS))), unique=True, max_size=3)),
    st.tuples(st.just("in_place"), st.lists(st.sampled_from(range(len(SERVERS))), unique=True, max_size=3)),
    st.tuples(st.just("ready"), subsets),
    st.tuples(st.just("healthy"), subsets),
    st.tuples(st.just("removing"), subsets),
    st.tuples(st.just("aliases"), st.booleans()),
)


@pytest.mark.property
@settings(max_examples=examples(150), deadline=None)
@given(script=st.lists(changes, min_size=1, max_size=10))
def test_the_routes_are_always_what_the_inputs_give(script: list[tuple[str, Any]]) -> None:
    step = GatewayStep(FakeGateway())
    now: dict[str, Any] = {
        "layout": 1, "servers": [0, 1, 2], "ready": frozenset(NAMES), "healthy": frozenset(NAMES),
        "removing": frozenset(), "aliases": False,
    }  # fmt: skip
    applied = {"s-1#0": tuple(SERVERS)}
    for what, value in script:
        if what == "in_place":  # the caller changes the mapping it passed last time
            applied["s-1#0"] = tuple(SERVERS[k] for k in value)
        elif what == "servers":
            applied = {"s-1#0": tuple(SERVERS[k] for k in value)}
        elif what != "keep":
            now[what] = value
        inputs = {
            "layout": LAYOUTS[now["layout"]],
            "applied": applied,
            "readiness": Readiness(ready=now["ready"], healthy=now["healthy"]),
            "aliases": {n: n for n in NAMES} if now["aliases"] else None,
        }
        step.removing = now["removing"]
        assert step._desired(**inputs) == desired_routes(**inputs, draining=now["removing"])
