"""Diff the fleet as observed against the target layout: ordered actions. Pure.

Order: launches; agent configurations of planned slots (servers added, resized, or kept while they
retire); configurations that only remove retiring servers; drains; terminations (replacements of
instances not ready in time, surplus instances, stale attempts, going instances let go
(going_away.py), orphans). A slot whose instance is going away (spot interruption) has no usable
record, so it is launched again at once.

Make-before-break: a server the layout no longer wants (it moved, was resized under a new name, or
its slot is surplus) keeps running until every server the layout wants for its workload reports
ready; only then is it removed, and a surplus instance is drained and terminated only once it
carries nothing still needed. A server resized in place to less throughput keeps its old size while
a new or growing server of its workload is coming up (on a slot that exists or launches now: a
launch the budget blocks is not waited for).

GPUs stay within budget (Limits.gpu_fits: MPS shares within 100 %, and with colocation.gpu_fits
every server within its latency budget, since a server sized for a GPU of its own can break its SLO
beside one that has not left yet). Where keeping a retiring server would break that, the GPU keeps
what it runs (its planned changes deferred, noted) if the retiring servers' replacements come up
without waiting on another GPU, or, for a server resized on its own GPU, while the rest of its
workload's new capacity comes up; otherwise retiring servers are removed at once
(break-before-make, noted), since waiting could deadlock.

Each link of such a chain completes when the servers it waits for report ready, one tick later,
so a diff that starts servers on ready instances while other changes wait for them says so
(`settling`): the controller then ticks again after scaling.settle_s instead of interval_s.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field

from autoscaler.config.offerings import ON_DEMAND, offering_key
from autoscaler.core.disruption import allowed_slots
from autoscaler.core.going_away import Leaving, leaving
from autoscaler.core.layout import Layout, PlannedServer
from autoscaler.core.lifecycle import LIVE, USABLE, Reason, Record, State


@dataclass(frozen=True, slots=True)
class Launch:
    slot: str
    instance_type: str
    attempt: int
    reason: str
    _: KW_ONLY
    capacity_type: str = ON_DEMAND

    @property
    def offering(self) -> str:
        return offering_key(self.instance_type, self.capacity_type)


@dataclass(frozen=True, slots=True)
class Configure:
    slot: str
    servers: tuple[PlannedServer, ...]
    reason: str


@dataclass(frozen=True, slots=True)
class Drain:
    slot: str
    attempt: int
    reason: str


@dataclass(frozen=True, slots=True)
class Terminate:
    slot: str
    attempt: int | None  # None: an orphan instance with no open record
    instance_id: str | None
    reason: Reason
    detail: str = ""


Action = Launch | Configure | Drain | Terminate


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetView:
    """The fleet as the controller knows it after observing and syncing."""

    records: Sequence[Record]  # open records (see lifecycle.OPEN)
    applied: Mapping[str, tuple[PlannedServer, ...]]  # slot -> servers last applied to its agent
    stale_agents: frozenset[str] = frozenset()  # slots whose agent reports an older assignment generation
    ready_servers: frozenset[str] = frozenset()  # server names that report ready
    max_attempt: Mapping[str, int] = field(default_factory=dict)  # slot -> highest attempt ever used
    orphans: Sequence[tuple[str, str]] = ()  # (slot, instance id): ours, listed, no record
    prices: Mapping[str, float] = field(default_factory=dict)  # offering (offering_key) -> $/h
    agent_seen: Mapping[tuple[str, int], float] = field(default_factory=dict)  # last answer per (slot, attempt)
    leaving: Mapping[tuple[str, int], tuple[PlannedServer, ...]] = field(default_factory=dict)  # GOING_AWAY: servers
    # Retiring servers the gateway has drained (no session left, or its drain timed out); a server
    # leaves its agent's assignment only once it is in this set. None: no gateway, all count drained.
    drained: frozenset[str] | None = None
    # Going (GOING_AWAY) records whose servers the gateway has all drained; None: no gateway.
    going_drained: frozenset[tuple[str, int]] | None = None


GpuFits = Callable[[str, Sequence[PlannedServer]], bool]  # (instance type, one GPU's servers) -> fits


def shares_fit(instance_type: str, servers: Sequence[PlannedServer]) -> bool:
    """The model-free test: MPS shares within 100 %."""
    return sum(s.mps_percent for s in servers) <= 100.0 + 1e-6


@dataclass(frozen=True, slots=True)
class Limits:
    ready_timeout_s: float = 900.0
    max_cost_per_hour: float | None = None
    gpu_fits: GpuFits = shares_fit  # colocation.gpu_fits adds the performance model's latency test
    max_unavailable: int | None = None  # voluntary disruptions in flight at most (disruption.py); None: any
    drain_timeout_s: float = 0.0  # the gateway's longest drain: a going instance drains this long before it goes


@dataclass(frozen=True, slots=True)
class Diff:
    actions: tuple[Action, ...]
    notes: tuple[str, ...] = ()  # things deliberately not done (budget), for logs and status
    settling: bool = False  # servers start on ready instances while others wait for them
    to_drain: tuple[tuple[str, int], ...] = ()  # going records whose servers the gateway drains (going_away.py)


def diff(layout: Layout, view: FleetView, now: float, limits: Limits) -> Diff:
    """Ordered actions that move the fleet towards `layout`; see the module docstring."""
    current, extra = _current_records(view.records)
    desired = {s.slot for s in layout.slots}
    keep = _still_needed(layout, view)
    launches, replaced = _launches(layout, current, view, now, limits)
    notes: list[str] = []
    launches = _within_budget(launches, current, replaced, view, limits, notes)
    waiting = _gpus_that_may_wait(layout, current, view, launches, keep)
    before = len(notes)
    coming = frozenset(current) | {a.slot for a in launches if isinstance(a, Launch)}
    grow = _configure_desired(layout, current, view, keep, notes, waiting, limits.gpu_fits, coming)
    settling = bool(grow) and (any(keep.values()) or len(notes) > before)
    shrink, drains, ends = _retire_surplus(current, desired, view, keep)
    drains, ends = _within_disruption_budget(drains, ends, current, view, limits, notes)
    going = leaving(view.records, view.leaving, _covered(layout, view), view.going_drained, now, limits.drain_timeout_s)
    ends = replaced + ends + _closeouts(view.records, extra) + _let_go(going) + _orphans(view)
    actions, held = _hold_undrained(launches + grow + shrink + drains + ends, view)
    if held:
        notes.append(f"waiting for the gateway to drain {', '.join(sorted(held))}")
    return Diff(tuple(actions), tuple(notes), settling or bool(held), going.to_drain)


def _within_disruption_budget(
    drains: list[Action],
    ends: list[Action],
    current: Mapping[str, Record],
    view: FleetView,
    limits: Limits,
    notes: list[str],
) -> tuple[list[Action], list[Action]]:
    """Surplus slots retired now only as far as the disruption budget allows (disruption.py)."""
    ok, held = allowed_slots([current[a.slot] for a in ends], view.records, view.applied, limits.max_unavailable)
    notes.extend(held)
    return [a for a in drains if a.slot in ok], [a for a in ends if a.slot in ok]


def _let_go(going: Leaving) -> list[Action]:
    return [Terminate(r.slot, r.attempt, r.instance_id, Reason.LET_GO, why) for r, why in going.let_go]


def _current_records(records: Sequence[Record]) -> tuple[dict[str, Record], list[Record]]:
    """The newest usable record per slot, and older usable attempts (duplicates)."""
    by_slot: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        if r.state in USABLE:
            by_slot[r.slot].append(r)
    current = {slot: max(rs, key=lambda r: r.attempt) for slot, rs in by_slot.items()}
    extra = [r for rs in by_slot.values() for r in rs if r is not current[r.slot]]
    return current, extra


def _still_needed(layout: Layout, view: FleetView) -> dict[str, tuple[PlannedServer, ...]]:
    """Per slot, applied servers the layout dropped but whose workload is not yet covered."""
    names_by_slot = {s.slot: {v.name for v in s.servers} for s in layout.slots}
    covered = _covered(layout, view)
    out: dict[str, tuple[PlannedServer, ...]] = {}
    for slot, servers in view.applied.items():
        retiring = [s for s in servers if s.name not in names_by_slot.get(slot, set())]
        out[slot] = tuple(s for s in retiring if not covered.get(s.workload, True))
    return out


def _covered(layout: Layout, view: FleetView) -> dict[str, bool]:
    """Workload -> whether every server the layout plans for it reports ready at its planned size."""
    applied = _applied_keys(view)
    covered: dict[str, bool] = {}
    for _, srv in layout.servers():
        covered[srv.workload] = covered.get(srv.workload, True) and _is_ready(srv, view, applied)
    return covered


def _is_ready(srv: PlannedServer, view: FleetView, applied: Mapping[str, tuple[object, ...]]) -> bool:
    """A planned server reports ready at its planned size: one resized in place (same name), or
    whose resize is deferred, does not cover its workload while its agent runs the old size."""
    return srv.name in view.ready_servers and applied.get(srv.name, srv.agent_key()) == srv.agent_key()


def _applied_keys(view: FleetView) -> dict[str, tuple[object, ...]]:
    return {s.name: s.agent_key() for servers in view.applied.values() for s in servers}


def _launches(
    layout: Layout, current: Mapping[str, Record], view: FleetView, now: float, limits: Limits
) -> tuple[list[Action], list[Action]]:
    """Launch slots with no usable record; replace those not ready in time, or whose agent is lost."""
    launches: list[Action] = []
    replaced: list[Action] = []
    going = {r.slot for r in view.records if r.state is State.GOING_AWAY}
    for spec in layout.slots:
        rec = current.get(spec.slot)
        nxt = view.max_attempt.get(spec.slot, -1) + 1
        ct = spec.capacity_type
        if rec is None:
            why = "replace: going away" if spec.slot in going else "planned"
            launches.append(Launch(spec.slot, spec.instance_type, nxt, why, capacity_type=ct))
        elif rec.state is State.REQUESTED:
            launches.append(
                Launch(spec.slot, spec.instance_type, rec.attempt, "resume interrupted launch", capacity_type=ct)
            )
        elif (end := _replace_reason(rec, view, now, limits)) is not None:
            replaced.append(end)
            launches.append(
                Launch(spec.slot, spec.instance_type, nxt, f"replace: {end.reason.value}", capacity_type=ct)
            )
    return launches, replaced


def _replace_reason(rec: Record, view: FleetView, now: float, limits: Limits) -> Terminate | None:
    if rec.state in (State.PENDING, State.RUNNING) and now - rec.created_at > limits.ready_timeout_s:
        return Terminate(
            rec.slot,
            rec.attempt,
            rec.instance_id,
            Reason.READY_TIMEOUT,
            f"not ready after {now - rec.created_at:.0f} s",
        )
    seen = view.agent_seen.get(rec.key)
    if rec.state is State.READY and seen is not None and now - seen > limits.ready_timeout_s:
        return Terminate(
            rec.slot, rec.attempt, rec.instance_id, Reason.AGENT_LOST, f"agent silent for {now - seen:.0f} s"
        )
    return None


def _within_budget(
    launches: list[Action],
    current: Mapping[str, Record],
    replaced: list[Action],
    view: FleetView,
    limits: Limits,
    notes: list[str],
) -> list[Action]:
    """Drop new launches that would lift the fleet's hourly cost above max_cost_per_hour."""
    if limits.max_cost_per_hour is None:
        return launches
    gone = {(a.slot, a.attempt) for a in replaced if isinstance(a, Terminate)}
    cost = sum(
        view.prices.get(r.offering, 0.0)
        for r in view.records
        if r.state in LIVE and r.key not in gone and r.state not in (State.REQUESTED, State.GOING_AWAY)
    )
    out: list[Action] = []
    for a in launches:
        assert isinstance(a, Launch)
        price = view.prices.get(a.offering, 0.0)
        if cost + price > limits.max_cost_per_hour + 1e-9:
            notes.append(
                f"launch of {a.slot} ({a.instance_type}) blocked by max_cost_per_hour "
                f"{limits.max_cost_per_hour}: fleet would cost {cost + price:.2f}/h"
            )
            continue
        cost += price
        out.append(a)
    return out


