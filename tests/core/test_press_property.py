"""A burst newcomer's pressure prunes no burst (core/rollout/burst_memo.py, crowding.presses_on,
issue 50): on the MPS model a neighbour's latency never falls as a newcomer's L2 line and power
grow, so a trial whose newcomer presses no less than one under which a server within budget
missed is refused without a judgement. Random neighbours on the V100 and T4 models keep that
order, and random V100 fleets on paper, stepped with the bound and with the same judge without
it, give the same diffs step by step while the bound refuses trials; so does the one on floors
and planned rates a burst broke (bursting.py `_floored`)."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from functools import partial

import pytest

from autoscaler.core.layout.layout_types import PlannedServer, SlotSpec
from autoscaler.core.rollout import burst_memo, bursting, crowding
from autoscaler.core.rollout.colocation import ModelJudge
from autoscaler.core.rollout.reconcile import Limits
from autoscaler.core.rollout.rollout import Gpu, RolloutInput, Tick
from autoscaler.model.perfmodel import PerfModel
from tests.core.test_bounds_property import P3, SLOS, Unbounded, model_fleet, slo_policy, v100_judge
from tests.kit.paperfleet import PaperFleet, fleet

pytestmark = pytest.mark.property

MODELS = ("alexnet", "resnet50", "vgg19", "ssd")


class Unpressed(Unbounded):
    """The same judge with its most hopeful verdict too, but not colocation.ModelJudge itself:
    burst_memo takes no pressure from it, so every trial the pressure bounds would refuse is tried."""

    def hopeful(self, instance_type: str, servers: Sequence[PlannedServer]) -> Sequence[tuple[bool, float]] | None:
        return self.judge.hopeful(instance_type, servers)


@pytest.fixture
def refused(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Counts the trials the pressure refuses (`_Press.refuses` saying True)."""
    seen = [0]
    inner = burst_memo._Press.refuses

    def counting(self: burst_memo._Press, push: tuple[float, float]) -> bool:
        out = inner(self, push)
        seen[0] += out
        return out

    monkeypatch.setattr(burst_memo._Press, "refuses", counting)
    yield seen


