"""Health tells the truth (loop/status/health.py), over HTTP from a ticking controller: /healthz says
`degraded` with reasons when an agent refuses its assignment or stops answering, when a workload
has no ready server, and when the measured attainment is below target; /readyz and /livez answer
as kube-apiserver's do (`ok`, `?verbose`, `?exclude=`, `/readyz/NAME`); a metric and one log line
mark each change. The real-process version is tests/loop/test_health_e2e.py."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from autoscaler.loop.status.health import HealthBook, liveness, render
from autoscaler.loop.status.server import StatusServer, StatusState
from tests.kit import web
from tests.kit.control import Clock, make_controller, make_policy

pytestmark = pytest.mark.unit


@pytest.fixture
def served() -> Iterator[tuple[StatusState, str]]:
    state = StatusState()
    server = StatusServer(state, 0).start()
    try:
        yield state, f"http://127.0.0.1:{server.port}"
    finally:
        server.close()


def health_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("health: ")]


def metric(url: str, name: str) -> float | None:
    for line in web.get(url + "/metrics", timeout=5).text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return None


def test_before_the_first_tick_it_is_starting_and_not_ready(served: tuple[StatusState, str]) -> None:
    _state, url = served
    health = web.get(url + "/healthz", timeout=5)
    assert health.status_code == 200 and health.json()["status"] == "starting"
    ready = web.get(url + "/readyz", timeout=5)
    assert ready.status_code == 503 and ready.headers["content-type"].startswith("text/plain")
    assert ready.text == "[-]last-tick failed: no tick yet\nreadyz check failed\n"
    assert web.get(url + "/livez", timeout=5).text == "ok\n"


def test_a_refused_assignment_degrades_naming_the_slot(
    tmp_path: Path, served: tuple[StatusState, str], caplog: pytest.LogCaptureFixture
) -> None:
    state, url = served
    ctl, _prov, transport, _ = make_controller(make_policy(tmp_path), Clock())
    transport.reject = True
    caplog.set_level(logging.INFO, logger="autoscaler.loop.status.server")
    for _ in range(6):
        state.publish(ctl, ctl.tick())
        ctl.deps.clock.advance(30)  # type: ignore[attr-defined]
    health = web.get(url + "/healthz", timeout=5)
    body = health.json()
    assert health.status_code == 200 and body["status"] == "degraded", body  # 200: documented for load balancers
    agents = body["checks"]["agents"]
    assert not agents["ok"] and any("agent refuses or fails" in r and "rejected (fake)" in r for r in agents["reasons"])
    assert body["checks"]["workloads"]["reasons"] == ["alex: no ready server", "res: no ready server"]
    assert body["checks"]["last-tick"]["ok"] and body["checks"]["attainment"]["ok"]
    assert all(r.startswith(("agents: test-p3.2xlarge-", "workloads: ")) for r in body["reasons"])
    ready = web.get(url + "/readyz", timeout=5)
    assert ready.status_code == 503 and "[-]agents failed: test-p3.2xlarge-" in ready.text
    assert ready.text.splitlines()[0] == "[+]last-tick ok" and ready.text.endswith("readyz check failed\n")
    assert web.get(url + "/readyz/agents", timeout=5).status_code == 503
    assert web.get(url + "/readyz/attainment", timeout=5).text == "ok\n"
    assert web.get(url + "/readyz?exclude=agents&exclude=workloads", timeout=5).text == "ok\n"
    nope = web.get(url + "/readyz/nope", timeout=5)
    assert nope.status_code == 404 and "no readyz check 'nope'" in nope.text
    assert metric(url, 'igniter_health_status{status="degraded"}') == 1.0
    assert metric(url, 'igniter_health_status{status="ok"}') == 0.0
    assert metric(url, 'igniter_health_check{check="agents"}') == 0.0
    assert metric(url, 'igniter_ready_servers{workload="alex"}') == 0.0
    lines = health_lines(caplog)  # six ticks, two changes: booting (no server yet), then the refusals
    assert [line.split(": ")[1].split(" (")[0] for line in lines] == ["degraded", "degraded"], lines
    assert lines[0] == "health: degraded (workloads: alex: no ready server; workloads: res: no ready server)"
    assert lines[1].startswith("health: degraded (agents: test-p3.2xlarge-")


def test_an_agent_that_stops_answering_and_a_server_not_ready(
    tmp_path: Path, served: tuple[StatusState, str], caplog: pytest.LogCaptureFixture
) -> None:
    state, url = served
    clock = Clock()
    # a minute without capacity is a large share of a few minutes' history: a low target keeps the
    # attainment check (test_attainment_below_target_degrades) out of this one
    policy = make_policy(tmp_path, scaling={"interval_s": 30, "headroom": 0.0, "target_attainment": 0.5})
    ctl, prov, transport, _ = make_controller(policy, clock)
    caplog.set_level(logging.INFO, logger="autoscaler.loop.status.server")
    for _ in range(3):
        state.publish(ctl, ctl.tick())
        clock.advance(30)
    assert web.get(url + "/healthz", timeout=5).json()["status"] == "ok"
    assert metric(url, 'igniter_ready_servers{workload="alex"}') == 2.0
    first = sorted(i.id for i in prov.list_instances())[0]
    transport.unreachable.add(first)
    for _ in range(2):
        state.publish(ctl, ctl.tick())
        clock.advance(30)
    reasons = web.get(url + "/healthz", timeout=5).json()["reasons"]
    assert any(r.startswith("agents: test-") and "agent unreachable for 60 s" in r for r in reasons), reasons
    transport.unreachable.clear()
    transport.not_ready.update(s["name"] for _, a in transport.applies for s in a["servers"] if s["workload"] == "res")
    state.publish(ctl, ctl.tick())
    body = web.get(url + "/healthz", timeout=5).json()
    assert body["status"] == "degraded" and body["reasons"] == ["workloads: res: no ready server"], body
    transport.not_ready.clear()
    clock.advance(30)
    state.publish(ctl, ctl.tick())
    assert web.get(url + "/healthz", timeout=5).json()["status"] == "ok"
    assert [line.split(" (")[0] for line in health_lines(caplog)] == [
        "health: degraded",  # the first tick: launched, nothing ready yet
        "health: ok",
        "health: degraded",  # unreachable
        "health: degraded",  # res not ready
        "health: ok",
    ]


def test_attainment_below_target_degrades(tmp_path: Path, served: tuple[StatusState, str]) -> None:
    state, url = served
    clock = Clock()
    policy = make_policy(tmp_path, scaling={"interval_s": 30, "headroom": "auto", "forecast": "last"})
    ctl, _prov, _tr, manual = make_controller(policy, clock)
    for k in range(40):
        manual.set(alex=400.0 if k >= 30 else 150.0)  # the step finds the capacity short for a while
        state.publish(ctl, ctl.tick())
        clock.advance(30)
    body = web.get(url + "/healthz", timeout=5).json()
    assert body["status"] == "degraded" and not body["checks"]["attainment"]["ok"]
    (reason,) = body["checks"]["attainment"]["reasons"]
    assert reason.startswith("alex: attainment over the last hour 0.") and reason.endswith("below the target 0.999")
    assert "[-]attainment failed: alex: " in web.get(url + "/readyz?verbose", timeout=5).text


def test_a_failed_tick_is_failing_and_a_standby_is_ready(tmp_path: Path, served: tuple[StatusState, str]) -> None:
    from autoscaler.fleet.base import ThrottledError

    state, url = served
    ctl, prov, _tr, _ = make_controller(make_policy(tmp_path), Clock())

    def outage() -> list:  # type: ignore[type-arg]
        raise ThrottledError("RequestLimitExceeded")

    prov.list_instances = outage  # type: ignore[method-assign]
    state.publish(ctl, ctl.tick())
    health = web.get(url + "/healthz", timeout=5)
    assert health.status_code == 503 and health.json()["status"] == "failing"
    assert "RequestLimitExceeded" in health.json()["last_error"]
    state.set_leader({"role": "standby", "token": None}, changed=True)
    health = web.get(url + "/healthz", timeout=5)
    assert health.status_code == 200 and health.json()["status"] == "standby" and health.json()["reasons"] == []
    ready = web.get(url + "/readyz?verbose", timeout=5)
    assert ready.status_code == 200 and ready.text.startswith("[+]leader ok (standby")
    assert metric(url, 'igniter_health_status{status="standby"}') == 1.0


def test_livez_fails_when_no_tick_starts() -> None:
    book = HealthBook(interval_s=30.0, started_at=1000.0)
    assert render("livez", book.live(1100.0), verbose=True) == (
        200,
        "[+]ping ok\n[+]tick-loop ok\nlivez check passed\n",
    )
    book.beat_at = 1200.0
    code, text = render("livez", book.live(1200.0 + 301), verbose=False)
    assert code == 503 and text == (
        "[+]ping ok\n[-]tick-loop failed: no tick started for 301 s (bound 300 s)\nlivez check failed\n"
    )
    assert liveness(since_tick_s=1000, interval_s=600)[1].ok  # 5 intervals of a slow loop
