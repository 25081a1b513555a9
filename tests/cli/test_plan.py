"""`igniter plan`: table, JSON contract, --compare, and the exit codes."""

from __future__ import annotations

import json

import pytest

from autoscaler.cli.plan import plan_json
from autoscaler.config.policy import load_policy
from autoscaler.planner import Demand, GpuOut, InstanceOut, PlacementOut, Plan, make_plan, planning_inputs
from tests.conftest import ROOT, run_cli
from tests.planner.conftest import SCENARIOS

EXAMPLE = ROOT / "policies" / "example.yaml"


def _policy(tmp_path, workloads: str) -> str:
    path = tmp_path / "p.yaml"
    path.write_text(
        f"instance_types:\n- {{name: p3.2xlarge, gpu: v100, gpus: 1, price_per_hour: 3.06}}\nworkloads:\n{workloads}"
    )
    return str(path)


@pytest.mark.unit
def test_table_by_default_with_cost_and_latency_budget(igniter):
    res = igniter("plan", EXAMPLE)
    assert res.code == 0, res.err
    for word in ("workload", "batch", "MPS %", "budget ms", "$/hour", "alexnet-a"):
        assert word in res.out


@pytest.mark.unit
def test_a_plan_of_thousands_of_alike_instances_prints_each_run_once(igniter, tmp_path):
    """ssd at the rate ceiling: 7,273 identical four-GPU instances and the remainder's. Rich took
    half a minute for the 29,095 rows; the run prints as one (first-last, count), the total stays."""
    path = tmp_path / "p.yaml"
    path.write_text(
        "instance_types:\n- {name: t, gpu: v100, gpus: 4, price_per_hour: 0.08}\n"
        "workloads:\n- {name: w0, model: ssd, rate_rps: 10000000, slo_ms: 100000}\n"
    )
    res = igniter("plan", path)
    assert res.code == 0, res.err
    rows = [line for line in res.out.splitlines() if line.startswith("│")]
    firsts = [row.split("│")[1].strip() for row in rows if row.split("│")[1].strip()]
    assert firsts == ["0-7272 t x7273", "7273 t"] and len(rows) == 4 + 3
    assert "581.92 $/hour: 7274 instances, 29096 GPUs" in res.out
    example = igniter("plan", ROOT / "policies" / "azure-sim.yaml")  # 8 alike instances, few rows: each printed
    assert example.code == 0 and " x" not in "".join(
        line.split("│")[1] for line in example.out.splitlines() if line.startswith("│")
    )


@pytest.mark.unit
def test_the_plan_json_encodes_alike_instances_once_and_prints_the_same_bytes():
    """plan_json against json.dumps(plan.to_json(), indent=2): plans of the scenarios (alike and
    distinct instances, unplaced workloads), a MIG placement's extra fields, an empty plan."""
    plans = []
    for name in ("twelve-workloads.yaml", "motivation-3.yaml", "random-50.yaml"):
        demands, options, models = planning_inputs(load_policy(SCENARIOS / name))
        extra = [Demand("fast", "ssd", 0.5, 10.0), Demand("big", "resnet50", 40.0, 20_000.0)]
        plans.append(make_plan([*demands, *extra], options, models))
    mig = PlacementOut("m", "resnet50", 8, 42.857, 10.0, 5.0, 20.0, mig_profile="3g.40gb", mig_start=4, processes=2)
    gpu = GpuOut(0, "a100", (mig,))
    plans += [Plan("mig", (InstanceOut("p4de", 40.97, (gpu, gpu)),) * 3), Plan("empty", ())]
    assert any(len(set(p.instances)) < len(p.instances) for p in plans[:3])  # alike instances drawn
    for plan in plans:
        assert plan_json(plan) == json.dumps(plan.to_json(), indent=2)


@pytest.mark.unit
def test_json_follows_the_contract(igniter):
    res = igniter("plan", SCENARIOS / "motivation-3.yaml", "--json", "--planner", "igniter-plain")
    assert res.code == 0, res.err
    plan = json.loads(res.out)
    assert set(plan) >= {"planner", "cost_per_hour", "instances", "unplaced"}
    assert plan["cost_per_hour"] == pytest.approx(3.06)
    (inst,) = plan["instances"]
    assert set(inst) == {"instance_type", "capacity_type", "price_per_hour", "gpus"}  # capacity_type: issue 19
    assert inst["capacity_type"] == "on-demand"
    got = {p["workload"]: (p["batch"], p["mps_percent"]) for p in inst["gpus"][0]["placements"]}
    assert got == {"alexnet-a": (4, 10.0), "resnet50-a": (8, 30.0), "vgg19-a": (6, 37.5)}
    keys = {"workload", "model", "batch", "mps_percent", "rate_rps", "predicted_latency_ms", "predicted_throughput_rps"}
    assert all(set(p) == keys for p in inst["gpus"][0]["placements"])


@pytest.mark.unit
def test_impossible_slo_exits_3_with_an_unplaced_entry(igniter, tmp_path):
    path = _policy(
        tmp_path,
        "- {name: x, model: resnet50, slo_ms: 0.5, rate_rps: 100}\n"
        "- {name: y, model: alexnet, slo_ms: 15, rate_rps: 500}\n",
    )
    res = igniter("plan", path, "--json")
    assert res.code == 3
    plan = json.loads(res.out)
    assert [u["workload"] for u in plan["unplaced"]] == ["x"]
    assert "fastest possible latency" in plan["unplaced"][0]["reason"]
    table = igniter("plan", path)
    assert table.code == 3 and "unplaced" in table.out


@pytest.mark.unit
def test_compare_rechecks_every_planner(igniter):
    res = igniter("plan", SCENARIOS / "twelve-workloads.yaml", "--compare", "--json")
    assert res.code == 0, res.err
    rows = {r["planner"]: r for r in json.loads(res.out)}
    assert set(rows) == {"igniter-plain", "igniter", "ffd", "gslice", "gpulets", "exact"}
    assert rows["igniter"]["feasible"] and rows["exact"]["feasible"]
    assert not rows["ffd"]["feasible"]  # interference ignored: the model's re-check says so
    assert rows["exact"]["cost_per_hour"] <= rows["igniter"]["cost_per_hour"]
    text = igniter("plan", SCENARIOS / "twelve-workloads.yaml", "--compare")
    assert text.code == 0 and "feasible" in text.out and "gpulets" in text.out


@pytest.mark.e2e
def test_bad_policy_exits_2_naming_the_field(tmp_path):
    path = _policy(tmp_path, "- {name: x, model: resnet50, slo_ms: -1, rate_rps: 100}\n")
    res = run_cli("plan", path)
    assert res.code == 2 and "workloads[0].slo_ms" in res.err and "Traceback" not in res.err
