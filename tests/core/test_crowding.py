"""Refusals without a judgement (core/rollout/crowding.py, issue 50): where the model judge says a
server is sure to miss its budget on a GPU, the judgement says so too, beside any part of what
the GPU holds and at any place in the list; and it says so often enough to spare judgements."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace

import pytest
import yaml

from autoscaler.config.policy import Workload, load_policy
from autoscaler.core.layout.layout_types import PlannedServer
from autoscaler.core.rollout import crowding
from autoscaler.core.rollout.colocation import REL, ModelJudge, split
from autoscaler.core.rollout.rollout_types import refusal_of, shares_judge
from autoscaler.model.mig import MigModel
from tests.kit.control import REPO

SLOS = (8.0, 15.0, 25.0, 40.0, 60.0, 100.0)
MODELS = ("alexnet", "resnet50", "vgg19", "ssd")


def server(
    name: str, workload: str, model: str, batch: int, mps: float, mig: tuple[str, int] | None = None
) -> PlannedServer:
    return PlannedServer(
        name=name,
        workload=workload,
        model=model,
        gpu_index=0,
        index=0,
        batch=batch,
        mps_percent=mps,
        mig_profile=mig[0] if mig else None,
        mig_start=mig[1] if mig else None,
    )


def mps_judge() -> ModelJudge:
    policy = load_policy(REPO / "policies" / "servegen-sim.yaml")
    workloads = [Workload(name=f"w{i}", model="alexnet", slo_ms=slo, rate_rps=100.0) for i, slo in enumerate(SLOS)]
    return ModelJudge(policy.model_copy(update={"workloads": workloads}))


def sure(
    judge: ModelJudge, itype: str, cand: PlannedServer, beside: Sequence[PlannedServer], rng: random.Random
) -> None:
    """The judgement refuses `cand` beside all of `beside`, none of it, and random parts of it, at
    a random place in the list; each MIG slice is always there (its units are held, loaded or not:
    rollout.Tick judges it so)."""
    held = [b for b in beside if b.mig_profile is not None]
    parts = [list(beside), held] + [[b for b in beside if b in held or rng.random() < 0.5] for _ in range(4)]
    for part in parts:
        at = rng.randint(0, len(part))
        servers = [*part[:at], cand, *part[at:]]
        assert not judge(itype, servers)[at][0], (cand, part)


@pytest.mark.property
def test_an_mps_refusal_is_the_judgements() -> None:
    """Random candidates beside random neighbours on the V100 and T4 models (shares sometimes
    over 100 %, where nothing is promised): every refusal holds, and most misses are refused."""
    judge, rng = mps_judge(), random.Random(50)
    refused = missed = 0
    for k in range(600):
        itype = rng.choice(("p3.2xlarge", "g4dn.xlarge"))
        beside = [
            server(
                f"n{i}",
                f"w{rng.randrange(len(SLOS))}",
                rng.choice(MODELS),
                rng.randint(1, 16),
                rng.choice((5.0, 10.0, 20.0, 30.0, 45.0)),
            )
            for i in range(rng.randint(0, 4))
        ]
        cand = server(
            f"c{k}",
            f"w{rng.randrange(len(SLOS))}",
            rng.choice(MODELS),
            rng.randint(1, 16),
            rng.choice((5.0, 7.5, 10.0, 20.0, 40.0)),
        )
        says = judge.refuses(itype, cand, beside)
        assert says == (judge.misses_alone(itype, cand) and judge.only_slow(itype, beside, cand.mps_percent))
        if says:
            refused += 1
            sure(judge, itype, cand, beside, rng)
        fits = sum(b.mps_percent for b in beside) + cand.mps_percent <= 100.0
        missed += fits and not judge(itype, [*beside, cand])[-1][0]
    assert refused > missed / 2 > 50  # not a test that passes by refusing nothing


@pytest.mark.unit
def test_no_refusal_where_a_neighbour_could_speed_a_server_up() -> None:
    """Over-subscribed (MPS splits the shares: the judgement is not the one alone), or a model whose
    clock rises with power: the judge says nothing, though the server misses alone."""
    judge = mps_judge()
    cand = server("c", "w0", "vgg19", 16, 10.0)  # an 8 ms SLO: far out of reach
    assert judge.misses_alone("p3.2xlarge", cand)
    assert judge.refuses("p3.2xlarge", cand, [server("n", "w5", "alexnet", 2, 50.0)])
    assert not judge.refuses("p3.2xlarge", cand, [server("n", "w5", "alexnet", 2, 95.0)])
    perf = judge.perfs["v100"]
    rising = replace_attr(perf, clock_slope=abs(perf.clock_slope) + 1.0)
    judge.perfs["v100"] = rising
    try:
        assert not judge.refuses("p3.2xlarge", cand, [server("n", "w5", "alexnet", 2, 50.0)])
    finally:
        judge.perfs["v100"] = perf
    assert refusal_of(judge) is judge and refusal_of(shares_judge) is None


def replace_attr(obj: object, **attrs: object) -> object:
    """A shallow copy of a model object with some attributes changed."""
    out = object.__new__(type(obj))
    out.__dict__.update(obj.__dict__, **attrs)
    return out


@pytest.fixture(scope="module")
def mig_judge(tmp_path_factory: pytest.TempPathFactory) -> ModelJudge:
    """A judge over a small measured A100 80GB table (made up: latency grows with the batch and
    the processes, falls with the compute slices) and three workloads of one model."""
    tmp = tmp_path_factory.mktemp("a100")
    slices = {"1g.10gb": 1, "1g.20gb": 1, "2g.20gb": 2, "3g.40gb": 3, "4g.40gb": 4, "7g.80gb": 7}
    rows = [
        {"slice": name, "batch": b, "processes": n, "throughput_rps": 40.0 * c * b / n, "latency_ms": 12.0 * b * n / c}
        for name, c in slices.items()
        for b in (1, 2, 4, 8)
        for n in (1, 2)
    ]
    profile = {"kind": "measured", "gpu": "a100-80gb", "geometry": "a100-80gb", "models": {"resnet50": rows}}
    (tmp / "a100-80gb.yaml").write_text(yaml.safe_dump(profile))
    policy = {
        "profiles_dir": str(tmp),
        "instance_types": [{"name": "a2-ultragpu-1g", "gpu": "a100-80gb", "gpus": 1, "price_per_hour": 5.07}],
        "workloads": [
            {"name": f"m{i}", "model": "resnet50", "slo_ms": slo, "rate_rps": 100.0}
            for i, slo in enumerate((30, 60, 120))
        ],
    }
    (tmp / "policy.yaml").write_text(yaml.safe_dump(policy))
    return ModelJudge(load_policy(tmp / "policy.yaml"))


@pytest.mark.property
def test_a_mig_refusal_is_the_judgements(mig_judge: ModelJudge) -> None:
    """Random slices beside random cuts (valid or not) on an A100 80GB table: every refusal holds,
    and a candidate whose units are taken is refused."""
    perf = mig_judge.perfs["a100-80gb"]
    assert isinstance(perf, MigModel)
    geo, rng, itype = perf.geometry, random.Random(7), "a2-ultragpu-1g"
    rows = [
        (m, r) for m, rs in perf.profile.models.items() if m in {"resnet50", "resnet152", "mobilenetv2"} for r in rs
    ]
    workloads = ("m-large", "m-mid", "m-small")
    refused = taken = 0
    for k in range(400):
        beside = []
        for i in range(rng.randint(0, 3)):
            m, r = rng.choice(rows)
            p = geo.profile(r.slice)
            beside.append(
                replace(
                    server(f"n{i}", rng.choice(workloads), m, r.batch, 0.0, (r.slice, rng.choice(p.starts))),
                    processes=r.processes,
                )
            )
        m, r = rng.choice(rows)
        start = rng.choice(geo.profile(r.slice).starts)
        batch = r.batch if rng.random() < 0.8 else r.batch + 1  # sometimes a row the table lacks
        cand = replace(server(f"c{k}", rng.choice(workloads), m, batch, 0.0, (r.slice, start)), processes=r.processes)
        if mig_judge.refuses(itype, cand, beside):
            refused += 1
            sure(mig_judge, itype, cand, beside, rng)
        slots = [(b.mig_profile, b.mig_start) for b in beside]
        if mig_judge.units_taken(itype, cand, beside):
            taken += 1
            assert not geo.valid([*slots, (r.slice, start)])
    assert taken > 50 and refused > taken


def old_hopeful(judge: ModelJudge, itype: str, servers: Sequence[PlannedServer]) -> list[tuple[bool, float]] | None:
    """ModelJudge.hopeful before it remembered its answers."""
    gpu = judge.gpu_of.get(itype)
    perf = judge.perfs.get(gpu) if gpu is not None else None
    if perf is None or isinstance(perf, MigModel) or not servers:
        return None
    shares = split([round(s.mps_percent, 6) for s in servers])
    budgets = [judge.slo.get(s.workload, float("inf")) / 2.0 * (1 + REL) for s in servers]
    running = [(s.model, s.batch, r) for s, r in zip(servers, shares, strict=True)]
    return crowding.at_best(perf, running, budgets)


def alike(rng: random.Random, name: str) -> PlannedServer:
    """A server from few workloads, models, batches and shares (two a hair apart): near-alike."""
    share = rng.choice((5.0, 10.0, 10.0000001, 20.0, 45.0))
    return server(name, f"w{rng.randrange(len(SLOS))}", rng.choice(MODELS[:2]), rng.randint(1, 12), share)


@pytest.mark.property
def test_remembered_answers_are_asked_ones(mig_judge: ModelJudge) -> None:
    """batches_missing_alone and hopeful, remembered across calls (ticks), say what misses_alone at
    each batch and the bound computed afresh say, on one judge asked of near-alike servers
    (workloads of different SLOs, shares and batches that differ a little) in random order."""
    judge, rng = mps_judge(), random.Random(59)
    missing = hopeless = 0
    for k in range(1500):
        itype = rng.choice(("p3.2xlarge", "g4dn.xlarge", "p9.unknown"))

        s = alike(rng, f"s{k}")
        alone = frozenset(b for b in range(s.batch, 0, -1) if judge.misses_alone(itype, replace(s, batch=b)))
        assert judge.batches_missing_alone(itype, s) == alone
        missing += bool(alone) and len(alone) < s.batch
        servers = [alike(rng, f"s{k}-{i}") for i in range(rng.randint(0, 4))]
        got, want = judge.hopeful(itype, servers), old_hopeful(judge, itype, servers)
        assert (None if got is None else list(got)) == want
        hopeless += want is not None and not all(ok for ok, _ in want)
    assert missing > 100 and hopeless > 100  # not a test that passes on empty answers
    for k in range(300):  # MIG: each batch's slice judged alone
        cand = replace(
            server(
                f"c{k}", f"m{rng.randrange(3)}", "resnet50", rng.randint(1, 9), 0.0, ("2g.20gb", rng.choice((0, 2)))
            ),
            processes=rng.randint(1, 2),
        )
        alone = frozenset(
            b for b in range(cand.batch, 0, -1) if mig_judge.misses_alone("a2-ultragpu-1g", replace(cand, batch=b))
        )
        assert mig_judge.batches_missing_alone("a2-ultragpu-1g", cand) == alone


@pytest.mark.property
def test_a_mig_room_stands_for_all_a_refusal_reads(mig_judge: ModelJudge) -> None:
    """ModelJudge.room_of (rollout_types.Rooms): two GPUs holding the same slices, whatever runs in
    them, in any order, give the same room and the same refusals; an MPS GPU gives no room."""
    perf = mig_judge.perfs["a100-80gb"]
    assert isinstance(perf, MigModel)
    geo, rng, itype = perf.geometry, random.Random(11), "a2-ultragpu-1g"
    rows = [(m, r) for m, rs in perf.profile.models.items() for r in rs]
    workloads = ("m0", "m1", "m2")

    def slice_at(name: str, p: str, start: int) -> PlannedServer:
        m, r = rng.choice(rows)
        return replace(server(name, rng.choice(workloads), m, r.batch, 0.0, (p, start)), processes=r.processes)

    agreed = 0
    for k in range(300):
        cut = [(p.name, rng.choice(p.starts)) for p in rng.sample(geo.profiles, rng.randint(0, 3))]
        a = [slice_at(f"a{i}", p, s) for i, (p, s) in enumerate(cut)]
        b = [slice_at(f"b{i}", p, s) for i, (p, s) in enumerate(rng.sample(cut, len(cut)))]
        assert mig_judge.room_of(itype, a) == mig_judge.room_of(itype, b) is not None
        for _ in range(5):
            m, r = rng.choice(rows)
            cand = replace(
                server(
                    f"c{k}", rng.choice(workloads), m, r.batch, 0.0, (r.slice, rng.choice(geo.profile(r.slice).starts))
                ),
                processes=r.processes,
            )
            assert mig_judge.refuses(itype, cand, a) == mig_judge.refuses(itype, cand, b)
            agreed += mig_judge.refuses(itype, cand, a)
    assert agreed > 100
    judge = mps_judge()
    itype = next(iter(judge.gpu_of))
    assert judge.room_of(itype, [server("x", "w", "resnet50", 4, 50.0)]) is None
    assert mig_judge.room_of("no-such-type", []) is None