def _gpus_that_may_wait(
    layout: Layout,
    current: Mapping[str, Record],
    view: FleetView,
    launches: Sequence[Action],
    keep: Mapping[str, tuple[PlannedServer, ...]],
) -> frozenset[tuple[str, int]]:
    """GPUs (slot, index) whose retiring servers may be waited for: the GPU keeps what it runs
    while, for each retiring workload, either

    - every not-yet-ready server of the workload comes up without a deadlock: each is on a slot
      still coming up (launched this tick or booting: its first assignment goes to empty GPUs), on
      a ready GPU that holds no retiring server, or on one whose retiring servers all belong to
      such workloads (a least fixed point, so two moves each waiting for the other's GPU never
      qualify); or
    - the workload shrinks on this very GPU (its new, smaller server needs the old one's room) and
      has other not-yet-ready servers, all on slots coming up or on ready GPUs that retire nothing:
      the GPU waits for those, then swaps old for new. Once they are ready this no longer holds,
      so the wait ends by itself. A workload that grows here swaps at once: a short gap, then more
      capacity, beats keeping the smaller server until a boot completes."""
    booting = {s for s, r in current.items() if r.state is not State.READY}
    booting |= {a.slot for a in launches if isinstance(a, Launch)}
    applied = _applied_keys(view)
    unready = [
        (slot, srv.gpu_index, srv.workload) for slot, srv in layout.servers() if not _is_ready(srv, view, applied)
    ]
    retiring: dict[tuple[str, int], set[str]] = defaultdict(set)
    loss: dict[tuple[str, int, str], float] = defaultdict(float)  # retiring minus planned throughput
    for slot, servers in keep.items():
        for k in servers:
            retiring[(slot, k.gpu_index)].add(k.workload)
            loss[(slot, k.gpu_index, k.workload)] += k.predicted_throughput_rps
    for slot, srv in layout.servers():
        loss[(slot, srv.gpu_index, srv.workload)] -= srv.predicted_throughput_rps
    ok: set[str] = set()
    while True:
        moving = {
            (slot, gpu)
            for slot, gpu, _ in unready
            if slot in booting or (slot in current and retiring[(slot, gpu)] <= ok)
        }
        now_ok = {w for _, _, w in unready} - {w for slot, gpu, w in unready if (slot, gpu) not in moving}
        if now_ok == ok:
            break
        ok = now_ok
    free = {
        (slot, gpu) for slot, gpu, _ in unready if slot in booting or (slot in current and not retiring[(slot, gpu)])
    }

    def elsewhere(w: str, here: tuple[str, int]) -> bool:
        others = [(slot, gpu) for slot, gpu, x in unready if x == w and (slot, gpu) != here]
        return loss[(*here, w)] >= 0 and bool(others) and all(k in free for k in others)

    return frozenset(key for key, ws in retiring.items() if all(w in ok or elsewhere(w, key) for w in ws))


