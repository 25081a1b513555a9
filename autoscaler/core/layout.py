"""Plan -> fleet layout: stable slots and named servers. Pure.

A plan lists instances in no particular order; the fleet needs identities that survive re-planning.
Each planned instance becomes a *slot* (`<fleet>-<instance_type>-<n>`) matched to the previous
layout's slot of the same type that shares most placements, so a small plan change moves few
servers (core/slots.py). Each placement becomes a server `<workload>-<k>`; a placement that stays
on the same slot, GPU and workload keeps its name and port index, new ones get names no live
server uses. A running server whose batch or share changes always gets a new name (replaced
make-before-break: reconcile keeps the old one until the new one serves), since an agent restarts
a same-named server in place and refuses requests meanwhile.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import KW_ONLY, dataclass, field, fields, replace
from typing import Any

from autoscaler.config.offerings import ON_DEMAND, CapacityType, offering_key
from autoscaler.core.resize import Judge, hand_over, rejudged, stay_as_running
from autoscaler.core.slots import match_slots, new_slot
from autoscaler.planner.types import GpuOut, InstanceOut, PlacementOut, Plan, Unplaced


@dataclass(frozen=True, slots=True, kw_only=True)
class PlannedServer:
    """One inference server on a slot: what the agent is told to run."""

    name: str
    workload: str
    model: str
    gpu_index: int
    index: int  # port = the instance's port base + index
    batch: int
    mps_percent: float
    rate_rps: float = 0.0
    predicted_latency_ms: float = 0.0
    predicted_throughput_rps: float = 0.0
    model_dir: str = ""
    max_queue_delay_ms: float = 0.0
    replaces: str = ""  # the running server this one resizes on the same GPU: it takes over that one's load
    address: str = ""  # host:port where the gateway reaches it; recorded when its agent is told to run it

    def to_json(self) -> dict[str, Any]:
        """Every field by name, in declaration order: dataclasses.asdict's answer for these flat
        fields, without its recursive copy (a layout is serialised every tick)."""
        return {name: getattr(self, name) for name in SERVER_FIELDS}

    def agent_key(self) -> tuple[Any, ...]:
        """What the agent sees; a change here needs a reconfigure (rates and predictions do not)."""
        return (
            self.name,
            self.workload,
            self.model_dir,
            self.gpu_index,
            self.index,
            self.batch,
            round(self.mps_percent, 4),
            round(self.max_queue_delay_ms, 3),
        )


SERVER_FIELDS = tuple(f.name for f in fields(PlannedServer))


@dataclass(frozen=True, slots=True)
class SlotSpec:
    slot: str
    instance_type: str
    price_per_hour: float
    gpus: tuple[str, ...]  # GPU type name per index
    servers: tuple[PlannedServer, ...]
    _: KW_ONLY
    capacity_type: CapacityType = ON_DEMAND

    @property
    def offering(self) -> str:
        return offering_key(self.instance_type, self.capacity_type)


@dataclass(frozen=True, slots=True)
class Layout:
    """The fleet the controller converges to: slots with servers, and what the plan left out."""

    planner: str
    slots: tuple[SlotSpec, ...]
    unplaced: tuple[Unplaced, ...] = ()
    rates: Mapping[str, float] = field(default_factory=dict)  # the demand each workload was planned for

    @property
    def cost_per_hour(self) -> float:
        return round(sum(s.price_per_hour for s in self.slots), 6)

    def slot(self, name: str) -> SlotSpec | None:
        return next((s for s in self.slots if s.slot == name), None)

    def servers(self) -> list[tuple[str, PlannedServer]]:
        return [(s.slot, srv) for s in self.slots for srv in s.servers]

    def capacity(self) -> dict[str, float]:
        """Predicted throughput per workload: what the layout can carry."""
        out: dict[str, float] = {}
        for _, srv in self.servers():
            out[srv.workload] = out.get(srv.workload, 0.0) + srv.predicted_throughput_rps
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "planner": self.planner,
            "cost_per_hour": self.cost_per_hour,
            "rates": dict(self.rates),
            "slots": [
                {
                    "slot": s.slot,
                    "instance_type": s.instance_type,
                    "capacity_type": s.capacity_type,
                    "price_per_hour": s.price_per_hour,
                    "gpus": list(s.gpus),
                    "servers": [v.to_json() for v in s.servers],
                }
                for s in self.slots
            ],
            "unplaced": [u.to_json() for u in self.unplaced],
        }


def layout_from_json(data: Mapping[str, Any]) -> Layout:
    """Inverse of Layout.to_json (the store keeps layouts as JSON)."""
    slots = tuple(
        SlotSpec(
            s["slot"],
            s["instance_type"],
            float(s["price_per_hour"]),
            tuple(s["gpus"]),
            tuple(PlannedServer(**v) for v in s["servers"]),
            capacity_type=s.get("capacity_type", ON_DEMAND),
        )
        for s in data["slots"]
    )
    unplaced = tuple(Unplaced(u["workload"], u["reason"]) for u in data.get("unplaced", []))
    return Layout(data["planner"], slots, unplaced, dict(data.get("rates", {})))


def layout_to_plan(layout: Layout) -> Plan:
    """The plan a layout realises, in slot order: the `current` the planner re-plans against."""
    instances = tuple(
        InstanceOut(
            s.instance_type,
            s.price_per_hour,
            tuple(
                GpuOut(i, gpu, tuple(_placement(v) for v in s.servers if v.gpu_index == i))
                for i, gpu in enumerate(s.gpus)
            ),
            capacity_type=s.capacity_type,
        )
        for s in layout.slots
    )
    return Plan(layout.planner, instances, layout.unplaced)


def _placement(srv: PlannedServer) -> PlacementOut:
    return PlacementOut(
        srv.workload,
        srv.model,
        srv.batch,
        srv.mps_percent,
        srv.rate_rps,
        srv.predicted_latency_ms,
        srv.predicted_throughput_rps,
    )


@dataclass(frozen=True, slots=True)
class WorkloadInfo:
    model_dir: str
    max_queue_delay_ms: float


@dataclass(frozen=True, slots=True, kw_only=True)
class LayoutInput:
    """Everything besides the plan that naming needs."""

    fleet: str
    previous: Layout | None
    extra_slots: Mapping[str, str]  # slot -> offering (offering_key): live slots the previous layout lacks
    taken_slots: frozenset[str]  # every slot name ever used (never reused: launch tokens)
    reserved_servers: Mapping[str, frozenset[tuple[str, int]]]  # slot -> (name, index) still running
    workloads: Mapping[str, WorkloadInfo]
    rates: Mapping[str, float]
    running: Mapping[str, tuple[PlannedServer, ...]] = field(default_factory=dict)  # slot -> servers its agent runs
    judge: Judge | None = None  # with it, a resized server that already does its placement's job stays (resize.py)


def layout_from_plan(plan: Plan, inp: LayoutInput) -> Layout:
    """Give each planned instance a stable slot and each placement a stable server name."""
    matches = match_slots(plan, inp)
    taken = set(inp.taken_slots) | set(matches.values())
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
            cur = next((v for v in free if _spec(v.name, v.index, g.index, p, info).agent_key() == v.agent_key()), None)
            if cur is None:
                left.append((g, p))
                continue
            free.remove(cur)
            same.append(_spec(cur.name, cur.index, g.index, p, info))
    return tuple(same), left


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


STAND_IN = re.compile(r"-s\d+$")


def is_stand_in(name: str) -> bool:
    """A stand-in (surge.py) is named `<original>-s<k>`; layout servers (`<workload>-<k>`) never end that way."""
    return STAND_IN.search(name) is not None


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
    )
