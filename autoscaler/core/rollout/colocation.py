"""Do servers co-located on one GPU each meet their latency budget? Pure.

One judgement, shared by the places that must agree on it: the simulator counts capacity only from
servers that meet their budget where they run (sim/result.py), and reconcile counts a workload's
ready capacity, and lets a server start beside others, by the same test (core/rollout/rollout.py).
A server's budget is half its SLO (the other half is the batch-filling wait), as in the planner.

MPS thread percentages are caps, not reservations: the shares on a GPU may add up to more than
100 % while a move is under way (the old server still runs beside its replacement). The model is
fitted for shares that fit, so an over-subscribed GPU is judged as the proportional split MPS
gives when every server is busy at once (each share scaled by 100 / sum): the worst case, and the
only case the fitted model can speak for.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import replace
from functools import lru_cache

from autoscaler.config.policy import Policy
from autoscaler.core.layout.layout_types import JUDGED_DIGITS, PlannedServer
from autoscaler.core.rollout import crowding
from autoscaler.core.rollout.reconcile import GpuFits, shares_fit
from autoscaler.core.rollout.rollout import Judge, shares_judge
from autoscaler.model.mig import GpuModel, MigModel, load_gpu_model
from autoscaler.model.perfmodel import PerfModel

MigSlice = tuple[str, int, int]  # (slice profile, start, MPS processes) of a server on a MIG GPU
# (workload, model, batch, mps_percent[, its MIG slice]): the slice only on a MIG GPU
Server = tuple[str, str, int, float] | tuple[str, str, int, float, MigSlice | None]
REL = 1e-6


def split(shares: Sequence[float]) -> list[float]:
    """The shares each server gets when all are busy: as given up to 100 %, scaled down beyond."""
    total = sum(shares)
    return list(shares) if total <= 100.0 + REL else [r * 100.0 / total for r in shares]


def judge(policy: Policy, gpu: str, servers: Sequence[Server]) -> list[tuple[bool, float]]:
    """Per server, in order: (meets its latency budget, predicted throughput in req/s)."""
    if not servers:
        return []
    slo = {w.name: w.slo_ms for w in policy.workloads}
    return _verdict(_model(policy, gpu), slo, servers)


def _model(policy: Policy, gpu: str) -> GpuModel:
    return load_gpu_model(policy.profiles_dir / f"{gpu}.yaml", policy.scaling.mig_latency_margin)


def server_tuple(s: PlannedServer, digits: int | None = None) -> Server:
    """What the judgement needs of a planned server (at JUDGED_DIGITS: the server's own, kept)."""
    if digits == JUDGED_DIGITS:
        return s.judged_as()
    share = s.mps_percent if digits is None else round(s.mps_percent, digits)
    mig = (s.mig_profile, s.mig_start, s.processes) if s.mig_profile is not None and s.mig_start is not None else None
    return (s.workload, s.model, s.batch, share, mig)


def _verdict(perf: GpuModel, slo: dict[str, float], servers: Sequence[Server]) -> list[tuple[bool, float]]:
    if isinstance(perf, MigModel):
        return _mig_verdict(perf, slo, servers)
    shares = split([s[3] for s in servers])
    preds = perf.predict_raw([(s[1], s[2], r) for s, r in zip(servers, shares)])
    return [(lat <= slo.get(s[0], float("inf")) / 2.0 * (1 + REL), thr) for s, (lat, thr) in zip(servers, preds)]


def _mig_verdict(model: MigModel, slo: dict[str, float], servers: Sequence[Server]) -> list[tuple[bool, float]]:
    """On a MIG GPU a slice's neighbours do not slow it: each server is its measured row, within
    budget when the row's latency meets (1 - margin) x SLO / 2; a server with no slice, a row not
    in the table, or slices sharing memory units (not a valid cut) serves nothing."""
    migs = [_slice_of(s) for s in servers]
    slots = [(mig[0], mig[1]) for mig in migs if mig is not None]
    whole = model.geometry.valid(slots) and len(slots) == len(servers)
    out = []
    for s, mig in zip(servers, migs):
        row = model.row(s[1], mig[0], s[2], mig[2]) if mig is not None else None
        if row is None or not whole:
            out.append((False, 0.0))
            continue
        out.append((model.usable(row, slo.get(s[0], float("inf"))), row.slice_throughput_rps))
    return out


def _slice_of(s: Server) -> MigSlice | None:
    return s[4] if len(s) == 5 else None


def gpu_fits(policy: Policy) -> GpuFits:
    """The predicate reconcile uses: shares within 100 % and every server within its budget."""
    gpu_of = {t.name: t.gpu for t in policy.instance_types}

    def fits(instance_type: str, servers: Sequence[PlannedServer]) -> bool:
        if not shares_fit(instance_type, servers):
            return False
        gpu = gpu_of.get(instance_type)
        if gpu is None:
            return True
        return all(ok for ok, _ in judge(policy, gpu, [server_tuple(s) for s in servers]))

    return fits


GpuJudge = Callable[[str, Sequence[Server]], Sequence[tuple[bool, float]]]  # (GPU type, servers) -> verdicts


def cached_judge(policy: Policy) -> GpuJudge:
    """`judge` for one policy, its models loaded once and its answers remembered: the same
    co-locations come back tick after tick in a replay."""
    slo = {w.name: w.slo_ms for w in policy.workloads}
    perfs = {t.gpu: _model(policy, t.gpu) for t in policy.instance_types}

    @lru_cache(maxsize=1 << 16)  # a tick at fleet scale asks some 10,000 co-locations; 8192 forgot them by the next
    def cached(gpu: str, servers: tuple[Server, ...]) -> tuple[tuple[bool, float], ...]:
        return tuple(_verdict(perfs[gpu], slo, servers))

    return lambda gpu, servers: cached(gpu, tuple(servers)) if servers else ()


class ModelJudge:
    """The judge reconcile counts ready capacity with (rollout.Judge): the model's verdict per
    server, over-subscription included (module docstring), remembered like `cached_judge`."""

    def __init__(self, policy: Policy) -> None:
        self.gpu_of = {t.name: t.gpu for t in policy.instance_types}
        self.slo = {w.name: w.slo_ms for w in policy.workloads}
        self.cached = cached_judge(policy)
        self.perfs = {t.gpu: _model(policy, t.gpu) for t in policy.instance_types}
        self.units = {  # per MIG GPU: each slice profile's memory units (`units_taken`)
            gpu: {p.name: p.memory_units for p in perf.geometry.profiles}
            for gpu, perf in self.perfs.items()
            if isinstance(perf, MigModel)
        }
        # `batches_missing_alone` and `hopeful`, remembered: a burst or a stand-in asks them of the
        # same shapes on every GPU with room, tick after tick (bounded like `cached_judge`)
        self._alone = lru_cache(maxsize=1 << 16)(self._missing_alone)
        self._hopeful = lru_cache(maxsize=1 << 16)(self._at_best)

    def mps_model(self, instance_type: str) -> PerfModel | None:
        """The MPS model this verdict on `instance_type` comes from (rollout_types.Modelled); None
        on MIG, for a type the policy does not list, and for a subclass that judges otherwise (its
        own __call__: a judge that merely looks like this one may not be this model's verdict)."""
        if type(self).__call__ is not ModelJudge.__call__:
            return None
        gpu = self.gpu_of.get(instance_type)
        perf = self.perfs.get(gpu) if gpu is not None else None
        return perf if isinstance(perf, PerfModel) else None

    def __call__(self, instance_type: str, servers: Sequence[PlannedServer]) -> Sequence[tuple[bool, float]]:
        gpu = self.gpu_of.get(instance_type)
        if gpu is None:  # an instance type the policy no longer lists: the model-free test
            return shares_judge(instance_type, servers)
        return self.cached(gpu, tuple([s.judged_as() for s in servers]))

    def shape(self, instance_type: str, s: PlannedServer) -> Hashable | None:
        """What the verdict reads of `s` (rollout_types.shape_of): its server_tuple with the
        workload's name as the SLO `_verdict` looks up; None on a type the policy does not list."""
        if instance_type not in self.gpu_of:
            return None
        workload, *rest = s.judged_as()
        return (self.slo.get(workload, float("inf")), *rest)

    def refuses(self, instance_type: str, s: PlannedServer, beside: Sequence[PlannedServer]) -> bool:
        """Whether `s` is sure to miss its budget judged with any of `beside` (the rest of its
        GPU: servers and held slices) loading the GPU with it, and each MIG slice of `beside` there
        (as rollout.Tick judges): its MIG units are taken, or it misses alone and they can only
        slow it down (rollout_types.Refusals, crowding.py)."""
        return self.units_taken(instance_type, s, beside) or (
            self.misses_alone(instance_type, s) and self.only_slow(instance_type, beside, s.mps_percent)
        )

    def misses_alone(self, instance_type: str, s: PlannedServer) -> bool:
        """`s` misses its budget alone on the GPU, and can only fare worse beside neighbours that
        `only_slow` accepts. Reads of s what `shape` reads."""
        gpu = self.gpu_of.get(instance_type)
        if gpu is None:
            return False
        perf = self.perfs[gpu]
        if isinstance(perf, MigModel):
            return not self.cached(gpu, (s.judged_as(),))[0][0]
        budget = self.slo.get(s.workload, float("inf")) / 2.0 * (1 + REL)
        return crowding.misses_alone(perf, (s.model, s.batch, round(s.mps_percent, JUDGED_DIGITS)), budget)

    def batches_missing_alone(self, instance_type: str, s: PlannedServer) -> frozenset[int]:
        """The batches b from s.batch down to 1 at which s, at batch b, `misses_alone`: that answer
        for each, read of what it reads of s (the workload's SLO, model, batch, rounded share,
        MIG slice) and remembered across ticks; asked of each batch for a subclass that judges
        alone otherwise."""
        if type(self).misses_alone is not ModelJudge.misses_alone:
            return frozenset(b for b in range(s.batch, 0, -1) if self.misses_alone(instance_type, replace(s, batch=b)))
        mig = (
            (s.mig_profile, s.mig_start, s.processes) if s.mig_profile is not None and s.mig_start is not None else None
        )
        return self._alone(
            instance_type, s.workload, s.model, s.batch, round(s.mps_percent, JUDGED_DIGITS), mig
        )  # server_tuple's

    def _missing_alone(
        self, instance_type: str, workload: str, model: str, top: int, share: float, mig: MigSlice | None
    ) -> frozenset[int]:
        """`batches_missing_alone` from what `misses_alone` reads (judged_as at each batch)."""
        gpu = self.gpu_of.get(instance_type)
        if gpu is None:
            return frozenset()
        perf = self.perfs[gpu]
        if isinstance(perf, MigModel):
            return frozenset(
                b for b in range(top, 0, -1) if not self.cached(gpu, ((workload, model, b, share, mig),))[0][0]
            )
        budget = self.slo.get(workload, float("inf")) / 2.0 * (1 + REL)
        return frozenset(b for b in range(top, 0, -1) if crowding.misses_alone(perf, (model, b, share), budget))

    def only_slow(self, instance_type: str, beside: Sequence[PlannedServer], room: float) -> bool:
        """Each of `beside` can only slow down a newcomer of at most `room` MPS share (always on
        MIG: a slice's neighbours do not slow it, `units_taken` says where they are in its way)."""
        gpu = self.gpu_of.get(instance_type)
        if gpu is None:
            return False
        perf = self.perfs[gpu]
        running = [(b.model, b.batch, round(b.mps_percent, JUDGED_DIGITS)) for b in beside]
        return isinstance(perf, MigModel) or crowding.only_slow(perf, running, room)

    def hopeful(self, instance_type: str, servers: Sequence[PlannedServer]) -> Sequence[tuple[bool, float]] | None:
        """The verdict at its most hopeful (rollout_types.Bounds): each server alone at the share
        `split` leaves it of the shares `__call__` judges (crowding.at_best); None off the MPS
        model. Reads of each server what `shape` reads."""
        gpu = self.gpu_of.get(instance_type)
        perf = self.perfs.get(gpu) if gpu is not None else None
        if perf is None or isinstance(perf, MigModel) or not servers:
            return None
        return self._hopeful(gpu, tuple([s.judged_as() for s in servers]))

    def _at_best(self, gpu: str, tuples: tuple[Server, ...]) -> tuple[tuple[bool, float], ...] | None:
        """`hopeful` on an MPS `gpu` from what it reads of each server (its server_tuple)."""
        perf = self.perfs[gpu]
        assert isinstance(perf, PerfModel)
        shares = split([t[3] for t in tuples])
        budgets = [self.slo.get(t[0], float("inf")) / 2.0 * (1 + REL) for t in tuples]
        best = crowding.at_best(perf, [(t[1], t[2], r) for t, r in zip(tuples, shares, strict=True)], budgets)
        return None if best is None else tuple(best)

    def room_of(self, instance_type: str, beside: Sequence[PlannedServer]) -> Hashable | None:
        """What `refuses` reads of `beside` (rollout_types.Rooms): on a MIG GPU the slices it holds
        (`units_taken`; `misses_alone` reads no neighbour, and `only_slow` holds for any), None
        elsewhere (an MPS refusal reads the neighbours' models, batches and shares)."""
        if any(getattr(type(self), m) is not getattr(ModelJudge, m) for m in _REFUSING):
            return None  # a subclass that refuses otherwise may read more of the GPU
        gpu = self.gpu_of.get(instance_type)
        if gpu is None or self.units.get(gpu) is None or not isinstance(self.perfs[gpu], MigModel):
            return None
        return frozenset(
            (b.mig_profile, b.mig_start) for b in beside if b.mig_profile is not None and b.mig_start is not None
        )

    def units_taken(self, instance_type: str, s: PlannedServer, beside: Sequence[PlannedServer]) -> bool:
        """On a MIG GPU, a slice of `beside` shares a memory unit with s's slice: no valid cut."""
        gpu = self.gpu_of.get(instance_type)
        units = self.units.get(gpu) if gpu is not None else None
        if units is None or s.mig_profile is None or s.mig_start is None:
            return False
        slices = [(b.mig_profile, b.mig_start) for b in beside if b.mig_profile is not None and b.mig_start is not None]
        return crowding.units_taken(units, (s.mig_profile, s.mig_start), slices)


_REFUSING = ("refuses", "units_taken", "misses_alone", "only_slow")  # what `room_of` stands for


def server_judge(policy: Policy) -> Judge:
    """The policy's ModelJudge."""
    return ModelJudge(policy)