def _configure_desired(
    layout: Layout,
    current: Mapping[str, Record],
    view: FleetView,
    keep: Mapping[str, tuple[PlannedServer, ...]],
    notes: list[str],
    waiting: frozenset[tuple[str, int]],
    fits: GpuFits,
    coming: frozenset[str],
) -> list[Action]:
    """Configurations for ready planned slots. `coming`: slots that exist or launch this tick; only
    their servers are waited for by in-place shrinks (a launch the budget blocked never arrives)."""
    out: list[Action] = []
    applied_keys = _applied_keys(view)
    running = {s.name: s for servers in view.applied.values() for s in servers}
    pending: dict[str, set[str]] = defaultdict(set)  # workload -> planned servers that will add capacity
    for slot, srv in layout.servers():
        if slot in coming and not _is_ready(srv, view, applied_keys) and not _shrinks(running.get(srv.name), srv):
            pending[srv.workload].add(srv.name)
    for spec in layout.slots:
        rec = current.get(spec.slot)
        if rec is None or rec.state is not State.READY:
            continue
        gpu = _GpuJudge(spec.slot, spec.instance_type, fits)
        applied = view.applied.get(spec.slot, ())
        planned = _defer_shrinks(gpu, spec.servers, applied, keep.get(spec.slot, ()), pending, notes)
        wanted = _fit_gpus(gpu, planned, keep.get(spec.slot, ()), notes, applied, waiting)
        if _differs(wanted, view.applied.get(spec.slot)) or spec.slot in view.stale_agents:
            out.append(Configure(spec.slot, wanted, _why(wanted, view.applied.get(spec.slot))))
    return out


