"""Policy validation: every malformed case exits 2 naming the file and field, with no traceback."""

from __future__ import annotations

import json

import pydantic
import pytest
import yaml

from autoscaler.config.policy import load_policy, policy_json_schema
from tests.conftest import PROFILES, ROOT, run_cli

GOOD = {
    "instance_types": [{"name": "p3.2xlarge", "gpu": "v100", "gpus": 1, "price_per_hour": 3.06}],
    "workloads": [
        {"name": "a", "model": "alexnet", "slo_ms": 15, "rate_rps": 500},
        {"name": "b", "model": "resnet50", "slo_ms": 40, "rate_rps": 400},
        {"name": "c", "model": "vgg19", "slo_ms": 60, "rate_rps": 200},
    ],
}


def write(tmp_path, data, name="policy.yaml"):
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return path


def mutate(path: str, value):
    """GOOD with one field replaced; path like 'workloads.2.slo_ms'."""
    data = json.loads(json.dumps(GOOD))
    *parents, last = path.split(".")
    node = data
    for key in parents:
        node = node[int(key)] if key.isdigit() else node[key]
    if value is DELETE:
        del node[int(last) if last.isdigit() else last]
    else:
        node[int(last) if last.isdigit() else last] = value
    return data


DELETE = object()

CASES = [
    ("wrong type", mutate("workloads.2.slo_ms", "fast"), "workloads[2].slo_ms"),
    ("zero", mutate("workloads.1.slo_ms", 0), "workloads[1].slo_ms"),
    ("negative rate", mutate("workloads.0.rate_rps", -5), "workloads[0].rate_rps"),
    ("negative min rate", mutate("workloads.1.min_rate_rps", -1), "workloads[1].min_rate_rps"),
    ("min rate not a number", mutate("workloads.2.min_rate_rps", "lots"), "workloads[2].min_rate_rps"),
    ("negative price", mutate("instance_types.0.price_per_hour", -1), "instance_types[0].price_per_hour"),
    ("zero gpus", mutate("instance_types.0.gpus", 0), "instance_types[0].gpus"),
    ("typo key", {**GOOD, "workloads": [{"name": "a", "model": "alexnet", "slo": 15}]}, "workloads[0].slo"),
    ("unknown top key", {**GOOD, "instance_type": []}, "instance_type"),
    ("missing section", {"workloads": GOOD["workloads"]}, "instance_types"),
    ("empty workloads", {**GOOD, "workloads": []}, "workloads"),
    ("duplicate workload", {**GOOD, "workloads": GOOD["workloads"] + [GOOD["workloads"][0]]}, "workloads[3].name"),
    ("duplicate type", {**GOOD, "instance_types": GOOD["instance_types"] * 2}, "instance_types[1].name"),
    ("unknown model", mutate("workloads.1.model", "bert"), "workloads[1].model"),
    ("gateway listen", {**GOOD, "gateway": {"listen": "8000"}}, "gateway.listen"),
    ("gateway kind", {**GOOD, "gateway": {"kind": "nginx"}}, "gateway.kind"),
    (
        "gateway rates, no gateway",
        {**GOOD, "gateway": {"kind": "none"}, "rates": {"source": "gateway"}},
        "rates.source",
    ),
    ("discover without ec2", {**GOOD, "gateway": {"discover": True}}, "gateway.discover"),
    ("missing profile", mutate("instance_types.0.gpu", "a100"), "instance_types[0].gpu"),
    ("missing field", mutate("workloads.0.slo_ms", DELETE), "workloads[0].slo_ms"),
    ("bad scaling", {**GOOD, "scaling": {"forecast": "magic"}}, "scaling.forecast"),
    ("headroom word", {**GOOD, "scaling": {"headroom": "lots"}}, "scaling.headroom"),
    ("negative headroom", {**GOOD, "scaling": {"headroom": -0.1}}, "scaling.headroom"),
    ("target of 1", {**GOOD, "scaling": {"target_attainment": 1.0}}, "scaling.target_attainment"),
    ("target too low", {**GOOD, "scaling": {"target_attainment": 0.2}}, "scaling.target_attainment"),
    ("zero headroom window", {**GOOD, "scaling": {"headroom_window_s": 0}}, "scaling.headroom_window_s"),
    ("negative headroom feedback", {**GOOD, "scaling": {"headroom_feedback_s": -1}}, "scaling.headroom_feedback_s"),
    ("zero spot price", mutate("instance_types.0.spot_price_per_hour", 0), "instance_types[0].spot_price_per_hour"),
    (
        "on-demand floor above 1",
        {**GOOD, "scaling": {"spot": {"min_on_demand_fraction": 1.5}}},
        "scaling.spot.min_on_demand_fraction",
    ),
    (
        "workload floor below 0",
        mutate("workloads.1.min_on_demand_fraction", -0.1),
        "workloads[1].min_on_demand_fraction",
    ),
    (
        "queue not a URL",
        {**GOOD, "scaling": {"spot": {"interruption_queue": "my-queue"}}},
        "scaling.spot.interruption_queue",
    ),
    (
        "budget above 100 %",
        {**GOOD, "scaling": {"disruption_budget": {"max_unavailable": "150%"}}},
        "scaling.disruption_budget.max_unavailable",
    ),
    (
        "negative budget",
        {**GOOD, "scaling": {"disruption_budget": {"max_unavailable": -1}}},
        "scaling.disruption_budget.max_unavailable",
    ),
    ("negative max_surge", {**GOOD, "scaling": {"max_surge": -1}}, "scaling.max_surge"),
    ("max_surge not a count", {**GOOD, "scaling": {"max_surge": "lots"}}, "scaling.max_surge"),
    ("max_surge a bool", {**GOOD, "scaling": {"max_surge": True}}, "scaling.max_surge"),
    ("negative ramp reads", {**GOOD, "scaling": {"ramp_reads": -1}}, "scaling.ramp_reads"),
    ("ramp reads a word", {**GOOD, "scaling": {"ramp_reads": "three"}}, "scaling.ramp_reads"),
    ("ramp reads a fraction", {**GOOD, "scaling": {"ramp_reads": 2.5}}, "scaling.ramp_reads"),
    ("negative onset spread", {**GOOD, "scaling": {"onset_spread_s": -60}}, "scaling.onset_spread_s"),
    ("onset spread over an hour", {**GOOD, "scaling": {"onset_spread_s": 3601}}, "scaling.onset_spread_s"),
    ("onset spread a word", {**GOOD, "scaling": {"onset_spread_s": "5m"}}, "scaling.onset_spread_s"),
    ("onset spread a bool", {**GOOD, "scaling": {"onset_spread_s": True}}, "scaling.onset_spread_s"),
]


