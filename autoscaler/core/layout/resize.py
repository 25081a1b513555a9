"""Which running servers a plan resizes may stay exactly as they run. Pure.

A plan re-sizes servers freely (the planner hands out batch and share for this plan's rates, and
gives idle share away), but replacing a running server costs: its successor must start beside it,
and where its GPU cannot hold both, the move needs surge capacity (rollout.py, surge.py). A running
server need not be replaced when it already does what the plan asks of its placement: it carries
the placement's rate, and the GPU still fits with it in the placement's stead (MPS shares within
100 %, every server there within its latency budget by the judge, and each neighbour still
carrying its planned rate: a running server with a larger share than planned slows them down).
Then it stays as it runs, under its name, with its predictions re-judged beside its planned
neighbours, and theirs beside it (`rejudged`); the planner plans against that (layout_to_plan),
so the next plan starts from what really runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from autoscaler.core.layout.layout_types import Judge, PlannedServer
from autoscaler.planner.types import InstanceOut, PlacementOut

Spec = Callable[[str, int, PlacementOut], PlannedServer]  # (name, GPU index, placement) -> planned server


def keep_as_running(
    instance_type: str,
    planned: dict[int, list[PlannedServer]],
    resized: Sequence[tuple[PlannedServer, PlannedServer]],
    judge: Judge,
) -> dict[str, PlannedServer]:
    """Of the (running, planned successor) pairs, the running servers that may stay, each as it
    will be recorded (its rate and predictions from the plan's view). `planned`: GPU index -> the
    plan's servers there (the successors included), updated in place as servers stay."""
    out: dict[str, PlannedServer] = {}
    for cur, new in resized:
        on_gpu = planned.get(new.gpu_index, [])
        trial = [cur if s is new else s for s in on_gpu]
        if sum(s.mps_percent for s in trial) > 100.0 + 1e-6:
            continue
        verdict = judge(instance_type, trial)
        if not all(ok and thr >= s.rate_rps - 1e-9 for s, (ok, thr) in zip(trial, verdict) if s is not cur):
            continue
        latency_ok, thr = verdict[trial.index(cur)]
        if latency_ok and thr >= new.rate_rps - 1e-9:
            kept = replace(cur, rate_rps=new.rate_rps, predicted_throughput_rps=thr)
            planned[new.gpu_index] = [kept if s is cur else s for s in trial]
            out[cur.name] = kept
    return out


def stay_as_running(
    inst: InstanceOut,
    resized: Sequence[tuple[str, int, PlacementOut]],
    running: Sequence[PlannedServer],
    judge: Judge,
    spec: Spec,
) -> dict[str, PlannedServer]:
    """For one planned instance: of its resized running servers ((name, GPU index, placement)),
    those that may stay as they run (`keep_as_running`), by name."""
    live = {s.name: s for s in running}
    planned: dict[int, list[PlannedServer]] = {}
    spec_of: dict[int, PlannedServer] = {}  # id(placement) -> its planned server
    for g in inst.gpus:
        planned[g.index] = []
        for i, p in enumerate(g.placements):
            spec_of[id(p)] = spec(f"?{g.index}.{i}", g.index, p)
            planned[g.index].append(spec_of[id(p)])
    pairs = [(live[name], spec_of[id(p)]) for name, _, p in resized]
    return keep_as_running(inst.instance_type, planned, pairs, judge)


def rejudged(instance_type: str, servers: tuple[PlannedServer, ...], judge: Judge) -> tuple[PlannedServer, ...]:
    """A slot's servers with each one's predicted throughput as the judge gives it beside the
    others on its GPU. The plan predicted each placement beside its planned neighbours; where a
    neighbour stays as it runs (a larger share or batch than planned), the others are slower than
    the plan said, and the layout must say what the fleet will really carry."""
    out = list(servers)
    for gi in sorted({s.gpu_index for s in servers}):
        at = [i for i, s in enumerate(servers) if s.gpu_index == gi]
        for i, (_, thr) in zip(at, judge(instance_type, [servers[i] for i in at])):
            if abs(thr - out[i].predicted_throughput_rps) > 1e-9 * max(thr, 1.0):
                out[i] = replace(out[i], predicted_throughput_rps=thr)
    return tuple(out)


def hand_over(
    rest: Sequence[tuple[int, PlacementOut, str]], running: Sequence[PlannedServer], claimed: set[str]
) -> list[tuple[int, PlacementOut, str]]:
    """New placements (GPU index, placement, predecessor) take a predecessor where they have none:
    a running server of the same workload on the same GPU that no placement keeps or replaces (it
    retires: an earlier plan moved it away, and this one puts its workload back). The new server
    then starts beside it and takes over its load once ready (rollout.loading), a resize in place,
    instead of waiting for it to leave, which on a full GPU needs surge capacity."""
    free = [v for v in running if v.name not in claimed]
    out = []
    for gi, p, rep in rest:
        if not rep:
            cur = next((v for v in free if v.gpu_index == gi and v.workload == p.workload), None)
            if cur is not None:
                free.remove(cur)
                rep = cur.name
        out.append((gi, p, rep))
    return out
