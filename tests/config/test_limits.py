"""Inputs that passed validation and then crashed the planner: each is now refused, naming the field
(or the line), with exit 2 and nothing changed; and a property test that whatever `validate`
accepts, `plan` answers without raising."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from tests.config.test_policy import GOOD, mutate, write
from tests.conftest import PROFILES, Result, run_cli

INF, NAN = float("inf"), float("nan")

# The crashes the issue reports (OverflowError, ValueError, an `inf $/hour` plan), and their kin.
CASES = [
    ("rate 1e300", mutate("workloads.0.rate_rps", 1e300), "workloads[0].rate_rps", "ceiling"),
    ("rate .inf", mutate("workloads.0.rate_rps", INF), "workloads[0].rate_rps", "finite"),
    ("rate .nan", mutate("workloads.1.rate_rps", NAN), "workloads[1].rate_rps", "finite"),
    ("slo .inf", mutate("workloads.2.slo_ms", INF), "workloads[2].slo_ms", "finite"),
    ("slo ten hours", mutate("workloads.2.slo_ms", 36e6), "workloads[2].slo_ms", "ceiling"),
    ("min rate .inf", mutate("workloads.0.min_rate_rps", INF), "workloads[0].min_rate_rps", "finite"),
    ("price .inf", mutate("instance_types.0.price_per_hour", INF), "instance_types[0].price_per_hour", "finite"),
    ("price 1e6", mutate("instance_types.0.price_per_hour", 1e6), "instance_types[0].price_per_hour", "ceiling"),
    ("max cost .inf", {**GOOD, "scaling": {"max_cost_per_hour": INF}}, "scaling.max_cost_per_hour", "finite"),
    ("interval .inf", {**GOOD, "scaling": {"interval_s": INF}}, "scaling.interval_s", "finite"),
    ("interval 1e300", {**GOOD, "scaling": {"interval_s": 1e300}}, "scaling.interval_s", "ceiling"),
    ("headroom .nan", {**GOOD, "scaling": {"headroom": NAN}}, "scaling.headroom", "finite"),
    ("timeout .inf", {**GOOD, "agents": {"command_timeout_s": INF}}, "agents.command_timeout_s", "finite"),
]


@pytest.mark.unit
@pytest.mark.parametrize(("label", "data", "field", "word"), CASES, ids=[c[0] for c in CASES])
def test_out_of_range_numbers_exit_2_naming_the_field(igniter, tmp_path, label, data, field, word) -> None:
    path = write(tmp_path, data)
    for command in ("validate", "plan"):
        res = igniter(command, path)
        assert res.code == 2, (command, res)
        assert f"{path}: {field}:" in res.err and word in res.err, res.err
        assert "Traceback" not in res.err and res.out == ""


@pytest.mark.unit
def test_the_yaml_spellings_of_infinity_are_refused(igniter, tmp_path) -> None:
    """`.inf`, `-.Inf`, `.NaN` are YAML 1.1 floats (not strings), and `1e300` a float too (YAML 1.2, as every user means it)."""
    text = yaml.safe_dump(GOOD).replace("rate_rps: 500", "rate_rps: .inf").replace("slo_ms: 60", "slo_ms: .NaN")
    res = igniter("plan", write(tmp_path, text))
    assert res.code == 2 and "workloads[0].rate_rps: must be a finite number" in res.err
    res = igniter("plan", write(tmp_path, yaml.safe_dump(GOOD).replace("rate_rps: 500", "rate_rps: 1e300")))
    assert res.code == 2 and "workloads[0].rate_rps: 1e+300 is above the ceiling 10,000,000.0" in res.err


@pytest.mark.unit
@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("fleet: a\n{good}fleet: b\n", "fleet"),  # the key that decides which instances are ours
        ("{good}workloads: []\n", "workloads"),
        ("instance_types:\n  - {{name: p3.2xlarge, gpu: v100, name: p3.8xlarge, price_per_hour: 3}}\n", "name"),
        ("scaling:\n  interval_s: 5\n  headroom: 0\n  interval_s: 60\n{good}", "interval_s"),
    ],
    ids=["fleet", "top-level", "flow mapping", "nested"],
)
def test_duplicate_yaml_keys_are_errors_naming_the_line(igniter, tmp_path, text, key) -> None:
    good = yaml.safe_dump({k: GOOD[k] for k in ("instance_types", "workloads")}, default_flow_style=None)
    text = text.format(good=good)
    lines = [n for n, line in enumerate(text.splitlines(), 1) for _ in re.findall(rf"(?:^|[{{ ]){key}:", line)]
    path = write(tmp_path, text)
    res = igniter("validate", path)
    assert res.code == 2, res
    assert f"{path}: line {lines[1]}: duplicate key {key!r} (first on line {lines[0]})" in res.err, res.err


@pytest.mark.unit
def test_a_profile_with_a_duplicate_key_or_infinity_is_refused(igniter, tmp_path) -> None:
    original = (PROFILES / "v100.yaml").read_text()
    assert "  power_limit_w: 300\n" in original
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    policy = write(tmp_path, {**GOOD, "profiles_dir": "profiles"})
    (profiles / "v100.yaml").write_text(original.replace("  power_limit_w: 300\n", "  power_limit_w: .inf\n"))
    res = igniter("plan", policy)
    assert res.code == 2 and f"{profiles / 'v100.yaml'}: hardware.power_limit_w: must be a finite" in res.err
    (profiles / "v100.yaml").write_text(original.replace("gpu: ", "gpu: x\ngpu: ", 1))
    res = igniter("plan", policy)
    assert res.code == 2 and "duplicate key 'gpu'" in res.err and "line " in res.err, res.err


@pytest.mark.unit
def test_a_plan_above_10000_instances_is_refused_at_once(igniter, tmp_path) -> None:
    """Two workloads at 9 million req/s each: a lower bound says 11,723 instances, in milliseconds
    (planning them would take a minute); max_cost_per_hour or max_instances lifts the limit."""
    big = {
        **GOOD,
        "workloads": [
            {"name": "a", "model": "resnet50", "slo_ms": 40, "rate_rps": 9e6},
            {"name": "b", "model": "resnet50", "slo_ms": 40, "rate_rps": 8e6},
        ],
    }
    path = write(tmp_path, big)
    for command in ("validate", "plan"):
        res = igniter(command, path)
        assert res.code == 2, res
        assert f"{path}: workloads[0].rate_rps: the plan needs at least " in res.err
        assert "more than the limit of 10,000" in res.err and "scaling.max_cost_per_hour" in res.err
    small = write(tmp_path, {**big, "scaling": {"max_instances": 100}}, "small.yaml")
    assert igniter("validate", small).code == 2
    one = {**GOOD, "workloads": [{"name": "a", "model": "resnet50", "slo_ms": 40, "rate_rps": 150_000}]}
    capped = write(tmp_path, {**one, "scaling": {"max_instances": 50}}, "capped.yaml")
    res = igniter("plan", capped)
    assert res.code == 2 and "more than the limit of 50" in res.err
    assert igniter("validate", write(tmp_path, {**big, "scaling": {"max_cost_per_hour": 500}}, "c.yaml")).code == 0


TWO_SIZES = [
    {"name": "small", "gpu": "t4-synthetic", "gpus": 3, "price_per_hour": 1.0},
    {"name": "big", "gpu": "v100", "gpus": 6, "price_per_hour": 2.0, "max_instances": 19},
]


@pytest.mark.unit
def test_the_bound_fills_a_capped_type_before_the_uncapped_one(igniter, tmp_path) -> None:
    """Two ssd workloads at the rate ceiling: 58,188 GPUs at least. Over the 6-GPU type the bound
    said 9,698 instances, under the limit, so the plan was made in full (33,000 instances, seconds:
    the plan property test drew it) to be refused then; the 6-GPU type is capped at 19, so at least
    19 + 19,358 three-GPU instances: both commands refuse it at once, alike."""
    loads = [{"name": n, "model": "ssd", "slo_ms": 100_000, "rate_rps": 1e7} for n in ("a", "b")]
    path = write(tmp_path, {**GOOD, "instance_types": TWO_SIZES, "workloads": loads})
    for command in ("validate", "plan"):
        res = igniter(command, path)
        assert res.code == 2, res
        assert (
            f"{path}: workloads[0].rate_rps: the plan needs at least 19,377 instances, more than the limit of 10,000"
            in res.err
        )


@pytest.mark.unit
def test_a_workload_only_a_capped_type_serves_is_left_unplaced_not_refused(igniter, tmp_path) -> None:
    """At a 20 ms SLO only the V100 serves ssd: the plan fills the 19 capped instances and leaves the
    rest unplaced (exit 3); the uncapped 3-GPU type does not count towards the bound for it."""
    loads = [{"name": "a", "model": "ssd", "slo_ms": 20, "rate_rps": 9.2e6}]
    path = write(tmp_path, {**GOOD, "instance_types": TWO_SIZES, "workloads": loads})
    assert igniter("validate", path).code == 0
    res = igniter("plan", path, "--json")
    assert res.code == 3, res
    plan = json.loads(res.out)
    assert [u["workload"] for u in plan["unplaced"]] == ["a"]
    assert len(plan["instances"]) == 19 and {i["instance_type"] for i in plan["instances"]} == {"big"}


@pytest.mark.e2e
def test_predict_batch_file_refuses_duplicate_keys_nan_and_deep_nesting(tmp_path) -> None:
    profile = PROFILES / "v100.yaml"
    good = '{"placements": [{"model": "resnet50", "batch": 4, "mps_percent": 50}]}\n'
    cases = {
        '{"placements": [{"model": "resnet50", "batch": 4, "mps_percent": 50, "batch": 8}]}': "duplicate key 'batch'",
        '{"placements": [{"model": "resnet50", "batch": 4, "mps_percent": NaN}]}': "NaN is not JSON",
        '{"placements": [{"model": "resnet50", "batch": 4, "mps_percent": 1e999}]}': "must be a finite number",
        "[" * 100_000: "nested too deeply",
    }
    for bad, message in cases.items():
        path = tmp_path / "batch.jsonl"
        path.write_text(good + bad + "\n")
        res = run_cli("predict", "--profile", profile, "--batch-file", path)
        assert res.code == 2, res
        assert f"{path}: line 2" in res.err and message in res.err, res.err
        assert res.out == "" and "Traceback" not in res.err  # nothing answered: line 1 was not printed


@pytest.mark.e2e
def test_simulate_refuses_a_trace_row_of_1e300(tmp_path) -> None:
    policy = write(tmp_path, GOOD)
    trace = tmp_path / "trace.csv"
    trace.write_text("time_s,a,b,c\n0,500,400,200\n60,1e300,400,200\n120,500,400,200\n")
    res: Result = run_cli("simulate", policy, "--trace", trace, "--json")
    assert res.code == 2, res
    assert f"{trace}: line 3, column 'a': 1e+300 is above the ceiling" in res.err and "Traceback" not in res.err
    assert res.out == ""


@pytest.mark.e2e
def test_a_bad_policy_leaves_no_state_and_launches_nothing(tmp_path: Path) -> None:
    path = write(tmp_path, mutate("workloads.0.rate_rps", INF))
    state = tmp_path / "state" / "s.sqlite"
    res = run_cli("run", path, "--once", "--state", state)
    assert res.code == 2 and "workloads[0].rate_rps" in res.err
    assert not state.parent.exists()
