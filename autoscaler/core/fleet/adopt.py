"""Adoption: a controller that starts without an account of the fleet (a lost state file, a standby
on another host, an advisory run) takes the instances, the servers and the gateway's entries as
they are. Pure.

Before, such a start found the fleet's instances by their tags (lifecycle.sync, DISCOVERED) but
nothing they ran: its first tick saw no server, so the gateway step deleted every server it held
(an outage under load) and reconcile terminated, as booting surplus, instances no plan slot kept.
`adopt` rebuilds, before the tick's first diff, what the lost store held:

- a record per tagged instance no record knows (its slot, attempt, plan generation and offering
  from its tags), READY where its agent answers: the same edges a record walks while it is
  launched (DISCOVERED, BOOTED, AGENT_READY), each with its reason in the history; an older
  attempt of a slot with a newer one (a replacement under way when the state was lost) is
  SUPERSEDED: it goes away as an interrupted instance does, drained once its replacement serves;
- what each agent was told to run (the store's `applied`): its assignment generation and its
  servers, from the agent's status (name, workload, port, batch, share, GPU, slice), at the
  address the gateway reaches them at (the gateway's own entry where it has one, so routing
  changes nothing), with the model's predictions for them (the judge);
- the layout that runs, where the store has none: what the next plan's slots and servers are
  matched to (so the servers the plan keeps keep their names, and nothing restarts). Its rates
  are the rates observed now, shared among each workload's servers by their predicted throughput
  (the rates the lost plan was made for are not known; capacity instead would hold a plan sized
  for it, launching instances). While it is the layout, a plan cheaper than it waits out
  scale_down_delay_s with the fleet held as it runs (`hold_adopted`), as a leader that kept its
  state waits before it scales in;
- an instance whose agent is silent while the gateway holds servers at its address (a slow or
  stopped agent is no proof its servers are down): READY with those servers rebuilt from the
  gateway's entries (`held`), so routing keeps them (they serve while the gateway's check passes)
  rather than deleting them. What they run beyond name and port is not known, so they stay out of
  the adopted layout: they retire as any server the layout dropped does (drained once the plan's
  servers serve), and an agent silent past ready_timeout_s is replaced (AGENT_LOST) the usual way.

From there the usual rollout changes the fleet: make before break, drains, the scale-down delay.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from autoscaler.config.offerings import ON_DEMAND, SPOT, CapacityType, offering_key
from autoscaler.core.fleet.lifecycle import Change, Reason, Record, State, new_record, transition
from autoscaler.core.layout.layout_types import Judge, Layout, PlannedServer, SlotSpec, WorkloadInfo, is_stand_in
from autoscaler.fleet.base import Instance
from autoscaler.planner.types import Plan

Key = tuple[str, int]
Applied = dict[Key, tuple[int, tuple[PlannedServer, ...]]]
# (workload, server name, instance attempt) -> the address the gateway holds that server at, if it does
GatewayAddress = Callable[[str, str, int], str | None]
Held = tuple[str, str, str]  # a server the gateway holds: (workload, its gateway name, host:port)
ADOPTED_PLANNER = "adopted"  # the planner name of an adopted layout (what ran before this controller)


@dataclass(frozen=True, slots=True, kw_only=True)
class AdoptInput:
    """What the tick saw of the instances no record knows, and how to name what they run."""

    instances: Sequence[Instance]  # the instances to adopt (adoptable's answer)
    statuses: Mapping[str, Mapping[str, Any]]  # instance id -> its agent's status document
    gateway: GatewayAddress | None  # where the gateway reaches a server (None: no gateway, or not read)
    hosts: Mapping[str, str]  # instance id -> the host its servers bind (the actuator's choice)
    port_bases: Mapping[str, int]  # instance id -> its servers' port base
    workloads: Mapping[str, WorkloadInfo]  # the policy's: model directory, queue delay
    models: Mapping[str, str]  # workload -> model
    gpus: Mapping[str, tuple[str, ...]]  # instance type -> GPU type per index
    prices: Mapping[str, float]  # offering -> $/h
    rates: Mapping[str, float]  # workload -> its rate observed now (what the adopted layout carries)
    judge: Judge | None = None  # the performance model per server (colocation.server_judge)
    contact: bool = True  # False: agents are not contacted (a running instance counts as ready)
    surge: frozenset[str] = frozenset()  # adopted slots that are surge capacity (kept out of the layout)
    held: Sequence[Held] = ()  # every server the gateway holds (for instances whose agent is silent)


@dataclass(frozen=True, slots=True)
class Adopted:
    changes: tuple[Change, ...]  # the records, as transitions to persist
    applied: Applied  # what each adopted agent runs
    layout: Layout | None  # what runs, as a layout (None: no adopted instance runs servers)
    plan_generation: int  # the newest plan generation among the adopted instances' tags
    notes: tuple[str, ...] = ()
    silent: frozenset[Key] = frozenset()  # adopted READY with servers from the gateway: agent silent


def adoptable(instances: Iterable[Instance], records: Sequence[Record], closed: frozenset[Key]) -> list[Instance]:
    """Fleet instances (pending or running, with a slot tag) that no record accounts for: what
    lifecycle.sync would otherwise discover with nothing known of what they run."""
    ids = {r.instance_id for r in records}
    keys = {r.key for r in records}
    return sorted(
        (
            i
            for i in instances
            if i.state in ("pending", "running")
            and i.slot
            and i.id not in ids
            and (i.slot, i.attempt) not in keys
            and (i.slot, i.attempt) not in closed
        ),
        key=lambda i: (i.slot, i.attempt, i.id),
    )


def adopt(inp: AdoptInput, now: float) -> Adopted:
    """Records, assignments and the running layout for `inp.instances` (see the module docstring)."""
    changes: list[Change] = []
    applied: Applied = {}
    notes: list[str] = []
    silent: set[Key] = set()
    newest = _newest_attempts(inp.instances)
    for inst in inp.instances:
        record, steps = _record(inst, inp, now)
        kept = _held_servers(inst, inp) if record.state is State.RUNNING and inp.contact else ()
        if kept:
            why = f"adopted: its agent is silent, the gateway holds {len(kept)} server(s) at its address"
            steps.append(transition(record, Reason.AGENT_READY, now, why))
            record = steps[-1].record
        if record.state is State.READY and inst.attempt < newest[inst.slot]:
            why = f"adopted beside attempt {newest[inst.slot]} of its slot: let go once drained"
            steps.append(transition(record, Reason.SUPERSEDED, now, why, leaves_at=None))
        changes.extend(steps)
        status = inp.statuses.get(inst.id)
        if status is not None and record.state in (State.READY, State.GOING_AWAY) and _answered(status):
            servers, skipped = _servers(inst, status, inp)
            applied[record.key] = (_generation(status), servers)
            notes.extend(skipped)
        elif kept:
            applied[record.key] = (0, kept)
            silent.add(record.key)
            notes.append(
                f"adopt {inst.slot}: its agent is silent; kept the gateway's {', '.join(s.name for s in kept)}"
            )
    applied = _shared(_even(applied, silent), inp.rates)
    layout = _layout(inp, {k: v for k, v in applied.items() if k not in silent})
    generation = max((i.plan_generation for i in inp.instances), default=0)
    return Adopted(tuple(changes), applied, layout, generation, tuple(notes), frozenset(silent))


def _split(address: str) -> tuple[str, int] | None:
    host, _, port = address.rpartition(":")
    return (host, int(port)) if host and port.isdigit() else None


def _layout_name(gateway: str) -> tuple[str, int]:
    """A gateway name back to (layout name, attempt): routes.gateway_name's inverse."""
    base, dot, tail = gateway.rpartition(".a")
    return (base, int(tail)) if dot and base and tail.isdigit() else (gateway, 0)