@dataclass(frozen=True, slots=True)
class _GpuJudge:
    """Whether a set of servers fits one GPU of a slot (see GpuFits)."""

    slot: str
    instance_type: str
    fits: GpuFits

    def ok(self, gpu: int, servers: Sequence[PlannedServer]) -> bool:
        return self.fits(self.instance_type, [s for s in servers if s.gpu_index == gpu])


def _shrinks(old: PlannedServer | None, new: PlannedServer) -> bool:
    """`new` resizes the running `old` in place (same name and GPU) to less predicted throughput."""
    return (
        old is not None
        and old.agent_key() != new.agent_key()
        and old.gpu_index == new.gpu_index
        and old.predicted_throughput_rps > new.predicted_throughput_rps
    )


def _defer_shrinks(
    judge: _GpuJudge,
    planned: Sequence[PlannedServer],
    applied: Sequence[PlannedServer],
    retiring: Sequence[PlannedServer],
    pending: Mapping[str, set[str]],
    notes: list[str],
) -> list[PlannedServer]:
    """A server the layout shrinks in place keeps its running size while a planned server of its
    workload that adds capacity (new or growing, `pending`) is not ready yet: the plan counts on
    that capacity arriving, so shrinking first would leave the workload short while it boots.
    Only where the GPU still fits with the old size and the servers retiring from it (a deferred
    shrink must not push another workload's server off); other shrinks are never waited for, so
    two shrinks cannot wait on each other."""
    running = {s.name: s for s in applied}
    out = list(planned)
    for i, srv in enumerate(planned):
        old = running.get(srv.name)
        if old is None or not _shrinks(old, srv) or not pending.get(srv.workload):
            continue
        trial = out[:i] + [old] + out[i + 1 :]
        if judge.ok(srv.gpu_index, (*trial, *retiring)):
            out = trial
            notes.append(
                f"make-before-break on {judge.slot}: {srv.name} keeps its size until "
                f"{', '.join(sorted(pending[srv.workload]))} are ready"
            )
    return out


