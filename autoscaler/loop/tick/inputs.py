"""The pure core's inputs, built from the store and the policy: what layout_from_plan and
reconcile.diff are given each tick. Kept out of controller.py so the tick reads as its steps; no
side effects (the store is only read).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from autoscaler.config.policy import CLOUD_MODEL_ROOT, Policy
from autoscaler.core.fleet.lifecycle import BOOTING, LIVE, USABLE, Record, State
from autoscaler.core.layout.layout_types import Judge, Layout, LayoutInput, PlannedServer, WorkloadInfo
from autoscaler.core.rollout.reconcile import Limits
from autoscaler.core.rollout.surge import TypeInfo, is_surge_slot
from autoscaler.loop.state.store import Store
from autoscaler.model.mig import load_gpu_model, mig_starts

# How long a drained instance waits for its agent to stop its servers before it is terminated: the
# agent's default drain timeout (30 s, igniter-agent run --drain-timeout) and kill grace (10 s),
# with room for its next status. Its servers were drained in the gateway first, so they finish
# what they hold well within it.
AGENT_DRAIN_WAIT_S = 60.0


def layout_input(
    policy: Policy,
    store: Store,
    previous: Layout | None,
    rates: Mapping[str, float],
    judge: Judge,
    model_root: str = CLOUD_MODEL_ROOT,
    *,
    short: Mapping[str, float] | None = None,
    warm: frozenset[tuple[str, int]] = frozenset(),
) -> LayoutInput:
    """Slots the fleet holds (surge ones apart), server names and ports still taken, what each
    live slot's agent runs, and which slots still boot (`warm`: those a pool member started) and
    what is short now (`short`): what naming a new layout must respect."""
    records = store.open_records()  # the closed ones only name slots: slot_tops has their numbers
    live = {r.slot: r.offering for r in records if r.state in LIVE and not is_surge_slot(r.slot)}
    reserved: dict[str, set[tuple[str, int]]] = {}
    running: dict[str, tuple[PlannedServer, ...]] = {}
    current = {r.key for r in records if r.state in LIVE and r.state is not State.GOING_AWAY}
    for (slot, attempt), (_, servers) in store.applied().items():
        reserved.setdefault(slot, set()).update((s.name, s.index) for s in servers)
        if (slot, attempt) in current:
            running[slot] = running.get(slot, ()) + servers
    return LayoutInput(
        fleet=policy.fleet,
        previous=previous,
        extra_slots=live,
        slot_tops=store.slot_tops(),
        reserved_servers={k: frozenset(v) for k, v in reserved.items()},
        workloads=workload_info(policy, model_root),
        rates=dict(rates),
        running=running,
        judge=judge,
        booting=booting(policy, records, warm),
        short=dict(short or {}),
    )


def booting(policy: Policy, records: Iterable[Record], warm: frozenset[tuple[str, int]]) -> tuple[str, ...]:
    """Slots launched whose agent runs nothing yet (surge ones apart), the soonest ready first:
    an instance up whose agent has not answered, then by launch plus its boot (`warm_boot_s` for
    a started pool member, `boot_s` otherwise)."""
    sc = policy.scaling
    records = [r for r in records if r.state in LIVE and not is_surge_slot(r.slot)]
    up = {r.slot for r in records if r.state not in BOOTING}
    due = {
        r.slot: (
            r.state is not State.RUNNING,
            r.created_at + (sc.warm_pool.warm_boot_s if r.key in warm else sc.boot_s),
        )
        for r in records
        if r.state in BOOTING and r.slot not in up
    }
    return tuple(sorted(due, key=lambda s: (*due[s], s)))


def shortfall(rates: Mapping[str, float], capacity: Mapping[str, float]) -> dict[str, float]:
    """Per workload whose observed rate is above what its ready servers carry, by how much."""
    return {w: r - capacity.get(w, 0.0) for w, r in rates.items() if r > capacity.get(w, 0.0)}


def workload_info(policy: Policy, model_root: str = CLOUD_MODEL_ROOT) -> Mapping[str, WorkloadInfo]:
    """Per workload, its model directory on the node and its queue delay (half the SLO); model_root
    is agents.model_root or the provider's default (fleet/samples.py). The same policy object (it
    is frozen) and root give the same mapping, not a new one each tick: a tick that lays out the
    plan the tick before laid out then knows its workloads unchanged by identity
    (loop/tick/last_layout.py), where comparing their text cost about a tenth of a steady tick
    at 8,500 workloads (benchmarks/fleet_scale.py, MIG at 2,000 instances). Not to be changed."""
    last = _WORKLOADS.get("last")
    if last is not None and last[0] is policy and last[1] == model_root:
        return last[2]
    root = (policy.agents.model_root or model_root).rstrip("/")
    info = {w.name: WorkloadInfo(w.model_dir or f"{root}/{w.model}", round(w.slo_ms / 2, 3)) for w in policy.workloads}
    _WORKLOADS["last"] = (policy, model_root, info)
    return info


# workload_info's last answer, with the policy object and root it was for (held, so the policy's
# identity cannot be taken by another object while it is here).
_WORKLOADS: dict[str, tuple[Policy, str, Mapping[str, WorkloadInfo]]] = {}


def limits(policy: Policy, store: Store, judge: Judge, *, contact: bool, gated: bool) -> Limits:
    """What bounds reconcile's moves: timeouts, the cost cap, the surge and disruption budgets
    (sized on the live fleet), and the drain waits (`contact`: agents are asked; `gated`: a
    gateway drains servers first)."""
    types = {
        t.name: TypeInfo(
            name=t.name,
            gpu=t.gpu,
            gpus=t.gpus,
            price_per_hour=t.price_per_hour,
            max_instances=t.max_instances,
            mig_starts=mig_starts(
                load_gpu_model(policy.profiles_dir / f"{t.gpu}.yaml", policy.scaling.mig_latency_margin)
            ),
        )
        for t in policy.instance_types
    }
    fleet = sum(r.state in LIVE for r in store.open_records())
    return Limits(
        ready_timeout_s=policy.provider.ready_timeout_s,
        max_cost_per_hour=policy.scaling.max_cost_per_hour,
        judge=judge,
        max_surge=policy.scaling.max_surge,
        max_instances=policy.scaling.instance_limit,
        types=types,
        fleet=policy.fleet,
        agent_drain_s=AGENT_DRAIN_WAIT_S if contact else 0.0,
        max_unavailable=policy.scaling.disruption_budget.limit(fleet),
        drain_timeout_s=policy.gateway.drain_timeout_s if gated else 0.0,
        burst=policy.scaling.burst,
    )


def caps(store: Store, unavailable: Mapping[str, float], now: float) -> dict[str, int]:
    """Unavailable offerings (a recent capacity error, per type and capacity type: `<type>` or
    `<type>@spot`, until the time given) are capped at the instances already running."""
    live = [r.offering for r in store.open_records() if r.state in USABLE and r.instance_id]
    return {t: live.count(t) for t, end in unavailable.items() if end > now}