def _owner(host: str, port: int, inp: AdoptInput) -> str | None:
    """The instance a gateway address belongs to: the one bound on that host whose port base is the
    highest at or below the port (instances on one host have disjoint port ranges)."""
    best: tuple[int, str] | None = None
    for inst in inp.instances:
        base = inp.port_bases.get(inst.id)
        if inp.hosts.get(inst.id) == host and base is not None and base <= port and (best is None or base > best[0]):
            best = (base, inst.id)
    return None if best is None else best[1]


def _held_servers(inst: Instance, inp: AdoptInput) -> tuple[PlannedServer, ...]:
    """The servers the gateway holds at `inst`'s address under its attempt's names, as applied
    servers (name, workload, port; the rest unknown, so never re-sent as an assignment's truth)."""
    out: list[PlannedServer] = []
    base = inp.port_bases.get(inst.id, 0)
    for workload, gateway, address in inp.held:
        name, attempt = _layout_name(gateway)
        where = _split(address)
        if attempt != inst.attempt or where is None or _owner(where[0], where[1], inp) != inst.id:
            continue
        info = inp.workloads.get(workload)
        out.append(
            PlannedServer(
                name=name,
                workload=workload,
                model=inp.models.get(workload, ""),
                gpu_index=0,
                index=where[1] - base,
                batch=1,
                mps_percent=100.0,
                model_dir=info.model_dir if info else "",
                max_queue_delay_ms=info.max_queue_delay_ms if info else 0.0,
                address=address,
            )
        )
    return tuple(sorted(out, key=lambda s: (s.workload, s.name)))