def _fit_gpus(
    judge: _GpuJudge,
    planned: Sequence[PlannedServer],
    retiring: Sequence[PlannedServer],
    notes: list[str],
    applied: Sequence[PlannedServer] = (),
    waiting: frozenset[tuple[str, int]] = frozenset(),
) -> tuple[PlannedServer, ...]:
    """The servers to assign: the planned ones plus the retiring servers that can stay next to
    them with the GPU still fitting (shares within 100 %, every server within its latency budget).
    Where they cannot, and the GPU's retiring servers wait only for replacements that come up
    without waiting themselves (`waiting`: GPUs, see _gpus_that_may_wait), the GPU keeps what it
    runs now if that fits (its planned changes are deferred until those replacements are ready;
    this cannot deadlock). Otherwise retiring servers go (break-before-make,
    noted; see _to_drop): an over-subscribed GPU misses the latency every server on it was planned
    for, and waiting instead could deadlock (two moves each waiting for the other's GPU to empty)."""
    slot = judge.slot
    stay = list(retiring)
    deferred: set[int] = set()
    for gpu in sorted({s.gpu_index for s in retiring}):
        if judge.ok(gpu, (*planned, *stay)):
            continue
        if (slot, gpu) in waiting and judge.ok(gpu, applied):
            deferred.add(gpu)
            notes.append(
                f"make-before-break on {slot} GPU {gpu}: planned changes deferred until the "
                f"replacements of {', '.join(sorted(s.name for s in stay if s.gpu_index == gpu))} "
                f"are ready (the GPU cannot hold both)"
            )
            continue
        dropped: list[str] = []
        while not judge.ok(gpu, (*planned, *stay)) and any(s.gpu_index == gpu for s in stay):
            s = _to_drop(judge, gpu, planned, stay)
            stay.remove(s)
            dropped.append(s.name)
        if dropped:
            notes.append(
                f"break-before-make on {slot} GPU {gpu}: {', '.join(dropped)} removed before "
                f"their replacements are ready (the GPU cannot hold both)"
            )
    if not deferred:
        return tuple(planned) + tuple(stay)
    return (
        tuple(s for s in planned if s.gpu_index not in deferred)
        + tuple(s for s in stay if s.gpu_index not in deferred)
        + tuple(s for s in applied if s.gpu_index in deferred)
    )


def _to_drop(
    judge: _GpuJudge, gpu: int, planned: Sequence[PlannedServer], stay: Sequence[PlannedServer]
) -> PlannedServer:
    """The retiring server to remove next: the smallest whose removal alone makes the GPU fit,
    else the largest (under the latency test, the largest share is not always the culprit)."""
    on_gpu = sorted((s for s in stay if s.gpu_index == gpu), key=lambda s: (s.mps_percent, s.name))
    for s in on_gpu:
        if judge.ok(gpu, (*planned, *(x for x in stay if x is not s))):
            return s
    return on_gpu[-1]