@pytest.mark.unit
def test_headroom_is_auto_by_default_or_a_number(tmp_path):
    assert load_policy(write(tmp_path, GOOD)).scaling.headroom == "auto"
    assert load_policy(write(tmp_path, GOOD)).scaling.target_attainment == 0.999
    fixed = load_policy(write(tmp_path, {**GOOD, "scaling": {"headroom": 1, "target_attainment": 0.99}}))
    assert fixed.scaling.headroom == 1.0 and isinstance(fixed.scaling.headroom, float)
    assert fixed.scaling.target_attainment == 0.99


@pytest.mark.unit
def test_a_bad_headroom_says_what_it_may_be(igniter, tmp_path):
    path = write(tmp_path, {**GOOD, "scaling": {"headroom": "lots"}})
    res = igniter("validate", path)
    assert res.code == 2
    assert f"{path}: scaling.headroom: must be 'auto' or a finite number from 0 to 10 (got 'lots')" in res.err


@pytest.mark.unit
def test_max_surge_is_a_count_or_a_percentage(tmp_path):
    """scaling.max_surge: default None (1, or 10 % of the fleet if larger), a count, or "N%"."""
    assert load_policy(write(tmp_path, GOOD)).scaling.max_surge is None
    for value in (0, 3, "25%", "12.5%"):
        assert load_policy(write(tmp_path, {**GOOD, "scaling": {"max_surge": value}})).scaling.max_surge == value


@pytest.mark.unit
@pytest.mark.parametrize(("label", "data", "field"), CASES, ids=[c[0] for c in CASES])
def test_malformed_policy_exits_2_naming_the_field(igniter, tmp_path, label, data, field):
    path = write(tmp_path, data)
    res = igniter("validate", path)
    assert res.code == 2, res
    assert f"{path}: {field}:" in res.err
    assert "Traceback" not in res.err


@pytest.mark.unit
@pytest.mark.parametrize(
    ("label", "text", "field"),
    [
        ("yaml syntax", "instance_types:\n  - {name: p3\n workloads: [\n", "line "),
        ("empty file", "", "file is empty"),
        ("not a mapping", "- just\n- a list\n", "expected a mapping"),
    ],
)
def test_unreadable_policy_exits_2(igniter, tmp_path, label, text, field):
    path = write(tmp_path, text)
    res = igniter("validate", path)
    assert res.code == 2
    assert str(path) in res.err and field in res.err


@pytest.mark.unit
def test_yaml_error_names_the_line(igniter, tmp_path):
    path = write(tmp_path, "fleet: a\ninstance_types: [\n  {name: x,\nworkloads: ]\n")
    res = igniter("validate", path)
    assert res.code == 2 and "line 4" in res.err


@pytest.mark.unit
def test_missing_file(igniter, tmp_path):
    res = igniter("validate", tmp_path / "nope.yaml")
    assert res.code == 2 and "file not found" in res.err


@pytest.mark.e2e
def test_as_a_real_process_no_traceback(tmp_path):
    path = write(tmp_path, mutate("workloads.2.slo_ms", -1))
    res = run_cli("validate", path)
    assert res.code == 2
    assert "workloads[2].slo_ms" in res.err and "Traceback" not in res.err