def _even(applied: Applied, silent: set[Key]) -> Applied:
    """The gateway-held servers of silent agents predicted at their workload's mean (the model
    cannot judge them), so they share its rate evenly, not at the gateway's lowest weight."""
    known = [s for k, (_, group) in applied.items() if k not in silent for s in group]
    mean: dict[str, float] = {}
    for w in {s.workload for s in known}:
        rps = [s.predicted_throughput_rps for s in known if s.workload == w]
        mean[w] = sum(rps) / len(rps)
    return {
        k: (gen, tuple(replace(s, predicted_throughput_rps=mean.get(s.workload, 0.0)) for s in group))
        if k in silent
        else (gen, group)
        for k, (gen, group) in applied.items()
    }


def _newest_attempts(instances: Iterable[Instance]) -> dict[str, int]:
    """Per slot, its newest attempt among the adopted: an older one that serves is let go as a going
    instance is (SUPERSEDED, then drained and terminated), never terminated at once as a duplicate."""
    out: dict[str, int] = {}
    for inst in instances:
        out[inst.slot] = max(out.get(inst.slot, inst.attempt), inst.attempt)
    return out


def _answered(status: Mapping[str, Any]) -> bool:
    return status.get("agent_running", True) is not False


def _record(inst: Instance, inp: AdoptInput, now: float) -> tuple[Record, list[Change]]:
    """The record of an adopted instance and the edges it walked: DISCOVERED, then BOOTED where it
    runs, then AGENT_READY where its agent answered (or agents are not contacted)."""
    rec = new_record(inst.slot, inst.attempt, inst.instance_type, now, inst.plan_generation, inst.capacity_type)
    steps = [transition(rec, Reason.DISCOVERED, now, f"{inst.id} adopted by its tags", instance_id=inst.id)]
    if inst.state == "running":
        steps.append(transition(steps[-1].record, Reason.BOOTED, now))
        status = inp.statuses.get(inst.id)
        if not inp.contact or (status is not None and _answered(status)):
            why = "adopted: its agent answered" if inp.contact else "adopted: agents not contacted"
            steps.append(transition(steps[-1].record, Reason.AGENT_READY, now, why))
    return steps[-1].record, steps


def _generation(status: Mapping[str, Any]) -> int:
    gen = status.get("generation")
    return gen if isinstance(gen, int) and not isinstance(gen, bool) and gen >= 0 else 0


def _servers(inst: Instance, status: Mapping[str, Any], inp: AdoptInput) -> tuple[tuple[PlannedServer, ...], list[str]]:
    """The servers the agent runs (its `servers`; those it is still stopping, `draining`, are
    leaving already), as the store would have recorded them, with the judge's predictions."""
    out: list[PlannedServer] = []
    notes: list[str] = []
    entries = status.get("servers")
    for raw in entries if isinstance(entries, list) else []:
        server = _server(inst, raw, inp) if isinstance(raw, Mapping) else None
        if server is None:
            notes.append(f"adopt {inst.slot}: a server of its agent's status cannot be read: {str(raw)[:120]}")
        else:
            out.append(server)
    return _predicted(inst.instance_type, tuple(out), inp.judge), notes


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _server(inst: Instance, raw: Mapping[str, Any], inp: AdoptInput) -> PlannedServer | None:
    """One status entry as a PlannedServer; None where a field the assignment needs is missing."""
    name, workload, port = raw.get("name"), raw.get("workload"), _int(raw.get("port"))
    batch, share = _int(raw.get("batch")), raw.get("mps_percent")
    base = inp.port_bases.get(inst.id)
    if not (isinstance(name, str) and name and isinstance(workload, str) and workload):
        return None
    if port is None or batch is None or base is None or port < base or not isinstance(share, int | float):
        return None
    info = inp.workloads.get(workload)
    seen = inp.gateway(workload, name, inst.attempt) if inp.gateway else None
    host = inp.hosts.get(inst.id, "127.0.0.1")
    return PlannedServer(
        name=name,
        workload=workload,
        model=inp.models.get(workload, ""),
        gpu_index=_int(raw.get("gpu_index")) or 0,
        index=port - base,
        batch=batch,
        mps_percent=float(share),
        model_dir=info.model_dir if info else "",
        max_queue_delay_ms=info.max_queue_delay_ms if info else 0.0,
        address=seen or f"{host}:{port}",
        mig_profile=raw.get("mig_profile") if isinstance(raw.get("mig_profile"), str) else None,
        mig_start=_int(raw.get("mig_start")),
        processes=max(1, _int(raw.get("processes")) or 1),
    )


