"""What /healthz, /livez and /readyz say, and why (docs/operations.md, "Health").

Readiness is about the fleet doing its job, checked after every tick from what the tick saw:

- `last-tick`: the last tick ran without error;
- `agents`: no agent refuses its assignment, reports a failed server, or has stopped answering
  (a ready or draining instance whose agent has been silent for more than 1.5 intervals), and no
  node is quarantined;
- `workloads`: every workload the plan serves has a ready server (with a gateway: one the gateway
  sends requests to; else one its agent reports ready), and none is left unplaced;
- `attainment`: each workload's measured attainment over the last hour is at least
  `scaling.target_attainment`.

The status is `ok` when all pass, `degraded` when only the fleet's checks fail, `failing` when the
last tick failed, `standby` on a process that does not lead (it plans nothing and checks
nothing), and `starting` before the first tick. Liveness is about this process: `ping` (the HTTP
loop answers) and `tick-loop` (the scheduler started a tick, as leader or standby, within
max(5 intervals, 300 s)): a stuck loop is worth a restart, a degraded fleet is not.

Reasons name slots and workloads, never addresses: these endpoints are open without the token.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from autoscaler.core.fleet.lifecycle import State
from autoscaler.gateway.base import GatewayError

if TYPE_CHECKING:
    from autoscaler.loop.tick.controller import Controller, TickReport

log = logging.getLogger(__name__)

OK, DEGRADED, FAILING, STANDBY, STARTING = "ok", "degraded", "failing", "standby", "starting"
STATUSES = (OK, DEGRADED, FAILING, STANDBY, STARTING)
READY_CHECKS = ("last-tick", "agents", "workloads", "attainment")
LIVE_CHECKS = ("ping", "tick-loop")
CONTACTED = (State.READY, State.DRAINING)  # instances whose agents are told what to run


@dataclass(frozen=True, kw_only=True)
class Check:
    """One named check. `subjects` (slots, workloads) identify a failure across ticks; `reasons`
    say it in words and may change every tick (a silence that grows)."""

    name: str
    ok: bool
    reasons: tuple[str, ...] = ()
    subjects: tuple[str, ...] = ()
    note: str = ""  # why a check passed without looking (e.g. agents are not contacted)

    def line(self) -> str:
        """kube-apiserver's verbose line: `[+]name ok` or `[-]name failed: reason`."""
        if self.ok:
            return f"[+]{self.name} ok" + (f" ({self.note})" if self.note else "")
        return f"[-]{self.name} failed: " + "; ".join(self.reasons)

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "reasons": list(self.reasons), **({"note": self.note} if self.note else {})}


@dataclass(frozen=True, kw_only=True)
class Health:
    status: str
    checks: tuple[Check, ...] = ()

    def reasons(self) -> list[str]:
        return [f"{c.name}: {r}" for c in self.checks if not c.ok for r in c.reasons]

    def key(self) -> tuple[str, tuple[tuple[str, tuple[str, ...]], ...]]:
        """What a change is: another status, or another set of failing checks and subjects."""
        return self.status, tuple((c.name, c.subjects) for c in self.checks if not c.ok)

    def check(self, name: str) -> Check | None:
        return next((c for c in self.checks if c.name == name), None)


STARTING_HEALTH = Health(status=STARTING, checks=(Check(name="last-tick", ok=False, reasons=("no tick yet",)),))
STANDBY_HEALTH = Health(status=STANDBY)


@dataclass(frozen=True, kw_only=True)
class Facts:
    """What the checks read, gathered after a tick (facts_of)."""

    tick_error: str | None = None
    contact: bool = True
    refused: dict[str, str] = field(default_factory=dict)  # slot -> what its agent refused or reports failed
    silent: dict[str, float] = field(default_factory=dict)  # slot -> seconds since its agent last answered
    quarantined: dict[str, str] = field(default_factory=dict)  # slot -> why
    placed: tuple[str, ...] = ()  # workloads the layout gives servers
    unplaced: dict[str, str] = field(default_factory=dict)
    ready: dict[str, int] | None = None  # agents' ready servers per workload (None: not contacted)
    serving: dict[str, int] | None = None  # the gateway's serving servers per workload (None: no gateway view)
    attainment: dict[str, float | None] = field(default_factory=dict)
    target: float = 0.999


