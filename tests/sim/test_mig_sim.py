"""`igniter simulate` on a MIG policy: capacity comes from the measured table, slice by slice."""

from __future__ import annotations

import json

import pytest

from autoscaler.config.policy import load_policy
from autoscaler.core.rollout.colocation import judge
from autoscaler.model.mig import load_gpu_model
from tests.kit.mig import import_a100, needs_shared

pytestmark = [pytest.mark.unit, needs_shared]


@pytest.fixture
def mig_policy(tmp_path):
    import_a100(tmp_path / "profiles")
    path = tmp_path / "policy.yaml"
    path.write_text(
        "profiles_dir: profiles\n"
        "instance_types:\n- {name: a100-1, gpu: a100-80gb, gpus: 1, price_per_hour: 5.07}\n"
        "workloads:\n- {name: r, model: resnet50, slo_ms: 200, rate_rps: 1200}\n"
        "- {name: m, model: mobilenetv2, slo_ms: 150, rate_rps: 800}\n"
        "agents: {transport: none}\n"
        "scaling: {interval_s: 60, boot_s: 60, headroom: 0.2, forecast: last}\n"
    )
    return path


def test_a_slice_serves_its_row_and_broken_cuts_or_rows_serve_nothing(mig_policy):
    policy = load_policy(mig_policy)
    row = ("r", "resnet50", 32, 42.86, ("3g.40gb", 4, 2))
    (ok, thr), *_ = judge(policy, "a100-80gb", [row])
    measured = load_gpu_model(policy.profiles_dir / "a100-80gb.yaml").row("resnet50", "3g.40gb", 32, 2)
    assert ok and thr == pytest.approx(2 * measured.throughput_rps)
    overlap = [row, ("m", "mobilenetv2", 4, 14.3, ("1g.10gb", 5, 1))]  # unit 5 is inside the 3g at 4
    assert [v[0] for v in judge(policy, "a100-80gb", overlap)] == [False, False]
    assert judge(policy, "a100-80gb", [("r", "resnet50", 33, 42.86, ("3g.40gb", 4, 2))]) == [(False, 0.0)]
    assert judge(policy, "a100-80gb", [("r", "resnet50", 32, 42.86)]) == [(False, 0.0)]  # no slice given


def test_simulate_replays_a_mig_policy(igniter, mig_policy, tmp_path):
    trace = tmp_path / "trace.csv"
    rows = ["time_s,r,m"] + [f"{60 * i},{1000 + 40 * i},{600 + 30 * i}" for i in range(20)]
    trace.write_text("\n".join(rows) + "\n")
    r = igniter("simulate", mig_policy, "--trace", trace, "--json")
    assert r.code == 0, r.err
    s = json.loads(r.out)
    assert s["slo_attainment"] > 0.8 and s["cost_total_usd"] > 0
    assert set(s["instance_hours"]) == {"a100-1"} and s["outage_steps"] == 0


def test_simulate_counts_re_cuts_and_the_oracle_makes_them_without_a_short_row(igniter, mig_policy, tmp_path):
    """Rates that take turns (r up while m is down, then the other way round) make the planner cut
    the GPUs again: the re-cuts are counted, and under the oracle none leaves a row short."""
    trace = tmp_path / "trace.csv"
    turns = [(400, 3000), (2500, 500), (900, 4000), (3000, 800)]
    rows = ["time_s,r,m"] + [f"{60 * i},{turns[i // 5 % 4][0]},{turns[i // 5 % 4][1]}" for i in range(40)]
    trace.write_text("\n".join(rows) + "\n")
    r = igniter("simulate", mig_policy, "--trace", trace, "--json", "--strategy", "oracle")
    assert r.code == 0, r.err
    s = json.loads(r.out)
    assert s["recuts"] > 0 and s["recut_short_steps"] == 0
    assert s["outage_steps"] == 0 and s["reconfig_short_steps"] == 0 and not s["invariant_breaches"]
    assert 0 <= s["recut_surge_cost_usd"] <= s["surge_cost_usd"] + 0.01
    table = igniter("simulate", mig_policy, "--trace", trace, "--strategy", "oracle")
    assert f"{s['recuts']} (0 short rows they caused)" in table.out
