"""/v1/fleet at 2,000 instances (issue 50 item 6): whole, or a page at a time with ?limit=&after=,
through the real status server; every answer valid against /openapi.json."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from autoscaler.core.fleet.lifecycle import Reason, new_record, transition
from autoscaler.loop.state.store import Store
from autoscaler.loop.status.openapi import openapi
from autoscaler.loop.status.server import StatusServer, StatusState, fleet_snapshot
from tests.kit import web
from tests.kit.control import make_controller, make_policy
from tests.kit.openapi import check

pytestmark = pytest.mark.e2e

N = 2000


@pytest.fixture
def served(tmp_path) -> Iterator[tuple[str, dict]]:
    """A status server whose fleet view holds N open records (slots of two widths, so their
    order is the records' own, not the numbers')."""
    store = Store(":memory:")
    changes = []
    for n in range(N):
        rec = new_record(f"g5-{n}", n % 3, "g4dn.xlarge", 1000.0, 1)
        changes.append(transition(rec, Reason.REQUEST, 1000.0, ""))
    store.apply(changes)
    ctl, *_ = make_controller(make_policy(tmp_path), store=store)
    state = StatusState()
    started = time.perf_counter()
    state.fleet = fleet_snapshot(ctl)
    built = time.perf_counter() - started
    assert built < 2.0, f"the fleet view of {N} records took {built:.2f} s to build"
    srv = StatusServer(state, 0).start()
    try:
        yield f"http://127.0.0.1:{srv.port}", state.fleet
    finally:
        srv.close()


def test_pages_walk_the_whole_fleet_once_in_record_order(served) -> None:
    url, view = served
    spec, seen, after, pages = openapi(), [], None, 0
    with httpx.Client(base_url=url, timeout=10) as client:
        while True:
            params = {"limit": "300"} | ({"after": after} if after else {})
            reply = client.get("/v1/fleet", params=params)
            assert reply.status_code == 200
            body = reply.json()
            check(spec, "/v1/fleet", body)
            assert len(body["instances"]) <= 300 and body["page"]["total"] == N
            seen += [(i["slot"], i["attempt"]) for i in body["instances"]]
            pages += 1
            after = body["page"]["next_after"]
            if after is None:
                break
        whole = client.get("/v1/fleet").json()
    assert pages == -(-N // 300)
    assert seen == [(i["slot"], i["attempt"]) for i in view["instances"]] == sorted(seen)
    assert len(whole["instances"]) == N and "page" not in whole
    check(spec, "/v1/fleet", whole)


def test_a_page_is_small_and_quick_next_to_the_whole_view(served) -> None:
    url, _ = served
    with httpx.Client(base_url=url, timeout=10) as client:
        page = client.get("/v1/fleet", params={"limit": "20"})
        started = time.perf_counter()
        client.get("/v1/fleet", params={"limit": "20"})
        took = time.perf_counter() - started
        whole = client.get("/v1/fleet")
    assert len(page.content) * 20 < len(whole.content)
    assert took < 1.0, f"a 20-instance page of a {N}-instance fleet took {took:.2f} s"


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"limit": "0"}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"limit": "5001"}, "limit"),
        ({"after": "no-cursor"}, "after"),
        ({"after": "slot#x"}, "after"),
    ],
)
def test_a_bad_limit_or_after_is_a_400_naming_it(served, params, named) -> None:
    url, _ = served
    reply = web.get(f"{url}/v1/fleet", params=params, timeout=10)
    assert reply.status_code == 400 and reply.json()["error"].startswith(f"{named}: ")
    check(openapi(), "/v1/fleet", reply.json(), "400")
