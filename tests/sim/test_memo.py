"""What the replay remembers gives what it would compute afresh: shared plans (sim/memo.py), the
planner's fresh plans and sizes, solo predictions, the in-memory store's records, and the
progress a replay reports."""

from __future__ import annotations

import io
import os

import numpy as np
import pytest

from autoscaler.config.policy import BUNDLED_PROFILES as PROFILES
from autoscaler.core.fleet.lifecycle import Change, Reason, Record, State
from autoscaler.loop.state.store import Store
from autoscaler.model.mig import load_gpu_model
from autoscaler.planner import api, planning_inputs
from autoscaler.planner.tasks import size_on
from autoscaler.sim.engine import SimOptions, default_plan_fn, simulate, with_overrides
from autoscaler.sim.memo import MemoPlanner, PlanMemo
from autoscaler.sim.parallel import Run, longest_first
from autoscaler.sim.traces import Trace
from autoscaler.sim.watch import Bars, Lines, watcher_for

pytestmark = pytest.mark.unit


def test_a_shared_plan_equals_a_fresh_one_across_forecasts_and_headrooms(make_policy):
    """Two runs of a compare differ in forecast and headroom only: the second asks the first's
    question and gets its plan, which is the plan the planner makes afresh."""
    policy = make_policy()
    memo = PlanMemo()
    a = with_overrides(policy, SimOptions(forecast="ewma", headroom=0.2))
    b = with_overrides(policy, SimOptions(forecast="holt", headroom=0.5))
    fn = default_plan_fn(policy)
    first = MemoPlanner(fn, a, memo)(a, {"a": 700.0}, {}, {}, None)
    second = MemoPlanner(fn, b, memo)
    plan = second(b, {"a": 700.0}, {}, {}, None)
    assert plan is first and second.hits == 1
    assert plan == fn(b, {"a": 700.0}, {}, {}, None)
    assert plan.to_json() == fn(b, {"a": 700.0}, {}, {}, None).to_json()


def test_what_a_plan_depends_on_keeps_plans_apart(make_policy):
    """Another planner, another instance type, another plan function: never the same plan."""
    policy = make_policy()
    memo = PlanMemo()
    fn = default_plan_fn(policy)
    MemoPlanner(fn, policy, memo)(policy, {"a": 700.0}, {}, {}, None)
    ffd = with_overrides(policy, SimOptions(planner="ffd"))
    dear = make_policy(
        instance_types=[{"name": "g4dn.xlarge", "gpu": "t4-synthetic", "gpus": 1, "price_per_hour": 0.9}]
    )
    for other, f in ((ffd, fn), (dear, fn), (policy, lambda *a: fn(*a))):
        m = MemoPlanner(f, other, memo)
        plan = m(other, {"a": 700.0}, {}, {}, None)
        assert m.misses == 1 and plan == fn(other, {"a": 700.0}, {}, {}, None)


def test_memo_forgets_the_oldest_beyond_its_size(make_policy):
    policy = make_policy()
    memo = PlanMemo(size=2)
    planner = MemoPlanner(default_plan_fn(policy), policy, memo)
    for rate in (100.0, 200.0, 300.0):
        planner(policy, {"a": rate}, {}, {}, None)
    assert len(memo.plans) == 2
    planner(policy, {"a": 100.0}, {}, {}, None)
    assert planner.misses == 4


def test_memo_keeps_few_plans_of_large_fleets(make_policy):
    """Bounded by the workloads in its questions too (planner/kept.py): two-workload questions
    under a weight of 5 keep two plans, whatever the count allows."""
    policy = make_policy()
    memo = PlanMemo(size=100, weight=5)
    planner = MemoPlanner(default_plan_fn(policy), policy, memo)
    for rate in (100.0, 200.0, 300.0):
        planner(policy, {"a": rate, "b": rate}, {}, {}, None)
    assert len(memo.plans) == 2 and memo.plans.total() == 4
    planner(policy, {"a": 300.0, "b": 300.0}, {}, {}, None)
    assert planner.hits == 1


