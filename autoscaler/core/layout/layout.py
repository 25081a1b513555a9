"""Plan -> fleet layout: stable slots and named servers. Pure.

A plan lists instances in no particular order; the fleet needs identities that survive re-planning.
Each planned instance becomes a *slot* (`<fleet>-<instance_type>-<n>`) matched to the previous
layout's slot of the same type that shares most placements, so a small plan change moves few
servers (core/layout/slots.py). Each placement becomes a server `<workload>-<k>`; a placement that stays
on the same slot, GPU and workload keeps its name and port index, new ones get names no live
server uses. A running server whose batch or share changes always gets a new name (replaced
make-before-break: reconcile keeps the old one until the new one serves), since an agent restarts
a same-named server in place and refuses requests meanwhile.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from autoscaler.core.layout.layout_types import (
    Judge,
    Layout,
    LayoutInput,
    PlannedServer,
    SlotSpec,
    WorkloadInfo,
    is_stand_in,
)
from autoscaler.core.layout.resize import hand_over, rejudged, stay_as_running
from autoscaler.core.layout.slots import SlotNames, match_slots, new_slot
from autoscaler.planner.types import GpuOut, InstanceOut, PlacementOut, Plan


def layout_from_plan(plan: Plan, inp: LayoutInput) -> Layout:
    """Give each planned instance a stable slot and each placement a stable server name."""
    matches = match_slots(plan, inp)
    taken = SlotNames([*inp.taken_slots, *matches.values()], tops=inp.slot_tops)
    names = {n for srvs in inp.reserved_servers.values() for n, _ in srvs}
    names |= {s.replaces for srvs in inp.running.values() for s in srvs if s.replaces}  # see _fresh_name
    prev = {s.slot: s for s in (inp.previous.slots if inp.previous else ())}
    slots: list[SlotSpec] = []
    pending: list[tuple[int, str, int, PlacementOut, str]] = []
    rejudge: set[str] = set()  # slots where a server stays as it runs (resize.rejudged)
    for i, inst in enumerate(plan.instances):
        slot = matches.get(i) or new_slot(inp.fleet, inst, taken)
        kept, rest, stayed = _keep_servers(inst, prev.get(slot), inp.workloads, inp.running.get(slot, ()), inp.judge)
        names |= {k.name for k in kept}
        if stayed:
            rejudge.add(slot)
        gpus = tuple(g.gpu for g in inst.gpus)
        slots.append(
            SlotSpec(slot, inst.instance_type, inst.price_per_hour, gpus, kept, capacity_type=inst.capacity_type)
        )
        pending.extend((i, slot, gi, p, rep) for gi, p, rep in rest)
    slots = _name_new(slots, pending, names, inp)
    if inp.judge is not None and rejudge:
        slots = [
            replace(s, servers=rejudged(s.instance_type, s.servers, inp.judge)) if s.slot in rejudge else s
            for s in slots
        ]
    return Layout(plan.planner, tuple(slots), plan.unplaced, dict(inp.rates))


def _keep_servers(
    inst: InstanceOut,
    prev: SlotSpec | None,
    info: Mapping[str, WorkloadInfo],
    running: tuple[PlannedServer, ...] = (),
    judge: Judge | None = None,
) -> tuple[tuple[PlannedServer, ...], list[tuple[int, PlacementOut, str]], bool]:
    """Placements that stay on this slot's GPU keep their server; the rest need a new one (with
    the name of the running server it resizes, if it does). The flag: some running server stays
    as it runs in a resized placement's stead (resize.py), so its neighbours' predictions are
    the plan's no longer.

    A kept server whose batch or share changes would be restarted in place by its agent (refusing
    requests meanwhile), so it is replaced instead: a new name and port, and reconcile keeps the
    old one until the new one serves (see `_resized`)."""
    same, placements = _running_as_planned(inst, running, info)
    pool = [s for s in (prev.servers if prev else ()) if s.name not in {v.name for v in same}]
    matched: list[tuple[PlannedServer, int, PlacementOut]] = []
    rest: list[tuple[int, PlacementOut, str]] = []
    for g, p in placements:
        old = next((s for s in pool if s.gpu_index == g.index and s.workload == p.workload), None)
        if old is None:
            rest.append((g.index, p, ""))
            continue
        pool.remove(old)
        matched.append((old, g.index, p))
    resized = _resized(matched, running, info)
    stay = {}
    if resized and judge:
        spec = lambda name, gi, p: _spec(name, 0, gi, p, info)  # noqa: E731
        stay = stay_as_running(
            inst, [(o.name, gi, p) for o, gi, p in matched if o.name in resized], running, judge, spec
        )
    live = {s.name for s in running}
    kept = tuple(
        stay.get(o.name) or _successor(_spec(o.name, o.index, gi, p, info), o, live)
        for o, gi, p in matched
        if o.name not in resized - set(stay)
    )
    rest.extend((gi, p, o.name) for o, gi, p in matched if o.name in resized and o.name not in stay)
    claimed = {v.name for v in same + kept} | {o.name for o, _, _ in matched} | {v.replaces for v in kept}
    claimed |= {rep for _, _, rep in rest} | {v.name for v in running if is_stand_in(v.name)}  # see hand_over
    return same + kept, hand_over(rest, running, claimed), bool(stay)


def _running_as_planned(
    inst: InstanceOut, running: tuple[PlannedServer, ...], info: Mapping[str, WorkloadInfo]
) -> tuple[tuple[PlannedServer, ...], list[tuple[GpuOut, PlacementOut]]]:
    """Placements a running server of this slot already runs exactly as planned (same GPU,
    workload, batch, share, model) keep that server, whatever the previous layout called the
    placement: naming it otherwise would move it (a full GPU's move needs surge capacity) for
    nothing. Returns those servers, and the placements left to match."""
    free = [v for v in running if not is_stand_in(v.name)]  # a stand-in is surge, never a planned server
    same: list[PlannedServer] = []
    left: list[tuple[GpuOut, PlacementOut]] = []
    for g in inst.gpus:
        for p in g.placements:
            head, tail = _planned_key(g.index, p, info)
            cur = next((v for v in free if _runs_as(v.agent_key(), head, tail)), None)
            if cur is None:
                left.append((g, p))
                continue
            free.remove(cur)
            same.append(_spec(cur.name, cur.index, g.index, p, info))
    return tuple(same), left


def _planned_key(
    gpu_index: int, p: PlacementOut, info: Mapping[str, WorkloadInfo]
) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """The agent key (PlannedServer.agent_key) that `_spec(name, index, gpu_index, p, info)` would
    have, less the name and the index, which `_runs_as` takes from the running server: its
    items 1-3 and 5-10. A slot's placements are matched against its running servers this way
    without building a server for every pair (a tick at 1,000 workloads asked 65,000 of them)."""
    wi = info.get(p.workload, WorkloadInfo("", 0.0))
    head = (p.workload, wi.model_dir, gpu_index)
    tail = (p.batch, round(p.mps_percent, 4), round(wi.max_queue_delay_ms, 3), p.mig_profile, p.mig_start, p.processes)
    return head, tail


def _runs_as(key: tuple[Any, ...], head: tuple[Any, ...], tail: tuple[Any, ...]) -> bool:
    """Whether a running server's agent key is that of the planned server with its own name and
    index (`_spec(v.name, v.index, ...).agent_key() == v.agent_key()`)."""
    return key[1:4] == head and key[5:] == tail


def _successor(spec: PlannedServer, old: PlannedServer, live: set[str]) -> PlannedServer:
    """A planned server not started yet keeps the running server it was planned to replace."""
    if spec.name in live or not old.replaces or old.replaces not in live:
        return spec
    return replace(spec, replaces=old.replaces)


def _resized(
    matched: list[tuple[PlannedServer, int, PlacementOut]],
    running: tuple[PlannedServer, ...],
    info: Mapping[str, WorkloadInfo],
) -> set[str]:
    """Names of running servers whose agent-visible spec changes (batch, share, model directory,
    queue delay). Each gets a successor under a new name and port, never a restart in place: the
    agent diffs by name, so it runs both while reconcile moves the capacity over (rollout.py), with
    surge capacity where the GPU cannot hold both."""
    live = {s.name: s for s in running}
    out: set[str] = set()
    for old, gi, p in matched:
        cur = live.get(old.name)
        if cur is not None and _spec(cur.name, cur.index, gi, p, info).agent_key() != cur.agent_key():
            out.add(old.name)
    return out


def _name_new(
    slots: list[SlotSpec],
    pending: Iterable[tuple[int, str, int, PlacementOut, str]],
    names: set[str],
    inp: LayoutInput,
) -> list[SlotSpec]:
    """Add the new servers: fresh names fleet-wide, fresh port indices per slot."""
    extra: dict[int, list[PlannedServer]] = {}
    for i, slot, gi, p, rep in pending:
        used = {s.index for s in slots[i].servers} | {s.index for s in extra.get(i, [])}
        used |= {idx for _, idx in inp.reserved_servers.get(slot, frozenset())}
        name = _fresh_name(p.workload, names)
        spec = _spec(name, _fresh_index(used), gi, p, inp.workloads)
        extra.setdefault(i, []).append(replace(spec, replaces=rep) if rep else spec)
    return [
        SlotSpec(
            s.slot,
            s.instance_type,
            s.price_per_hour,
            s.gpus,
            s.servers + tuple(extra.get(i, [])),
            capacity_type=s.capacity_type,
        )
        for i, s in enumerate(slots)
    ]


def _fresh_name(workload: str, names: set[str]) -> str:
    """The lowest `<workload>-<k>` not in `names`: no live server's name, nor the name a running
    server `replaces` (its predecessor may have left, but the name still says who handed over to
    whom; reused, the new server and that one would each seem to replace the other)."""
    k = 0
    while f"{workload}-{k}" in names:
        k += 1
    names.add(f"{workload}-{k}")
    return f"{workload}-{k}"


def _fresh_index(used: set[int]) -> int:
    k = 0
    while k in used:
        k += 1
    return k


def _spec(name: str, index: int, gpu_index: int, p: PlacementOut, info: Mapping[str, WorkloadInfo]) -> PlannedServer:
    wi = info.get(p.workload, WorkloadInfo("", 0.0))
    return PlannedServer(
        name=name,
        workload=p.workload,
        model=p.model,
        gpu_index=gpu_index,
        index=index,
        batch=p.batch,
        mps_percent=p.mps_percent,
        rate_rps=p.rate_rps,
        predicted_latency_ms=p.predicted_latency_ms,
        predicted_throughput_rps=p.predicted_throughput_rps,
        model_dir=wi.model_dir,
        max_queue_delay_ms=wi.max_queue_delay_ms,
        mig_profile=p.mig_profile,
        mig_start=p.mig_start,
        processes=p.processes,
    )
