"""Rate sources: static, the stale-value guard, agents' counters, Prometheus over real HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlparse

import pytest

from autoscaler.config.policy import PrometheusRates as PromCfg
from autoscaler.rates.agents import AgentsRates
from autoscaler.rates.base import StatusFed
from autoscaler.rates.prometheus import PrometheusRates
from autoscaler.rates.reader import RateReader
from autoscaler.rates.static import ManualRates, StaticRates
from autoscaler.transport.base import AgentStatus, ServerStatus, TransportError, parse_status
from tests.kit.httpserve import serving

pytestmark = pytest.mark.unit


def test_static() -> None:
    assert StaticRates({"a": 5.0}).read(0, ["a", "b"]) == {"a": 5.0, "b": None}


def test_guard_keeps_last_good_value_for_a_bounded_time() -> None:
    src = ManualRates({"a": 10.0, "b": 20.0})
    guard = RateReader(src, stale_after_s=100)
    r = guard.read(0, ["a", "b"])
    assert r.rates == {"a": 10.0, "b": 20.0} and not r.missing and r.error is None
    src.fail = True
    r = guard.read(50, ["a", "b"])
    assert r.rates == {"a": 10.0, "b": 20.0} and r.fresh == {} and "down" in (r.error or "")
    r = guard.read(101, ["a", "b"])
    assert r.rates == {} and r.missing == {"a", "b"}
    src.fail = False
    src.set(a=None)
    r = guard.read(102, ["a", "b"])
    assert r.rates == {"b": 20.0} and r.missing == {"a"}


def status(*servers: tuple[str, str, int]) -> AgentStatus:
    return AgentStatus(1, True, tuple(ServerStatus(n, w, "ready", total) for n, w, total in servers))


def test_agents_rates_from_request_counters() -> None:
    src = AgentsRates()
    src.feed({"s0": status(("a-0", "a", 100), ("b-0", "b", 0))})
    assert src.read(0, ["a", "b"]) == {"a": None, "b": None}  # no previous sample yet
    src.feed({"s0": status(("a-0", "a", 400), ("b-0", "b", 50)), "s1": status(("a-1", "a", 30))})
    assert src.read(10, ["a", "b"]) == {"a": 30.0, "b": 5.0}  # a-1 is new: counted from next tick
    src.feed({"s0": status(("a-0", "a", 20), ("b-0", "b", 50)), "s1": status(("a-1", "a", 130))})
    assert src.read(20, ["a", "b"]) == {"a": pytest.approx(12.0), "b": 0.0}  # a-0 restarted: counts 20


def test_parse_status() -> None:
    st = parse_status(
        {
            "generation": 3,
            "agent_running": True,
            "servers": [
                {"name": "a-0", "workload": "a", "state": "ready", "requests_total": 5, "latency_ms_p99": 12.5},
                {"name": "a-1", "workload": "a", "state": "starting", "latency_ms_p99": None},
            ],
            "extra": 1,
        }
    )
    assert st.assignment_generation == 3 and st.ready_names() == {"a-0"} and st.servers[0].latency_ms_p99 == 12.5
    assert parse_status({"generation": None, "servers": [], "agent_running": False}).running is False
    with pytest.raises(TransportError):
        parse_status(["not", "a", "dict"])


class _Prom(BaseHTTPRequestHandler):
    values: dict[str, str] = {}
    seen: list[dict[str, list[str]]] = []

    def log_message(self, *args: object) -> None:
        return None

    def do_GET(self) -> None:
        q = parse_qs(urlparse(self.path).query)
        self.seen.append(q)
        if "broken" in q["query"][0]:
            body, code = {"status": "error", "errorType": "bad_data", "error": "parse error"}, 400
        else:
            wl = q["query"][0].split('workload="')[1].split('"')[0]
            result = [{"metric": {}, "value": [float(q["time"][0]), self.values[wl]]}] if wl in self.values else []
            body, code = {"status": "success", "data": {"resultType": "vector", "result": result}}, 200
        raw = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


@pytest.fixture()
def prom() -> Iterator[str]:
    with serving(_Prom) as url:
        yield url


def test_prometheus_source(prom: str) -> None:
    _Prom.values = {"a": "12.5", "c": "NaN"}
    src = PrometheusRates(PromCfg(url=prom, timeout_s=2))
    assert src.read(1234.0, ["a", "b", "c"]) == {"a": 12.5, "b": None, "c": None}
    assert _Prom.seen[-3]["query"] == ['sum(rate(igniter_requests_total{workload="a"}[1m]))']
    assert _Prom.seen[-3]["time"] == ["1234.0"]
    broken = PrometheusRates(PromCfg(url=prom, query='broken{{workload="{workload}"}}', timeout_s=2))
    guard = RateReader(broken, 60)
    assert guard.read(0, ["a"]).error is not None


def test_prometheus_down_is_missing_data() -> None:
    src = PrometheusRates(PromCfg(url="http://127.0.0.1:9", timeout_s=1))
    reading = RateReader(src, 60).read(0, ["a"])
    assert reading.missing == {"a"} and reading.error


def test_only_status_fed_sources_declare_feed() -> None:
    """The controller hands statuses to sources that declare the StatusFed capability, and to no other."""
    assert isinstance(AgentsRates(), StatusFed)
    assert not isinstance(ManualRates({"a": 1.0}), StatusFed)


class PeakedRates(ManualRates):
    """ManualRates that also tells the busiest second of each read (rates.base.Peaked)."""

    def __init__(self) -> None:
        super().__init__()
        self.peak_values: dict[str, float | None] = {}
        self.peaks_fail = False

    def peaks(self, now: float, workloads: list[str]) -> dict[str, float | None]:
        if self.peaks_fail:
            raise ConnectionError("peaks down")
        return {w: self.peak_values.get(w) for w in workloads}


def test_a_peaked_source_gives_the_peaks_of_its_fresh_rates() -> None:
    from autoscaler.rates.base import Peaked

    src = PeakedRates()
    assert isinstance(src, Peaked) and not isinstance(ManualRates(), Peaked)
    reader = RateReader(src, stale_after_s=100)
    src.set(a=10.0, b=20.0, c=None)
    src.peak_values = {"a": 55.0, "b": 5.0, "c": 99.0}
    r = reader.read(0, ["a", "b", "c"])
    assert r.peaks == {"a": 55.0, "b": 20.0}  # b's peak is never under its rate; c read nothing
    src.peaks_fail = True
    r = reader.read(1, ["a", "b", "c"])
    assert r.peaks == {} and r.fresh == {"a": 10.0, "b": 20.0} and r.error is None
    src.fail = True
    r = reader.read(2, ["a", "b"])
    assert r.peaks == {} and r.rates == {"a": 10.0, "b": 20.0}  # stale values have no peak
    assert RateReader(ManualRates({"a": 1.0}), 100).read(0, ["a"]).peaks == {}


def test_gateway_rates_peaks_are_the_busiest_second_between_reads() -> None:
    """rate_max read with the counter, the maxima cleared after each read (so the next peak starts
    afresh); a clear that fails keeps the rates, and the next peak spans both reads."""
    from autoscaler.core.routing.routes import AddServer
    from autoscaler.gateway.base import GatewaySpec
    from autoscaler.gateway.fake import FakeGateway
    from autoscaler.rates.base import Peaked
    from autoscaler.rates.gateway import GatewayRates

    gw = FakeGateway()
    gw.ensure(GatewaySpec(listen="127.0.0.1:1", workloads=("a", "b")))
    gw.apply([AddServer("a", "a-0", "127.0.0.1:2")])
    src = GatewayRates(gw.observe, gw.clear_maxima)
    reader = RateReader(src, stale_after_s=100)
    assert isinstance(src, Peaked)
    gw.requests, gw.rate_max = {"a": 0, "b": 0}, {"a": 7}
    assert reader.read(0, ["a", "b", "c"]).peaks == {}  # no previous counter: nothing fresh
    assert gw.clears == 1 and gw.rate_max == {}
    gw.requests, gw.rate_max = {"a": 300, "b": 30}, {"a": 60, "b": 1}
    r = reader.read(30, ["a", "b", "c"])
    assert r.fresh == {"a": 10.0, "b": 1.0} and r.peaks == {"a": 60.0, "b": 1.0}
    assert src.peaks(30, ["c"]) == {"c": None}
    gw.requests, gw.rate_max = {"a": 600, "b": 60}, {"a": 12}
    r = reader.read(60, ["a", "b"])
    assert r.peaks == {"a": 12.0, "b": 1.0}  # b's busiest second since the clear was none: its mean stands
    src.clear = lambda: (_ for _ in ()).throw(ConnectionError("socket gone"))
    gw.requests, gw.rate_max = {"a": 900, "b": 90}, {"a": 40}
    r = reader.read(90, ["a", "b"])
    assert r.fresh == {"a": 10.0, "b": 1.0} and r.peaks["a"] == 40.0
