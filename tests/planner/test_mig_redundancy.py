"""scaling.redundancy min_servers 2 on MIG GPUs (planner/mig/spread.py): N+1 slices, no GPU holding
more of a workload than its spare, so every redundant workload is on two GPUs or more and the loss
of any one GPU leaves slices that still cover its rate; checked here from the measured table, not
from the planner's numbers. ParvaGPU's A100 tables are imported from ../shared into tmp."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autoscaler.model.mig import MigModel, load_gpu_model
from autoscaler.planner import Demand, InstanceOption, Plan, check_plan, make_plan
from autoscaler.planner.redundancy import redundancy_faults
from tests.kit.examples import examples
from tests.kit.mig import MODELS, import_a100, needs_shared, scenarios

pytestmark = [pytest.mark.unit, needs_shared]

A100 = InstanceOption("a2-ultragpu-1g", "a100-80gb", 1, 5.07)
P4DE = InstanceOption("p4de.24xlarge", "a100-80gb", 8, 40.97)


@pytest.fixture(scope="module")
def a100(tmp_path_factory: pytest.TempPathFactory) -> MigModel:
    model = load_gpu_model(import_a100(tmp_path_factory.mktemp("profiles")))
    assert isinstance(model, MigModel)
    return model


def redundant(demands: list[Demand]) -> list[Demand]:
    return [replace(d, min_servers=2) for d in demands]


def per_gpu(plan: Plan, model: MigModel) -> dict[str, dict[tuple[int, int], float]]:
    """Per workload, the throughput the measured table gives its slices on each (instance, GPU)."""
    out: dict[str, dict[tuple[int, int], float]] = defaultdict(lambda: defaultdict(float))
    for i, inst in enumerate(plan.instances):
        for g in inst.gpus:
            for p in g.placements:
                row = model.row(p.model, p.mig_profile or "", p.batch, p.processes)
                assert row is not None, p
                out[p.workload][(i, g.index)] += row.slice_throughput_rps
    return out


def assert_survives_any_gpu(plan: Plan, demands: list[Demand], model: MigModel) -> None:
    """Every placed redundant workload: on two GPUs or more, and without any one GPU's slices the
    rest still serve its rate."""
    loads, gone = per_gpu(plan, model), {u.workload for u in plan.unplaced}
    for d in demands:
        if d.rate_rps <= 0 or d.workload in gone:
            continue
        mine = loads[d.workload]
        assert len(mine) >= 2, (d.workload, dict(mine))
        assert sum(mine.values()) - max(mine.values()) >= d.rate_rps * (1 - 1e-9), (d.workload, dict(mine))


workloads = st.lists(
    st.tuples(st.sampled_from(MODELS), st.floats(5, 3000), st.floats(20, 400)), min_size=1, max_size=10
)


@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=workloads, both=st.booleans())
@pytest.mark.property
def test_every_redundant_workload_survives_the_loss_of_any_gpu(
    a100: MigModel, spec: list[tuple[str, float, float]], both: bool
) -> None:
    options = [A100, P4DE] if both else [A100]
    demands = redundant([Demand(f"w{k}", m, slo, rate) for k, (m, rate, slo) in enumerate(spec)])
    plan = make_plan(demands, options, {"a100-80gb": a100})
    assert check_plan(plan, demands, {"a100-80gb": a100}, options) == []
    assert_survives_any_gpu(plan, demands, a100)
    assert redundancy_faults(plan, demands) == [] and "redundancy" not in plan.stats
    plain = make_plan([replace(d, min_servers=1) for d in demands], options, {"a100-80gb": a100})
    assert plan.cost_per_hour >= plain.cost_per_hour  # the extra slices are paid for
    if not plan.unplaced:
        again = make_plan(demands, options, {"a100-80gb": a100}, current=plan)
        assert again.moved == 0 and redundancy_faults(again, demands) == []


@pytest.mark.parametrize("index", range(6))
def test_the_parvagpu_scenarios_with_redundancy_cost_the_extra_slices_and_stay_within_a_gpu(
    a100: MigModel, index: int
) -> None:
    """Each scenario's N+1 plan: every workload survives any GPU's loss; its cost is higher than the
    plain plan's and within one GPU of the N+1 slice sets' compute / 7 (measured: 4, 6, 8, 11, 18,
    22 GPUs against bounds of 3, 6, 8, 11, 17, 21, and 2, 3, 5, 7, 12, 15 without redundancy)."""
    _, sc = scenarios()[index]
    plain = [Demand(f"w{k}", m, slo, rate) for k, (m, (rate, slo)) in enumerate(sorted(sc.items()))]
    demands = redundant(plain)
    one, two = make_plan(plain, [A100], {"a100-80gb": a100}), make_plan(demands, [A100], {"a100-80gb": a100})
    assert not two.unplaced and check_plan(two, demands, {"a100-80gb": a100}, [A100]) == []
    assert_survives_any_gpu(two, demands, a100)
    assert two.cost_per_hour > one.cost_per_hour
    slices = sum(int((p.mig_profile or "0")[0]) for i in two.instances for g in i.gpus for p in g.placements)
    assert two.gpu_count <= -(-slices // 7) + 1


def test_a_workload_on_one_slice_gets_two_on_two_gpus_each_sized_for_the_whole_rate(a100: MigModel) -> None:
    d = Demand("r", "resnet50", 200.0, 50.0)
    one = make_plan([d], [A100], {"a100-80gb": a100})
    two = make_plan(redundant([d]), [A100], {"a100-80gb": a100})
    (single,) = [p for i in one.instances for g in i.gpus for p in g.placements]
    pair = [(k, p) for k, i in enumerate(two.instances) for g in i.gpus for p in g.placements]
    assert len(pair) == 2 and len({k for k, _ in pair}) == 2
    for _, p in pair:
        assert p.predicted_throughput_rps >= 50.0 and p.rate_rps == pytest.approx(25.0)
    assert (one.cost_per_hour, two.cost_per_hour) == (5.07, 10.14)
    assert single.rate_rps == pytest.approx(50.0)


def test_an_eight_gpu_instance_spreads_the_slices_over_its_gpus_at_no_extra_instance(a100: MigModel) -> None:
    demands = redundant([Demand("r", "resnet50", 200.0, 50.0), Demand("m", "mobilenetv2", 150.0, 50.0)])
    plan = make_plan(demands, [P4DE], {"a100-80gb": a100})
    assert len(plan.instances) == 1 and plan.cost_per_hour == 40.97
    assert_survives_any_gpu(plan, demands, a100)


def test_a_single_gpu_fleet_keeps_the_slices_apart_on_its_one_gpu_and_says_so(a100: MigModel) -> None:
    """max_instances 1 of a one-GPU type: no second GPU to spread over. Both slices of each workload
    are still cut (MIG isolates them: a server's crash costs one slice), on the one GPU, and the
    plan's stats name every workload a GPU's loss would take down."""
    capped = replace(A100, max_instances=1)
    demands = redundant([Demand("r", "resnet50", 200.0, 50.0), Demand("m", "mobilenetv2", 150.0, 50.0)])
    plan = make_plan(demands, [capped], {"a100-80gb": a100})
    assert not plan.unplaced and plan.gpu_count == 1
    (gpu,) = [g for i in plan.instances for g in i.gpus]
    assert sorted(p.workload for p in gpu.placements) == ["m", "m", "r", "r"]
    assert plan.stats["redundancy"] == ["r: 2 server(s) in 1 gpu(s), 2 needed", "m: 2 server(s) in 1 gpu(s), 2 needed"]


def test_a_single_slice_plan_is_not_kept_once_redundancy_is_on(a100: MigModel) -> None:
    d = Demand("r", "resnet50", 200.0, 50.0)
    single = make_plan([d], [A100], {"a100-80gb": a100})
    plan = make_plan(redundant([d]), [A100], {"a100-80gb": a100}, current=single)
    assert redundancy_faults(single, redundant([d])) and redundancy_faults(plan, redundant([d])) == []
    assert_survives_any_gpu(plan, redundant([d]), a100)


def test_spread_instance_on_mig_is_refused(a100: MigModel) -> None:
    d = Demand("r", "resnet50", 200.0, 50.0, min_servers=2, spread="instance")
    with pytest.raises(ValueError, match="spread instance is not supported with MIG"):
        make_plan([d], [A100], {"a100-80gb": a100})


@pytest.mark.parametrize("rise", [1.2, 1.5, 2.0])
def test_a_rising_rate_keeps_every_slice_and_adds_what_n_plus_one_needs(a100: MigModel, rise: float) -> None:
    """Kept slices that are no longer N+1 at the new rate stay; slices are added until the rate is
    covered without the worst GPU (before, all of a workload's slices were re-planned: in a replay of
    a100-mig.yaml 12 launches and 10 terminations against 1 launch without redundancy)."""
    demands = redundant([Demand("r", "resnet50", 200.0, 600.0), Demand("m", "mobilenetv2", 150.0, 900.0)])
    now = make_plan(demands, [A100], {"a100-80gb": a100})
    more = [replace(d, rate_rps=d.rate_rps * rise) for d in demands]
    plan = make_plan(more, [A100], {"a100-80gb": a100}, current=now)

    def slots(p: Plan) -> set[tuple[int, str, str | None, int | None]]:
        return {
            (k, x.workload, x.mig_profile, x.mig_start) for k, i in enumerate(p.instances) for x in i.gpus[0].placements
        }

    assert slots(now) <= slots(plan) and "stability" not in plan.stats
    assert_survives_any_gpu(plan, more, a100)
    assert check_plan(plan, more, {"a100-80gb": a100}, [A100]) == []
