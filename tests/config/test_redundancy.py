"""scaling.redundancy in the policy: defaults, and every bad value exits 2 with one line naming
scaling.redundancy.min_servers (or .spread), nothing written, no traceback."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

from autoscaler.config.policy import load_policy
from tests.config.test_policy import GOOD, write
from tests.conftest import PROFILES
from tests.kit.mig import import_a100, needs_shared

pytestmark = pytest.mark.unit


def test_the_default_is_one_server_per_workload_spread_over_gpus(tmp_path):
    red = load_policy(write(tmp_path, GOOD)).scaling.redundancy
    assert (red.min_servers, red.spread) == (1, "gpu")
    red = load_policy(write(tmp_path, {**GOOD, "scaling": {"redundancy": {"min_servers": 2, "spread": "instance"}}}))
    assert (red.scaling.redundancy.min_servers, red.scaling.redundancy.spread) == (2, "instance")


@pytest.mark.parametrize(
    ("scaling", "field", "words"),
    [
        ({"redundancy": {"min_servers": 3}}, "scaling.redundancy.min_servers", "1 or 2"),
        ({"redundancy": {"min_servers": 0}}, "scaling.redundancy.min_servers", "1 or 2"),
        ({"redundancy": {"min_servers": "2"}}, "scaling.redundancy.min_servers", "1 or 2"),
        ({"redundancy": {"min_servers": True}}, "scaling.redundancy.min_servers", "1 or 2"),
        ({"redundancy": {"spread": "rack"}}, "scaling.redundancy.spread", "'gpu' or 'instance'"),
        ({"redundancy": {"min_server": 2}}, "scaling.redundancy.min_server", "unknown key"),
        ({"redundancy": {"min_servers": 2}, "planner": "ffd"}, "scaling.redundancy.min_servers", "igniter"),
    ],
)
def test_bad_values_exit_2_on_one_line(igniter, tmp_path, scaling, field, words):
    path = write(tmp_path, {**GOOD, "scaling": scaling})
    res = igniter("validate", path)
    assert res.code == 2, res
    lines = res.err.strip().splitlines()
    assert len(lines) == 1 and f"{path}: {field}:" in lines[0] and words in lines[0], res.err
    assert "Traceback" not in res.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["policy.yaml"]


@needs_shared
def test_min_servers_2_with_a_mig_gpu_type_is_planned_and_spread_instance_refused(igniter, tmp_path):
    profiles = tmp_path / "profiles"
    import_a100(profiles)
    shutil.copy(PROFILES / "v100.yaml", profiles / "v100.yaml")
    data = {
        **GOOD,
        "profiles_dir": "profiles",
        "instance_types": [{"name": "a2", "gpu": "a100-80gb", "gpus": 1, "price_per_hour": 5}],
        "workloads": [{"name": "a", "model": "resnet50", "slo_ms": 100, "rate_rps": 500}],
        "scaling": {"redundancy": {"min_servers": 2}},
    }
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(data))
    res = igniter("plan", path, "--json")
    assert res.code == 0, res
    gpus = [
        (k, g["index"]) for k, i in enumerate(json.loads(res.out)["instances"]) for g in i["gpus"] if g["placements"]
    ]
    assert len(gpus) >= 2  # the workload's slices on two GPUs or more
    data["scaling"] = {"redundancy": {"min_servers": 2, "spread": "instance"}}
    data["instance_types"] = [*GOOD["instance_types"], *data["instance_types"]]
    path.write_text(yaml.safe_dump(data))
    res = igniter("plan", path)
    assert res.code == 2, res
    assert res.err.strip().splitlines() == [
        f"error: {path}: scaling.redundancy.spread: instance is not supported with MIG GPU types (a100-80gb): "
        "the MIG planner spreads a workload's slices over GPUs; use spread gpu"
    ]


def test_a_baseline_planner_on_the_command_line_is_refused_too(igniter, tmp_path):
    path = write(tmp_path, {**GOOD, "scaling": {"redundancy": {"min_servers": 2}}})
    trace = tmp_path / "trace.csv"
    trace.write_text("time_s,a,b,c\n0,500,400,200\n60,500,400,200\n")
    for args in (["plan", path, "--planner", "ffd"], ["simulate", path, "--trace", trace, "--planner", "gslice"]):
        res = igniter(*args)
        assert res.code == 2, res
        assert res.err.strip().endswith(
            "scaling.redundancy.min_servers: 2 needs the igniter planner "
            f"(planner {args[-1]!r} does not plan fault domains)"
        )
    assert igniter("plan", path, "--planner", "igniter-lean").code == 0


def test_simulate_compare_leaves_the_baselines_out_with_redundancy(tmp_path):
    from autoscaler.sim.compare import compare_options

    one = load_policy(write(tmp_path, GOOD))
    two = load_policy(write(tmp_path, {**GOOD, "scaling": {"redundancy": {"min_servers": 2}}}))
    assert {o.planner for o in compare_options(one)} >= {"ffd", "gslice", "gpulets"}
    assert {o.planner for o in compare_options(two)} <= {"igniter", None}