def test_the_remembered_fresh_plan_is_the_plan_made_afresh(make_policy):
    policy = make_policy(workloads=[{"name": "a", "model": "resnet50", "slo_ms": 40, "rate_rps": 2600}])
    demands, options, models = planning_inputs(policy)
    api._fresh_plans.clear()
    first = api.igniter(demands, options, models)
    assert api.igniter(demands, options, models) is first  # remembered
    made = api._igniter(demands, options, models, None, api.Config(), "igniter")
    assert first == made and first.to_json() == made.to_json() and first.moved == 0


def test_remembered_sizes_and_solo_predictions_are_the_computed_ones(make_policy):
    policy = make_policy()
    demands, _, models = planning_inputs(policy)
    model = next(iter(models.values()))
    d = demands[0]
    assert size_on(model, "t4-synthetic", d, 650.0) == size_on.__wrapped__(model, "t4-synthetic", d, 650.0)
    for batch, share in ((1, 100.0), (8, 35.0), (32, 60.0)):
        assert model.solo("resnet50", batch, share) == model.predict_raw([("resnet50", batch, share)])[0]
        assert model.solo("resnet50", batch, share) == model.solo("resnet50", batch, share)


def test_an_in_memory_store_never_answers_stale_records():
    store = Store(":memory:")
    assert store.open_records() == []
    rec = Record(slot="s-1", attempt=1, instance_type="t", state=State.REQUESTED, created_at=0.0, updated_at=0.0)
    store.apply([Change(rec, State.REQUESTED, Reason.REQUEST)])
    assert [r.state for r in store.open_records()] == [State.REQUESTED]
    ready = Record(slot="s-1", attempt=1, instance_type="t", state=State.READY, created_at=0.0, updated_at=1.0)
    store.apply([Change(ready, State.REQUESTED, Reason.BOOTED)])
    assert [r.state for r in store.open_records()] == [State.READY]
    store.open_records().clear()  # a caller's list is its own
    assert len(store.open_records()) == 1


def test_a_replay_reports_its_progress_up_to_the_whole_trace(make_policy):
    heard: list[float] = []
    t = np.arange(20) * 60.0
    simulate(make_policy(), Trace("t.csv", t, {"a": np.full(20, 500.0)}, 60.0), progress=heard.append)
    assert heard == sorted(heard) and heard[-1] == 1.0 and 0 < heard[0] < 1


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_bars_only_on_a_terminal_and_nothing_when_quiet():
    assert isinstance(watcher_for(Tty(), quiet=False), Bars)
    assert isinstance(watcher_for(io.StringIO(), quiet=False), Lines)
    assert watcher_for(Tty(), quiet=True) is None


def test_bars_draw_each_run(tmp_path):
    out = Tty()
    with Bars(out) as bars:
        bars.begin(["igniter/last", "reactive"])
        bars.started(0, "igniter/last")
        bars.advanced(0, 0.5)
        bars.finished(0)
    text = out.getvalue()
    assert "igniter/last" in text and "reactive" in text and "100%" in text


def test_a_profile_is_reloaded_when_edited_or_its_link_repointed(tmp_path):
    """load_gpu_model tells a file by one stat (device, inode, mtime), not by resolving its path:
    an edited profile or a re-pointed symlink (an atomic swap of a profiles directory) still loads
    the new file, and an unchanged one is the same object."""
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    for f in (a, b):
        f.write_text((PROFILES / "v100.yaml").read_text())
    link = tmp_path / "gpu.yaml"
    link.symlink_to(a)
    first = load_gpu_model(link)
    assert load_gpu_model(link) is first and first.name == "a"  # a fitted model is named by its file
    link.unlink()
    link.symlink_to(b)
    assert load_gpu_model(link).name == "b"
    edited = load_gpu_model(a)
    os.utime(a, ns=(1, 1))  # an edit: another modification time
    assert load_gpu_model(a) is not edited and load_gpu_model(a).name == "a"


def test_replays_go_to_the_pool_before_the_static_line():
    runs = [
        Run(i, s, SimOptions(strategy=s)) for i, s in enumerate(["autoscaler", "static-peak", "reactive", "oracle"])
    ]
    assert [r.opts.strategy for r in longest_first(runs)] == ["autoscaler", "reactive", "oracle", "static-peak"]