@pytest.mark.unit
def test_good_policies_validate(igniter):
    res = igniter("validate", ROOT / "policies" / "example.yaml", ROOT / "tests" / "data" / "motivation-3.yaml")
    assert res.code == 0, res.err
    assert res.out.count(": ok") == 2


@pytest.mark.unit
def test_one_bad_file_among_good_ones(igniter, tmp_path):
    bad = write(tmp_path, mutate("workloads.0.slo_ms", 0))
    res = igniter("validate", ROOT / "policies" / "example.yaml", bad)
    assert res.code == 2 and ": ok" in res.out


@pytest.mark.unit
def test_profiles_dir_is_relative_to_the_policy(tmp_path):
    (tmp_path / "profs").mkdir()
    (tmp_path / "profs" / "v100.yaml").write_text((PROFILES / "v100.yaml").read_text())
    policy = load_policy(write(tmp_path, {**GOOD, "profiles_dir": "profs"}))
    assert policy.profiles_dir == (tmp_path / "profs").resolve()


@pytest.mark.unit
def test_profile_errors_name_the_profile_file(igniter, tmp_path):
    (tmp_path / "profs").mkdir()
    broken = yaml.safe_load((PROFILES / "v100.yaml").read_text())
    broken["hardware"]["power_limit_w"] = -3
    (tmp_path / "profs" / "v100.yaml").write_text(yaml.safe_dump(broken))
    res = igniter("validate", write(tmp_path, {**GOOD, "profiles_dir": "profs"}))
    assert res.code == 2
    assert "v100.yaml: hardware.power_limit_w:" in res.err


@pytest.mark.unit
def test_policy_is_frozen():
    policy = load_policy(ROOT / "policies" / "example.yaml")
    with pytest.raises(pydantic.ValidationError):
        policy.workloads[0].slo_ms = 1  # type: ignore[misc]


@pytest.mark.unit
def test_json_schema_is_current():
    """policies/policy.schema.json is generated: regenerate with `python -m autoscaler.config.schema`."""
    from autoscaler.config.schema import render

    assert (ROOT / "policies" / "policy.schema.json").read_text() == render()
    schema = policy_json_schema()
    assert schema["additionalProperties"] is False
    assert set(schema["required"]) == {"instance_types", "workloads"}


@pytest.mark.unit
def test_spot_defaults_change_nothing_without_spot_prices(tmp_path):
    """spot.enabled defaults to true, but only a type with a spot price is ever bought as spot."""
    plain = load_policy(write(tmp_path, GOOD))
    assert plain.scaling.spot.enabled and not plain.buys_spot()
    assert plain.on_demand_floor("a") == 1.0
    priced = mutate("instance_types.0.spot_price_per_hour", 1.1)
    priced["workloads"][1]["min_on_demand_fraction"] = 0.5
    spot = load_policy(write(tmp_path, priced, "spot.yaml"))
    assert spot.buys_spot() and spot.on_demand_floor("a") == 0.3 and spot.on_demand_floor("b") == 0.5
    off = load_policy(write(tmp_path, {**priced, "scaling": {"spot": {"enabled": False}}}, "off.yaml"))
    assert not off.buys_spot() and off.on_demand_floor("b") == 1.0


@pytest.mark.unit
@pytest.mark.parametrize(
    ("value", "fleet", "limit"), [("10%", 20, 2), ("10%", 5, 1), ("10%", 0, 0), (2, 20, 2), ("0%", 9, 0), ("25%", 9, 3)]
)
def test_disruption_budget_resolves_like_karpenter(tmp_path, value, fleet, limit):
    """A percentage of the fleet, rounded up (Karpenter's budgets); a count as it is."""
    policy = load_policy(write(tmp_path, {**GOOD, "scaling": {"disruption_budget": {"max_unavailable": value}}}))
    assert policy.scaling.disruption_budget.limit(fleet) == limit


@pytest.mark.unit
def test_gateway_defaults_follow_the_provider(tmp_path):
    local = load_policy(write(tmp_path, GOOD))
    assert (local.gateway.kind, local.gateway.listen, local.gateway.drain_timeout_s) == (
        "haproxy",
        "127.0.0.1:8000",
        30,
    )
    assert local.rates.source == "gateway"  # the default when a gateway is configured
    ec2 = load_policy(write(tmp_path, {**GOOD, "provider": {"kind": "ec2", "launch_templates": {"*": "lt"}}}, "e.yaml"))
    assert ec2.gateway.kind == "none" and ec2.rates.source == "static"
    off = load_policy(write(tmp_path, {**GOOD, "gateway": {"kind": "none"}}, "n.yaml"))
    assert off.rates.source == "static"
    remote = load_policy(write(tmp_path, {**GOOD, "gateway": {"kind": "haproxy", "hosts": ["10.0.1.5"]}}, "r.yaml"))
    assert remote.gateway.remote and remote.rates.source == "gateway"