def evaluate(facts: Facts) -> Health:
    checks = (tick_check(facts), agents_check(facts), workloads_check(facts), attainment_check(facts))
    if facts.tick_error is not None:
        status = FAILING
    else:
        status = OK if all(c.ok for c in checks) else DEGRADED
    return Health(status=status, checks=checks)


def tick_check(facts: Facts) -> Check:
    if facts.tick_error is None:
        return Check(name="last-tick", ok=True)
    return Check(name="last-tick", ok=False, reasons=(facts.tick_error,), subjects=("tick",))


def agents_check(facts: Facts) -> Check:
    if not facts.contact:
        return Check(name="agents", ok=True, note="not checked: agents.transport is none")
    problems = {slot: f"{slot}: agent refuses or fails: {why}" for slot, why in facts.refused.items()}
    for slot, quiet in facts.silent.items():
        problems.setdefault(slot, f"{slot}: agent unreachable for {quiet:.0f} s")
    for slot, why in facts.quarantined.items():
        problems.setdefault(slot, f"{slot}: quarantined, never contacted again: {why}")
    slots = tuple(sorted(problems))
    return Check(name="agents", ok=not slots, reasons=tuple(problems[s] for s in slots), subjects=slots)


def workloads_check(facts: Facts) -> Check:
    count, where = (facts.serving, "the gateway sends requests to") if facts.serving is not None else (facts.ready, "")
    problems = {w: f"{w}: unplaced: {why}" for w, why in facts.unplaced.items()}
    if count is None:
        note = "" if problems else "not checked: agents are not contacted and no gateway answered"
        names = tuple(sorted(problems))
        return Check(
            name="workloads", ok=not names, reasons=tuple(problems[w] for w in names), subjects=names, note=note
        )
    for w in facts.placed:
        if count.get(w, 0) == 0 and w not in problems:
            problems[w] = f"{w}: no ready server" + (f" {where}" if where else "")
    names = tuple(sorted(problems))
    return Check(name="workloads", ok=not names, reasons=tuple(problems[w] for w in names), subjects=names)


def attainment_check(facts: Facts) -> Check:
    low = {w: a for w, a in sorted(facts.attainment.items()) if a is not None and a < facts.target}
    reasons = tuple(
        f"{w}: attainment over the last hour {a:.4f} is below the target {facts.target:g}" for w, a in low.items()
    )
    return Check(name="attainment", ok=not low, reasons=reasons, subjects=tuple(low))


def facts_of(controller: Controller, report: TickReport) -> Facts:
    """The checks' inputs from a controller just after its tick `report`."""
    state = controller.current_state()
    records = [r for r in controller.store.open_records() if r.state in CONTACTED]
    interval = controller.policy.scaling.interval_s
    refused = dict(report.agent_errors)
    for r in records:
        if r.key in state.rejected and r.slot not in refused:
            refused[r.slot] = controller.store.last_error("configure", r.slot) or "its assignment (see the log)"
    silent = {
        r.slot: report.now - seen
        for r in records
        if (seen := state.agent_seen.get(r.key)) is not None and report.now - seen > 1.5 * interval
    }
    layout = report.layout
    return Facts(
        tick_error=None if report.ok else (report.error or "the tick failed"),
        contact=controller.deps.contact,
        refused={s: why for s, why in refused.items() if any(r.slot == s for r in records)},
        silent=silent,
        quarantined={q.slot: q.reason for q in state.quarantined.values()},
        placed=tuple(sorted({srv.workload for _, srv in layout.servers()})) if layout else (),
        unplaced={u.workload: u.reason for u in layout.unplaced} if layout else {},
        ready=report.ready_servers,
        serving=_serving(controller, report),
        attainment=dict(report.attainment),
        target=controller.policy.scaling.target_attainment,
    )