@pytest.fixture
def floored(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Counts the trials the floors bound refuses (bursting._beaten saying True)."""
    seen = [0]
    inner = bursting._beaten

    def counting(push: tuple[float, float] | None, failed: list[tuple[float, float]]) -> bool:
        out = inner(push, failed)
        seen[0] += out
        return out

    monkeypatch.setattr(bursting, "_beaten", counting)
    yield seen


def _running(rng: random.Random, perf: PerfModel, room: float) -> list[tuple[str, int, float]]:
    out, used = [], 0.0
    for _ in range(rng.randint(1, 4)):
        share = min(rng.choice((5.0, 10.0, 20.0, 30.0, 40.0)), 100.0 - room - used)
        if share <= 0:
            break
        used += share
        out.append((rng.choice([m for m in MODELS if m in perf.coef]), rng.randint(1, 16), share))
    return out


def test_a_neighbour_is_never_faster_under_more_pressure() -> None:
    """Random neighbours and two newcomers in the free share, on the V100 and T4 models: where
    `presses_on` holds and the second presses no less in L2 and power, every neighbour's predicted
    latency is no lower beside it, and a neighbour the judge says misses beside the first misses
    beside the second."""
    judge = ModelJudge(slo_policy())
    rng = random.Random(50)
    compared = decisive = 0
    for _ in range(3000):
        itype = rng.choice(("p3.2xlarge", "g4dn.xlarge"))
        perf = judge.perfs[judge.gpu_of[itype]]
        assert isinstance(perf, PerfModel)
        room = rng.choice((10.0, 20.0, 30.0, 50.0))
        running = _running(rng, perf, room)
        if not crowding.presses_on(perf, running):
            continue
        new = [(rng.choice([m for m in MODELS if m in perf.coef]), rng.randint(1, 16), room) for _ in range(2)]
        push = [crowding.pressure(perf, n) for n in new]
        if push[0] is None or push[1] is None or not (push[1][0] >= push[0][0] and push[1][1] >= push[0][1]):
            continue
        compared += 1
        first, second = perf.predict_raw([*running, new[0]]), perf.predict_raw([*running, new[1]])
        assert all(b[0] >= a[0] for a, b in zip(first[:-1], second[:-1])), (running, new)
        servers = [
            [
                PlannedServer(
                    name=f"s{i}",
                    workload=f"w{rng.randrange(len(SLOS)) if i < len(running) else 0}",
                    model=m,
                    gpu_index=0,
                    index=i,
                    batch=b,
                    mps_percent=r,
                )
                for i, (m, b, r) in enumerate([*running, n])
            ]
            for n in new
        ]
        servers[1] = [*servers[0][:-1], servers[1][-1]]
        one, two = judge(itype, servers[0]), judge(itype, servers[1])
        for (ok1, _), (ok2, _) in zip(one[:-1], two[:-1]):
            assert ok1 or not ok2, (running, new)
            decisive += not ok1
    assert compared > 500 and decisive > 50  # not a test that passes by comparing nothing


def _tight(rng: random.Random, judge: ModelJudge, names: list[str], models: int) -> tuple[PlannedServer, ...]:
    """Up to three servers of distinct workloads (any of the V100's four models), each at the least share that meets its budget
    alone or a little more (most miss it beside a newcomer that presses hard enough), room left."""
    perf = judge.perfs["v100"]
    assert isinstance(perf, PerfModel)
    out: list[PlannedServer] = []
    used = 0.0
    for w in rng.sample(range(12), rng.randint(1, 3)):
        batch = rng.choice((1, 2, 4, 8))
        least = perf.min_share(MODELS[w % models], batch, SLOS[w % len(SLOS)] / 2.0)
        if least is None or used + least > 80.0:
            continue
        share = min(least + rng.choice((0.0, 0.0, 2.5, 5.0)), 80.0 - used)
        used += share
        names.append(f"w{w}-{len(names)}")
        s = PlannedServer(
            name=names[-1],
            workload=f"w{w}",
            model=MODELS[w % models],
            gpu_index=0,
            index=len(out),
            batch=batch,
            mps_percent=share,
        )
        thr = judge("p3", [s])[0][1] * rng.uniform(0.8, 1.0)
        out.append(replace(s, predicted_throughput_rps=thr, rate_rps=thr * rng.uniform(0.5, 1.0)))
    return tuple(out)


def tight_fleet(rng: random.Random, n: int, judge: object, models: int = 2, low: float = 1.0) -> PaperFleet:
    """n ready V100s at rest with servers near their budgets, new instances booting for most
    workloads, rates above the plan: short workloads' late servers burst into the free share.
    `models`: how many of the V100's models run (with all four, newcomers' L2 and power rank
    apart); `low`: the least rate over the plan (below 1, some floors have slack)."""
    model = judge.judge if isinstance(judge, Unbounded) else judge
    assert isinstance(model, ModelJudge)
    names: list[str] = []
    applied = {f"s{i}": _tight(rng, model, names, models) for i in range(n)}
    layout = [SlotSpec(f"s{i}", "p3", 3.0, ("v100",), applied[f"s{i}"]) for i in range(n)]
    for i in range(n, n + rng.randint(2, max(2, n // 2))):
        layout.append(SlotSpec(f"s{i}", "p3", 3.0, ("v100",), _tight(rng, model, names, models)))
    planned: dict[str, float] = {}
    for spec in layout:
        for v in spec.servers:
            planned[v.workload] = planned.get(v.workload, 0.0) + v.predicted_throughput_rps
    rates = {w: c * rng.uniform(low, 1.5) for w, c in planned.items()}
    limits = Limits(types=P3, max_surge=rng.choice((0, 1, None)), judge=judge)  # type: ignore[arg-type]
    return fleet(layout, applied, limits=limits, rates=rates, judge=judge)  # type: ignore[arg-type]


def same_diffs(seed: int, n: int, steps: int, make: Callable[..., PaperFleet] = model_fleet) -> int:
    """A fleet stepped with the pressure bound and without: the same diff at every step. Returns
    the bursts started."""
    pressed = make(random.Random(seed), n, v100_judge())
    unpressed = make(random.Random(seed), n, Unpressed(v100_judge()))
    bursts = 0
    for _ in range(steps):
        d = pressed.step()
        assert unpressed.step() == d
        bursts += len(d.bursts)
        if not d.actions and d.converged:
            break
    return bursts


def test_the_pressure_prunes_no_burst(refused: list[int], floored: list[int]) -> None:
    """Random V100 fleets on paper: the same diffs with and without the bounds, and both refuse
    trials (not a test that passes by pruning nothing): a neighbour's miss (burst_memo) and a
    floor or planned rate broken (bursting.py `_floored`)."""
    bursts = sum(same_diffs(seed, random.Random(seed).randint(6, 24), 6) for seed in range(2))
    bursts += sum(same_diffs(seed, random.Random(seed).randint(6, 16), 3, tight_fleet) for seed in range(8))
    slack = partial(tight_fleet, models=4, low=0.7)  # 35: a floor with slack, L2 and power ranked apart
    bursts += sum(same_diffs(seed, random.Random(seed).randint(6, 16), 3, slack) for seed in (0, 1, 35))
    assert bursts > 0 and refused[0] > 0 and floored[0] > 0


def test_a_miss_under_a_split_share_prunes_nothing() -> None:
    """A newcomer over the free share splits every share (colocation.split): its neighbour then
    misses under less pressure than a newcomer in the free share, which it survives. The first
    miss must not refuse the second (burst_memo prunes only where nothing is split)."""
    judge = v100_judge()

    def server(name: str, workload: str, model: str, batch: int, share: float) -> PlannedServer:
        return PlannedServer(
            name=name, workload=workload, model=model, gpu_index=0, index=0, batch=batch, mps_percent=share
        )

    n = server("n-0", "w2", "resnet50", 2, 50.0)  # w2: SLO 10 ms
    gpu = Gpu(key=("s0", 0), instance_type="p3", running=(n,), wanted=(n,))
    tick = Tick(RolloutInput(gpus=(gpu,), ready=frozenset({"n-0"}), demand={}, judge=judge))
    key = ("s0", 0)

    def trial(name: str, model: str, share: float, top: int) -> tuple[int, ...]:
        def make(batch: int) -> PlannedServer:
            return server(name, "w0", model, batch, share)

        got = burst_memo.passing_batches(
            tick, key, make, top, sig=(name, share), family=(name, share), name=name, pressing=(model, share)
        )
        assert got == tuple(b for b in range(top, 0, -1) if tick.judged_ok(key, make(b)))
        return got

    perf = judge.perfs["v100"]
    assert isinstance(perf, PerfModel)
    split, free = crowding.pressure(perf, ("resnet50", 1, 80.0)), crowding.pressure(perf, ("alexnet", 3, 50.0))
    assert split is not None and free is not None and free[0] >= split[0] and free[1] >= split[1]
    assert trial("a-0-s0", "resnet50", 80.0, 1) == ()  # n misses beside it: split to 38.5 %
    assert not judge("p3", [n, server("a-0-s0", "w0", "resnet50", 1, 80.0)])[0][0]
    assert 3 in trial("b-0-s0", "alexnet", 50.0, 3)  # n keeps its 50 % and its budget
