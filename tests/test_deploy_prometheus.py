"""deploy/prometheus/alerts.yaml and deploy/grafana/igniter.json, against promtool and the real metrics.

- `promtool check rules` and `promtool test rules` (alerts-test.yaml: every alert fires when it
  should and not before) run when promtool is installed (Debian's prometheus package; `make test`
  installs it), and fail loudly where it is not, as checkov does.
- Every metric name the rules, their unit tests and the dashboard use is one the code exports: read
  from the status endpoint's own registry (with its gateway and policy collectors fed) and the
  inference server's, so a renamed metric breaks this test rather than an alert nobody sees fire.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from prometheus_client import generate_latest

from agents.server.metrics import ServerMetrics
from autoscaler.loop.status.metrics_policy import PolicyCollector
from autoscaler.loop.status.server import StatusState
from tests.conftest import ROOT
from tests.kit.control import make_policy

pytestmark = pytest.mark.unit
PROM = ROOT / "deploy" / "prometheus"
DASHBOARD = ROOT / "deploy" / "grafana" / "igniter.json"
NAME = re.compile(r"\b(igniter_[a-z0-9_]+)")


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool is not installed: `make debs` (Debian's prometheus package)", pytrace=False)
    return path


def test_promtool_checks_the_rules() -> None:
    done = subprocess.run([promtool(), "check", "rules", "alerts.yaml"], cwd=PROM, capture_output=True, text=True)
    assert done.returncode == 0 and f"SUCCESS: {len(alerts())} rules found" in done.stdout, done.stdout + done.stderr


def test_promtool_unit_tests_fire_each_alert_when_due() -> None:
    done = subprocess.run([promtool(), "test", "rules", "alerts-test.yaml"], cwd=PROM, capture_output=True, text=True)
    assert done.returncode == 0 and "SUCCESS" in done.stdout, done.stdout + done.stderr
    tested = {
        t["alertname"]
        for case in yaml.safe_load((PROM / "alerts-test.yaml").read_text())["tests"]
        for t in case["alert_rule_test"]
    }
    assert tested == set(alerts()), "every alert has a unit test"


def alerts() -> dict[str, str]:
    groups = yaml.safe_load((PROM / "alerts.yaml").read_text())["groups"]
    return {r["alert"]: r["expr"] for g in groups for r in g["rules"]}


def test_the_required_alerts_exist() -> None:
    assert {
        "IgniterAttainmentBelowTarget",
        "IgniterWorkloadWithoutReadyServers",
        "IgniterLeaderLost",
        "IgniterTickErrors",
        "IgniterCostAboveMax",
        "IgniterLatencyAboveSlo",
        "IgniterTickOverrun",
    } <= set(alerts())


def exported(tmp_path: Path) -> set[str]:
    """Every sample name the status endpoint and an inference server expose, from their registries."""
    state = StatusState()
    policy = make_policy(tmp_path, scaling={"max_cost_per_hour": 50.0})
    state.metrics.registry.register(PolicyCollector(lambda: policy))
    server = {
        "name": "w-0",
        "address": "10.0.0.1:8001",
        "state": "UP",
        "weight": 256,
        "planned_rate_rps": 10.0,
        "current_sessions": 0,
        "requests_total": 5,
        "check_ok": True,
    }
    state.metrics.gateway.set(
        {
            "kind": "haproxy",
            "ok": True,
            "workloads": {"w": {"requests_total": 5, "errors_5xx": 0, "request_rate_rps": 1.0, "servers": [server]}},
        }
    )
    text = generate_latest(state.metrics.registry).decode()
    text += generate_latest(ServerMetrics("w", lambda: 0).registry).decode()
    names = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            names |= {name} if kind != "histogram" else {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
        elif line and not line.startswith("#"):
            names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    return names


def used() -> dict[str, set[str]]:
    dash = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]] + [
        v["query"] for v in dash["templating"]["list"] if v["type"] == "query"
    ]
    tests = yaml.safe_load((PROM / "alerts-test.yaml").read_text())["tests"]
    series = [s["series"] for case in tests for s in case["input_series"]]
    return {
        "alerts.yaml": {n for e in alerts().values() for n in NAME.findall(e)},
        "alerts-test.yaml": {n for s in series for n in NAME.findall(s)},
        "igniter.json": {n for e in exprs for n in NAME.findall(e)},
    }


def test_every_metric_the_rules_and_the_dashboard_use_is_exported(tmp_path: Path) -> None:
    names = exported(tmp_path)
    assert {"igniter_ticks_total", "igniter_gateway_server_weight", "igniter_request_latency_seconds_bucket"} <= names
    for where, metrics in used().items():
        assert metrics and not metrics - names, f"{where} uses metrics nobody exports: {sorted(metrics - names)}"


def test_the_dashboard_covers_what_ops_watch() -> None:
    titles = " / ".join(p["title"] for p in json.loads(DASHBOARD.read_text())["panels"]).lower()
    for topic in ("cost", "instances by state", "rate vs capacity", "headroom", "attainment", "p99", "gateway weights"):
        assert topic in titles, topic