def _differs(wanted: Sequence[PlannedServer], applied: Sequence[PlannedServer] | None) -> bool:
    if applied is None:
        return True
    return sorted(s.agent_key() for s in wanted) != sorted(s.agent_key() for s in applied)


def _why(wanted: Sequence[PlannedServer], applied: Sequence[PlannedServer] | None) -> str:
    if applied is None:
        return "first assignment"
    added = {s.name for s in wanted} - {s.name for s in applied}
    removed = {s.name for s in applied} - {s.name for s in wanted}
    if not added and not removed:
        return "servers changed or agent behind"
    return f"add {sorted(added)} remove {sorted(removed)}"


def _retire_surplus(
    current: Mapping[str, Record], desired: set[str], view: FleetView, keep: Mapping[str, tuple[PlannedServer, ...]]
) -> tuple[list[Action], list[Action], list[Action]]:
    """Surplus slots: shrink to what is still needed, else drain (if it has servers) and terminate."""
    shrink: list[Action] = []
    drains: list[Action] = []
    ends: list[Action] = []
    for slot, rec in sorted(current.items()):
        if slot in desired:
            continue
        needed = keep.get(slot, ())
        if needed and rec.state is State.READY:
            if _differs(needed, view.applied.get(slot)):
                shrink.append(Configure(slot, needed, "surplus: keep servers until replacements are ready"))
            continue
        if needed:
            continue
        if rec.state is State.READY and view.applied.get(slot):
            drains.append(Drain(slot, rec.attempt, "surplus slot"))
        ends.append(Terminate(slot, rec.attempt, rec.instance_id, Reason.SCALE_IN, "surplus slot"))
    return shrink, drains, ends


def _hold_undrained(actions: list[Action], view: FleetView) -> tuple[list[Action], set[str]]:
    """Make-before-break through the gateway: a server that is to leave its agent's assignment stays
    in it until the gateway has drained it (`view.drained`), so no request it still holds is cut
    off. A configuration keeps such servers; a surplus slot keeps its assignment and instance
    (its drain and termination wait). Replacements of lost or late instances are not held."""
    if view.drained is None:
        return actions, set()
    drained = view.drained
    held: set[str] = set()
    waiting: set[str] = set()  # slots whose drain and termination wait
    out: list[Action] = []
    for a in actions:
        applied = view.applied.get(a.slot, ())
        if isinstance(a, Configure):
            keep = [s for s in applied if s.name not in {v.name for v in a.servers} and s.name not in drained]
            held |= {s.name for s in keep}
            a = _keeping(a, tuple(keep), applied) if keep else a
            if keep and not _differs(a.servers, applied) and a.slot not in view.stale_agents:
                continue
        elif isinstance(a, Drain) and any(s.name not in drained for s in applied):
            held |= {s.name for s in applied if s.name not in drained}
            waiting.add(a.slot)
            continue
        elif isinstance(a, Terminate) and a.slot in waiting and a.reason is Reason.SCALE_IN:
            continue
        out.append(a)
    return out, held


def _keeping(a: Configure, keep: tuple[PlannedServer, ...], applied: Sequence[PlannedServer]) -> Configure:
    """The configuration with the undrained servers kept, its reason saying what it really does."""
    servers = a.servers + keep
    return Configure(
        slot=a.slot, servers=servers, reason=_why(servers, applied) + f" (keeps {len(keep)} until drained)"
    )


def _closeouts(records: Sequence[Record], extra: Sequence[Record]) -> list[Action]:
    """Older usable attempts, interrupted drains and failed launches are closed."""
    out: list[Action] = [
        Terminate(r.slot, r.attempt, r.instance_id, Reason.DUPLICATE, "a newer attempt exists") for r in extra
    ]
    for r in records:
        if r.state is State.DRAINING:
            out.append(Terminate(r.slot, r.attempt, r.instance_id, Reason.SCALE_IN, "drained"))
        elif r.state is State.FAILED:
            out.append(Terminate(r.slot, r.attempt, r.instance_id, Reason.RELEASE, "failed launch"))
    return out


def _orphans(view: FleetView) -> list[Action]:
    return [
        Terminate(slot, None, iid, Reason.SCALE_IN, "fleet instance with no open record") for slot, iid in view.orphans
    ]
