"""Do servers co-located on one GPU each meet their latency budget? Pure.

One judgement, shared by the places that must agree on it: the simulator counts capacity only from
servers that meet their budget where they run (simresult), and reconcile keeps a retiring server
next to the planned ones only where every server on that GPU still meets its budget (a planned
server sized for a GPU of its own can break its SLO beside a server that has not left yet).
A server's budget is half its SLO (the other half is the batch-filling wait), as in the planner.
"""

from __future__ import annotations

from collections.abc import Sequence

from autoscaler.config.policy import Policy
from autoscaler.core.layout import PlannedServer
from autoscaler.core.reconcile import GpuFits, shares_fit
from autoscaler.model.perfmodel import load_perf_model

Server = tuple[str, str, int, float]  # (workload, model, batch, mps_percent)
REL = 1e-6


def judge(policy: Policy, gpu: str, servers: Sequence[Server]) -> list[tuple[bool, float]]:
    """Per server, in order: (meets its latency budget, predicted throughput in req/s)."""
    if not servers:
        return []
    slo = {w.name: w.slo_ms for w in policy.workloads}
    perf = load_perf_model(policy.profiles_dir / f"{gpu}.yaml")
    preds = perf.predict_raw([(m, b, r) for _, m, b, r in servers])
    return [
        (lat <= slo.get(w, float("inf")) / 2.0 * (1 + REL), thr) for (w, _, _, _), (lat, thr) in zip(servers, preds)
    ]


def gpu_fits(policy: Policy) -> GpuFits:
    """The predicate reconcile uses: shares within 100 % and every server within its budget."""
    gpu_of = {t.name: t.gpu for t in policy.instance_types}

    def fits(instance_type: str, servers: Sequence[PlannedServer]) -> bool:
        if not shares_fit(instance_type, servers):
            return False
        gpu = gpu_of.get(instance_type)
        if gpu is None:
            return True
        return all(ok for ok, _ in judge(policy, gpu, [(s.workload, s.model, s.batch, s.mps_percent) for s in servers]))

    return fits
