"""MIG types beside MPS types in one policy, and re-planning against the current MIG plan."""

from __future__ import annotations

import pytest

from autoscaler.config.policy import load_policy
from autoscaler.model.mig import MigModel, load_gpu_model
from autoscaler.planner import Demand, InstanceOption, check_plan, make_plan, planning_inputs
from tests.conftest import PROFILES
from tests.kit.mig import import_a100, needs_shared

pytestmark = [pytest.mark.unit, needs_shared]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return {
        "a100-80gb": load_gpu_model(import_a100(tmp_path_factory.mktemp("profiles"))),
        "v100": load_gpu_model(PROFILES / "v100.yaml"),
    }


MIX = [
    Demand("r50", "resnet50", 60.0, 900.0),
    Demand("vgg", "vgg19", 120.0, 300.0),
]


def _on(plan):
    return {(g.gpu, p.workload) for i in plan.instances for g in i.gpus for p in g.placements}


@pytest.mark.parametrize(("a100_price", "v100_price", "winner"), [(4.0, 3.06, "a100-80gb"), (40.0, 0.9, "v100")])
def test_a_mixed_policy_picks_the_cheaper_gpu_kind(models, a100_price, v100_price, winner):
    a100 = InstanceOption("a100-1", "a100-80gb", 1, a100_price)
    v100 = InstanceOption("p3.2xlarge", "v100", 1, v100_price)
    both = make_plan(MIX, [a100, v100], models)
    only_a100 = make_plan(MIX, [a100], models)
    only_v100 = make_plan(MIX, [v100], {"v100": models["v100"]})
    assert not both.unplaced and not only_a100.unplaced and not only_v100.unplaced
    assert both.cost_per_hour == pytest.approx(min(only_a100.cost_per_hour, only_v100.cost_per_hour))
    assert {gpu for gpu, _ in _on(both)} == {winner}
    assert check_plan(both, MIX, models, [a100, v100]) == []


def test_models_only_one_kind_knows_go_there(models):
    a100 = InstanceOption("a100-1", "a100-80gb", 1, 4.0)
    v100 = InstanceOption("p3.2xlarge", "v100", 1, 3.06)
    demands = [Demand("b", "bert", 400.0, 50.0), Demand("a", "alexnet", 20.0, 300.0)]
    plan = make_plan(demands, [a100, v100], models)
    assert not plan.unplaced
    assert _on(plan) == {("a100-80gb", "b"), ("v100", "a")}
    assert check_plan(plan, demands, models, [a100, v100]) == []


def _slices(plan, workload):
    return {
        (k, g.index, p.mig_profile, p.mig_start, p.batch, p.processes)
        for k, i in enumerate(plan.instances)
        for g in i.gpus
        for p in g.placements
        if p.workload == workload
    }


def test_a_replan_at_a_slightly_changed_rate_keeps_the_slices_that_still_serve(models):
    a100 = InstanceOption("a100-1", "a100-80gb", 1, 4.0)
    mig = {"a100-80gb": models["a100-80gb"]}
    demands = [
        Demand("a", "resnet50", 200.0, 2500.0),
        Demand("b", "mobilenetv2", 150.0, 3000.0),
        Demand("c", "vgg16", 300.0, 700.0),
        Demand("d", "densenet121", 200.0, 900.0),
    ]
    first = make_plan(demands, [a100], mig)
    changed = [Demand(d.workload, d.model, d.slo_ms, d.rate_rps * f) for d, f in zip(demands, (1.1, 0.97, 1, 1))]
    fresh = make_plan(changed, [a100], mig)
    assert any(_slices(first, w) != _slices(fresh, w) for w in "cd")  # planned afresh, c or d would move
    again = make_plan(changed, [a100], mig, current=first)
    assert check_plan(again, changed, mig, [a100]) == []
    assert all(_slices(first, w) == _slices(again, w) for w in "cd")  # rate unchanged: every slice stays
    assert _slices(first, "a") <= _slices(again, "a")  # rate up: all stay, more are added
    assert _slices(again, "b") <= _slices(first, "b")  # rate down: what stays stays where it was
    assert again.moved == len(_slices(again, "a") - _slices(first, "a"))
    assert again.cost_per_hour <= fresh.cost_per_hour * 1.03 + 1e-9


def test_a_policy_plans_on_an_imported_profile_and_the_margin_setting(tmp_path, igniter):
    import_a100(tmp_path / "profiles")
    path = tmp_path / "p.yaml"
    path.write_text(
        "profiles_dir: profiles\n"
        "instance_types:\n- {name: a2-ultragpu-1g, gpu: a100-80gb, gpus: 1, price_per_hour: 5.07}\n"
        "- {name: p3.2xlarge, gpu: v100, gpus: 1, price_per_hour: 3.06}\n"
        "workloads:\n- {name: r, model: bert, slo_ms: 400, rate_rps: 200}\n"
        "- {name: a, model: alexnet, slo_ms: 20, rate_rps: 100}\n"
        "scaling: {mig_latency_margin: 0.2}\n"
    )
    (tmp_path / "profiles" / "v100.yaml").write_text((PROFILES / "v100.yaml").read_text())
    *_, models = planning_inputs(load_policy(path))
    assert isinstance(models["a100-80gb"], MigModel) and models["a100-80gb"].margin == 0.2
    res = igniter("plan", path, "--json")
    assert res.code == 0, res.err
    import json

    plan = json.loads(res.out)
    mig = [p for i in plan["instances"] for g in i["gpus"] for p in g["placements"] if "mig_profile" in p]
    assert mig and all(p["predicted_latency_ms"] <= 0.8 * 200 for p in mig)
    assert set(mig[0]) >= {"mig_profile", "mig_start", "processes", "batch", "predicted_latency_ms"}
    res = igniter("plan", path, "--compare")
    assert res.code == 0 and "yes" in res.out


def test_an_unplaced_mig_workload_exits_3(tmp_path, igniter):
    import_a100(tmp_path / "profiles")
    path = tmp_path / "p.yaml"
    path.write_text(
        "profiles_dir: profiles\n"
        "instance_types:\n- {name: a100-1, gpu: a100-80gb, gpus: 1, price_per_hour: 5}\n"
        "workloads:\n- {name: b, model: bert, slo_ms: 4, rate_rps: 10}\n"
    )
    res = igniter("plan", path)
    assert res.code == 3 and "below the fastest measured latency" in res.out