def _predicted(
    instance_type: str, servers: tuple[PlannedServer, ...], judge: Judge | None
) -> tuple[PlannedServer, ...]:
    """Each server with the judge's predicted throughput beside its GPU's neighbours (what reconcile
    counts as its ready capacity)."""
    if judge is None:
        return servers
    by_gpu: dict[int, list[int]] = {}
    for i, s in enumerate(servers):
        by_gpu.setdefault(s.gpu_index, []).append(i)
    out = list(servers)
    for members in by_gpu.values():
        verdicts = judge(instance_type, [servers[i] for i in members])
        for i, (_, rps) in zip(members, verdicts, strict=True):
            out[i] = replace(servers[i], predicted_throughput_rps=rps)
    return tuple(out)


def _shared(applied: Applied, rates: Mapping[str, float]) -> Applied:
    """Each server's rate_rps: its workload's observed rate, shared by predicted throughput (evenly
    where nothing is predicted). A server keeps it while it retires: its weight at the gateway."""
    servers = [s for _, group in applied.values() for s in group]
    total = {w: sum(s.predicted_throughput_rps for s in servers if s.workload == w) for w in rates}
    count = {w: sum(s.workload == w for s in servers) for w in rates}

    def rate(s: PlannedServer) -> float:
        r = rates.get(s.workload, 0.0)
        t = total.get(s.workload, 0.0)
        return r * s.predicted_throughput_rps / t if t > 0 else r / max(1, count.get(s.workload, 0))

    return {k: (gen, tuple(replace(s, rate_rps=rate(s)) for s in group)) for k, (gen, group) in applied.items()}


def _layout(inp: AdoptInput, applied: Applied) -> Layout | None:
    """The adopted fleet as a layout: each adopted slot (the newest attempt; surge capacity apart)
    with the servers it runs (stand-ins apart: they are surge too)."""
    newest: dict[str, Instance] = {}
    for inst in inp.instances:
        if (inst.slot, inst.attempt) in applied and inst.slot not in inp.surge:
            if inst.slot not in newest or inst.attempt > newest[inst.slot].attempt:
                newest[inst.slot] = inst
    slots = []
    for slot, inst in sorted(newest.items()):
        servers = tuple(s for s in applied[(slot, inst.attempt)][1] if not is_stand_in(s.name))
        price = inp.prices.get(offering_key(inst.instance_type, inst.capacity_type), 0.0)
        gpus = inp.gpus.get(inst.instance_type, ())
        kind: CapacityType = SPOT if inst.capacity_type == SPOT else ON_DEMAND
        slots.append(SlotSpec(slot, inst.instance_type, price, gpus, servers, capacity_type=kind))
    if not any(s.servers for s in slots):
        return None
    rates: dict[str, float] = {}
    for s in slots:
        for v in s.servers:
            rates[v.workload] = rates.get(v.workload, 0.0) + v.rate_rps
    return Layout(ADOPTED_PLANNER, tuple(slots), (), rates)


@dataclass(frozen=True, slots=True)
class Hold:
    """Whether the adopted fleet is held this tick, since when the target has been cheaper, and why."""

    held: bool
    cheaper_since: float | None
    why: str


def hold_adopted(
    now: float, target: Plan, adopted: Layout, cheaper_since: float | None, delay_s: float, missing: bool
) -> Hold:
    """While the layout is the adopted one: hold the fleet as it runs until a cheaper target has
    held for `delay_s` (scaling.choose's rule, with the running fleet as the hold plan), never
    with missing rates; a target that serves a workload the fleet does not, or costs at least as
    much (it needs more), is used at once."""
    served = {v.workload for _, v in adopted.servers()}
    new = sorted({p.workload for i in target.instances for g in i.gpus for p in g.placements} - served)
    if new:
        return Hold(False, None, f"it places {', '.join(new)}, which the adopted fleet does not serve")
    if target.cost_per_hour >= adopted.cost_per_hour - 1e-9:
        return Hold(False, None, "the plan needs no less than the adopted fleet")
    if missing:
        return Hold(True, cheaper_since, "the adopted fleet: missing rate data, no scale-in")
    since = now if cheaper_since is None else cheaper_since
    if now - since >= delay_s:
        return Hold(
            False, None, f"cheaper than the adopted fleet for {now - since:.0f} s (scale_down_delay_s {delay_s:g})"
        )
    return Hold(True, since, f"the adopted fleet: a cheaper plan held for {now - since:.0f} s of {delay_s:g} s")
