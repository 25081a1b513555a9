"""/openapi.json: a valid OpenAPI 3.1 document describing every /v1/* route and the health probes
(/healthz, /livez, /readyz, one check of each), and real answers of a ticking controller (before its
first tick, after ticks, under a token, as a standby) match it: status code, media type and body."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from jsonschema import ValidationError
from openapi_spec_validator import validate

from autoscaler.leader.base import Fence
from autoscaler.loop.service.wiring import make_leadership
from autoscaler.loop.status.app import V1
from autoscaler.loop.status.openapi import openapi
from autoscaler.loop.status.server import StatusServer, StatusState
from autoscaler.loop.tick.advisory import ADVICE_KINDS, snapshot
from autoscaler.loop.tick.records import TickReport
from tests.kit import web
from tests.kit.control import Clock, make_controller, make_policy
from tests.kit.openapi import check, check_response

pytestmark = pytest.mark.unit
TOKEN = "openapi-token-0123456789"
# (request, the documented path it is an answer of): every probe route, with its query flags
PROBES = [
    ("/healthz", "/healthz"),
    *((f"/{k}{q}", f"/{k}") for k in ("livez", "readyz") for q in ("", "?verbose", "?exclude=ping&verbose")),
    ("/livez/ping", "/livez/{check}"),
    ("/readyz/last-tick?verbose", "/readyz/{check}"),
    ("/readyz/no-such-check", "/readyz/{check}"),
]


def test_the_document_is_valid_openapi_and_covers_every_v1_route() -> None:
    server = StatusServer(StatusState(), 0).start()
    try:
        doc = web.get(f"http://127.0.0.1:{server.port}/openapi.json", timeout=5).json()
    finally:
        server.close()
    validate(doc)
    probes = ["/healthz", "/livez", "/readyz", "/livez/{check}", "/readyz/{check}"]
    assert doc["openapi"].startswith("3.1") and sorted(doc["paths"]) == sorted([*V1, *probes])


def test_real_answers_match_the_document(tmp_path: Path) -> None:
    policy = make_policy(
        tmp_path,
        scaling={"interval_s": 30, "headroom": "auto", "forecast": "last"},
        leader={"kind": "local", "lock_dir": str(tmp_path / "locks")},
    )
    clock = Clock()
    ctl, prov, _tr, manual = make_controller(policy, clock)
    state = StatusState()
    leadership = make_leadership(policy, Fence(time.monotonic))
    leadership.attempt(strict=True)
    state.set_leader(leadership.snapshot(), changed=True)  # what the service does at start
    server = StatusServer(state, 0, token=TOKEN).start()
    url = f"http://127.0.0.1:{server.port}"
    auth = {"Authorization": f"Bearer {TOKEN}"}
    try:
        doc = web.get(url + "/openapi.json", timeout=5).json()  # open, like /healthz
        seen = {path: [web.get(url + path, headers=auth, timeout=5).json()] for path in V1}  # before a tick
        probed = [(path, web.get(url + ask, timeout=5)) for ask, path in PROBES]  # open: no token
        for k in range(6):
            manual.set(alex=400.0 if k >= 3 else 150.0)
            state.publish(ctl, ctl.tick())
            clock.advance(30)
        for path in V1:
            seen[path].append(web.get(url + path, headers=auth, timeout=5).json())
        probed += [(path, web.get(url + ask, timeout=5)) for ask, path in PROBES]
        prov.list_instances = outage  # type: ignore[method-assign]  # a failed tick: 503 failing
        state.publish(ctl, ctl.tick())
        probed += [(path, web.get(url + ask, timeout=5)) for ask, path in PROBES]
        denied = web.get(url + "/v1/plan", timeout=5)
        leadership.stop()  # gives the lease up: this process is a standby now
        state.set_leader(leadership.snapshot(), changed=True)
        assert state.leader["role"] == "standby"
        for path in V1:
            seen[path].append(web.get(url + path, headers=auth, timeout=5).json())
        probed += [(path, web.get(url + ask, timeout=5)) for ask, path in PROBES]
    finally:
        server.close()
    assert denied.status_code == 401
    check(doc, "/v1/plan", denied.json(), "401")
    assert seen["/v1/plan"][1]["layout"]["slots"], "the ticks planned something"
    assert seen["/v1/fleet"][1]["instances"] and seen["/v1/headroom"][1]["workloads"]
    for path, bodies in seen.items():
        for body in bodies:
            check(doc, path, body)
    codes = {(path, r.status_code) for path, r in probed}
    assert {("/healthz", 200), ("/healthz", 503), ("/readyz", 503), ("/readyz/{check}", 404)} <= codes, codes
    for path, response in probed:
        check_response(doc, path, response)


def outage() -> list:  # type: ignore[type-arg]
    from autoscaler.fleet.base import ThrottledError

    raise ThrottledError("RequestLimitExceeded")


def test_a_changed_probe_answer_fails_the_check() -> None:
    doc = openapi()
    with pytest.raises(ValidationError):
        check(doc, "/healthz", {"status": "fine", "reasons": [], "checks": {}, "last_error": None}, "200")
    with pytest.raises(ValidationError):
        check(doc, "/readyz", "[+]ping ok\n", "200", "text/plain")  # no verdict line
    with pytest.raises(KeyError):
        check(doc, "/livez", "ok\n", "200")  # a probe answers text, not JSON


def test_a_changed_answer_fails_the_check(tmp_path: Path) -> None:
    """The check is not vacuous: a retyped or missing field breaks it."""
    policy = make_policy(tmp_path)
    ctl, _prov, _tr, _ = make_controller(policy, Clock())
    state = StatusState()
    state.publish(ctl, ctl.tick())
    spec = openapi()
    plan = dict(state.plan)
    check(spec, "/v1/plan", plan)
    with pytest.raises(ValidationError):
        check(spec, "/v1/plan", {**plan, "tick": "seven"})
    fleet = dict(state.fleet)
    del fleet["cost_per_hour"]
    with pytest.raises(ValidationError):
        check(spec, "/v1/fleet", fleet)
    instance = {**state.fleet["instances"][0], "attempt": None}
    with pytest.raises(ValidationError):
        check(spec, "/v1/fleet", {**state.fleet, "instances": [instance]})


def test_every_kind_of_advice_matches_the_document() -> None:
    """/v1/advice lists pool changes and refused calls too (issue 51 item 2): each kind the
    advisory tick can publish is one the document allows, and an unknown one is not."""
    spec = openapi()
    items = [{"action": k} for k in ADVICE_KINDS]
    body = snapshot(items, TickReport(tick=1, now=0.0))
    check(spec, "/v1/advice", body)
    assert set(body["counts"]) == set(ADVICE_KINDS) and all(v == 1 for v in body["counts"].values())
    with pytest.raises(ValidationError):
        check(spec, "/v1/advice", {**body, "actions": [{"action": "reboot"}]})