def _serving(controller: Controller, report: TickReport) -> dict[str, int] | None:
    """Serving servers per workload as the tick left the gateway. The tick's view was read before
    its routing: a tick that raised a server's weight would be judged from before the raise, and
    /healthz said degraded while the gateway already answered ready, until the next tick. So a
    tick that changed routing is judged from one more read of the gateway (its view if that fails)."""
    view = controller.routing.view if controller.routing is not None else None
    if view is None or controller.routing is None:
        return None
    if report.gateway is not None and report.gateway.ops:
        try:
            view = controller.routing.gateway.observe()
        except GatewayError as exc:
            log.debug("health: gateway read after routing failed: %s", exc)
    serving = view.serving()
    out: dict[str, int] = {}
    for (workload, name), _ in view.servers.items():
        if name in serving:
            out[workload] = out.get(workload, 0) + 1
    return out


def liveness(*, since_tick_s: float, interval_s: float) -> tuple[Check, ...]:
    """This process: the HTTP loop answers (`ping`), and the scheduler still starts ticks."""
    bound = max(5 * interval_s, 300.0)
    loop = Check(name="tick-loop", ok=since_tick_s <= bound)
    if not loop.ok:
        loop = Check(
            name="tick-loop",
            ok=False,
            reasons=(f"no tick started for {since_tick_s:.0f} s (bound {bound:.0f} s)",),
            subjects=("tick",),
        )
    return Check(name="ping", ok=True), loop


def render(kind: str, checks: tuple[Check, ...], verbose: bool) -> tuple[int, str]:
    """kube-apiserver's format: `ok`, or with ?verbose one line per check and a verdict; a failure
    always lists the checks (so the failing one is named) and answers 503."""
    failed = any(not c.ok for c in checks)
    if not failed and not verbose:
        return 200, "ok\n"
    lines = [c.line() for c in checks]
    lines.append(f"{kind} check failed" if failed else f"{kind} check passed")
    return (503 if failed else 200), "\n".join(lines) + "\n"


@dataclass
class HealthBook:
    """The latest health, and when the scheduler last started a tick: what the three endpoints
    serve. `update` returns a log line when the health changed (status, or which checks fail on
    which slots or workloads), else None: one line per change, not one per tick."""

    health: Health = STARTING_HEALTH
    interval_s: float = 30.0
    started_at: float = 0.0  # the process (the tick-loop check's grace before the first tick)
    beat_at: float | None = None  # the last tick the scheduler started (leader or standby)

    def update(self, health: Health) -> str | None:
        changed = health.key() != self.health.key()
        self.health = health
        if not changed:
            return None
        reasons = health.reasons()
        return f"health: {health.status}" + (f" ({'; '.join(reasons)})" if reasons else "")

    def live(self, now: float) -> tuple[Check, ...]:
        since = now - (self.beat_at if self.beat_at is not None else self.started_at)
        return liveness(since_tick_s=since, interval_s=self.interval_s)

    def ready(self) -> tuple[Check, ...]:
        """A standby's readiness is to take over: it passes (and checks nothing of the fleet)."""
        if self.health.status == STANDBY:
            return (Check(name="leader", ok=True, note="standby: the leader's status endpoint checks the fleet"),)
        return self.health.checks

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.health.status,
            "reasons": self.health.reasons(),
            "checks": {c.name: c.to_json() for c in self.health.checks},
        }


def pick(checks: tuple[Check, ...], exclude: list[str]) -> tuple[Check, ...]:
    """?exclude=NAME (repeatable) leaves checks out, as kube-apiserver's does."""
    return tuple(c for c in checks if c.name not in exclude)
