"""The gateway's part of a tick, in three named steps around the fleet's diff and act:

1. observe: make sure the gateway runs with the policy's configuration (it starts again if it
   died, and reloads when workloads or the listen address changed), then read it;
2. drain: the servers whose drain is over (the gateway shows no session left on them, or
   drain_timeout_s has passed since it began, on the injected clock) or that the gateway does not
   route to are the FleetView's `drained`: reconcile takes nothing else out of an agent's
   assignment. The servers reconcile lets go (rollout.py: only once its floors hold without them,
   so their successors serve already) and those of going instances (spot interruptions) it
   drains (`Diff.to_drain`), if not drained yet, begin draining in the gateway now; a going
   instance is let go once all its servers are drained (`going_drained`, `gated_diff`);
3. route: after the act step, the servers the agents were told to run get the weights the plan
   gives them (once ready and checked), retiring ones drain, and those gone from every
   assignment leave the gateway (core.routing.routes).

Names: a going instance's servers and its replacement's are the slot's, so the gateway knows
them by core.routing.routes.gateway_name (the replacement's carry its attempt); the drain book and the
readiness sets are in those names, and `fleet_names` maps them from the controller's records.

The drain book (server -> when its drain began) is the controller state's `gateway_drains`
(loop/state/controller_state.py, saved with the tick), so a restart of the autoscaler neither restarts a drain's
timeout nor forgets it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from autoscaler.config.policy import Policy
from autoscaler.core.fleet.lifecycle import LIVE, Record, State
from autoscaler.core.layout.layout_types import Layout, PlannedServer
from autoscaler.core.rollout.reconcile import Diff, FleetView, Limits, diff
from autoscaler.core.routing.routes import (
    AddServer,
    GatewayNames,
    GatewayView,
    Readiness,
    Renames,
    Route,
    Sample,
    SetWeight,
    counter_rate,
    describe,
    desired_routes,
    drain_progress,
    gateway_names,
)
from autoscaler.gateway.base import STILL_CONNECTED, Gateway, GatewayError, deferred, spec_from

Key = tuple[str, int]


@dataclass(kw_only=True)
class GatewayReport:
    """What the gateway step did this tick (in the tick summary)."""

    ok: bool = True
    error: str | None = None
    ops: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    deferred: list[str] = field(default_factory=list)  # deletes HAProxy refused: connections still attached
    draining: list[str] = field(default_factory=list)  # drain begun, not drained yet
    drained: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "error": self.error,
            "ops": self.ops,
            "failed": self.failed,
            "deferred": self.deferred,
            "draining": self.draining,
            "drained": self.drained,
        }


class GatewayStep:
    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        self.drains: dict[str, float] = {}  # the drain book as of this tick's drain step
        self.view: GatewayView | None = None
        self.error: str | None = None
        self.observed_at: float | None = None
        self.removing: frozenset[str] = frozenset()  # draining this tick (reconcile's Diff.draining)
        self.left: frozenset[str] = frozenset()  # left the drain book this tick
        self.routes: dict[str, tuple[Route, ...]] = {}
        self._worked_out: tuple[tuple[Any, ...], dict[str, tuple[Route, ...]]] | None = None  # `_desired`'s last
        self.rates: dict[str, float] = {}  # workload -> measured req/s between the last two reads
        self._samples: dict[str, Sample] = {}
        self._settle = False

    def observe(self, policy: Policy, now: float) -> GatewayView | None:
        """Ensure, then read; a failure is kept as this tick's error (no routing this tick)."""
        try:
            self.gateway.ensure(spec_from(policy.gateway, [w.name for w in policy.workloads]))
            view = self.gateway.observe()
        except GatewayError as exc:
            self.view, self.error = None, str(exc)
            return None
        self._measure(view, now)
        self.view, self.error, self.observed_at = view, None, now
        return view

    def _measure(self, view: GatewayView, now: float) -> None:
        for w, b in view.backends.items():
            rate = counter_rate(self._samples.get(w), now, b.requests_total)
            if rate is not None:
                self.rates[w] = rate
            self._samples[w] = (now, b.requests_total)

    def drained(
        self, started: Mapping[str, float], applied: Iterable[str], now: float, timeout_s: float
    ) -> frozenset[str]:
        """Servers reconcile may take out of their agents' assignments: those whose drain (begun in
        an earlier tick, `started` is the drain book) is over (no session left in the gateway, or
        `timeout_s` since it began), and those the gateway does not route to at all."""
        view = self.view
        absent = frozenset(n for n in applied if view is not None and view.server(n) is None)
        progress = drain_progress(
            started=started, removing=frozenset(started) | absent, seen=view, now=now, timeout_s=timeout_s
        )
        return progress.drained

    def drain(self, draining: frozenset[str], started: Mapping[str, float], now: float) -> dict[str, float]:
        """The drain book after reconcile: the servers it let go that are not drained yet begin
        draining now, or go on (a server no longer among them is forgotten: the plan wants it
        again, or it has left its agent's assignment)."""
        self.left = frozenset(started) - draining
        self.removing, self.drains = draining, {n: float(started.get(n, now)) for n in sorted(draining)}
        return dict(self.drains)

    def gated_diff(
        self,
        layout: Layout,
        view: FleetView,
        now: float,
        limits: Limits,
        names: GatewayNames,
        book: Mapping[str, float],
        timeout_s: float,
    ) -> tuple[Diff, dict[str, float]]:
        """reconcile.diff through the gateway's drains, and the drain book after it. The diff is
        told which servers are drained (reconcile takes nothing else out of an assignment, and
        lets a going instance go only once every server of it is drained); the servers it lets go
        and those of the going instances it drains begin draining. The book is kept in the
        gateway's names: a going instance's servers and its replacement's are different ones."""
        applied = [s.name for servers in names.applied.values() for s in servers]
        drained = self.drained(book, applied, now, timeout_s)
        done = replace(
            view,
            drained=names.to_layout(drained),
            draining_book=names.to_layout(frozenset(book)),
            going_drained=names.going_drained(drained & frozenset(book)),
        )
        actions = diff(layout, done, now, limits)
        draining = names.to_gateway(actions.draining) | names.going_servers(actions.to_drain)
        return actions, self.drain(draining, book, now)

    def route_fleet(
        self,
        *,
        layout: Layout | None,
        names: GatewayNames,
        applied: Mapping[str, Sequence[PlannedServer]],
        asked: frozenset[str],
        ready: frozenset[str],
    ) -> GatewayReport:
        """`route` for the fleet as the controller sees it: `applied` (slot -> servers) and `ready`
        (servers their agents report ready) in the layout's names, `asked`: the slots whose agent
        answered. A going instance's agent is not asked: its servers count as silent (they keep
        serving while the gateway's health check passes, until they are drained)."""
        unasked = (v.name for slot, servers in applied.items() if slot not in asked for v in servers)
        silent = names.to_gateway(unasked) | names.going_servers(names.going)
        readiness = self.readiness(names.to_gateway(ready), silent)
        return self.route(layout=layout, applied=names.applied, readiness=readiness, aliases=names.aliases)

    def route(
        self,
        *,
        layout: Layout | None,
        applied: Mapping[str, Sequence[PlannedServer]],
        readiness: Readiness,
        aliases: Mapping[str, str] | None = None,
    ) -> GatewayReport:
        """Weights, drains, adds and deletes; nothing without a view of the gateway this tick.
        `applied` and `readiness` in the gateway's names (core.routing.routes.GatewayNames)."""
        report = GatewayReport(ok=self.view is not None, error=self.error)
        if self.view is None:
            return report
        self.routes = self._desired(layout=layout, applied=applied, readiness=readiness, aliases=aliases)
        ops, failed = self.gateway.route(self.routes, self.view)
        report.deferred = [m.removesuffix(": " + STILL_CONNECTED) for m in failed if deferred(m)]
        report.failed = [m for m in failed if not deferred(m)]
        report.ops = [describe(op) for op in ops]
        still = _applied_names(applied) if self.removing or self.left else frozenset()
        report.draining = sorted(n for n in self.removing if n in still)
        report.drained = sorted(n for n in self.left if n not in still)
        self._settle = any(isinstance(op, AddServer) or (isinstance(op, SetWeight) and op.weight) for op in ops)
        return report

    def _desired(
        self,
        *,
        layout: Layout | None,
        applied: Mapping[str, Sequence[PlannedServer]],
        readiness: Readiness,
        aliases: Mapping[str, str] | None,
    ) -> dict[str, tuple[Route, ...]]:
        """desired_routes, worked out again only when one of its inputs changed (it is pure): a
        steady tick gives it equal inputs tick after tick, and at 2,000 MIG instances (some 9,300
        servers) it was 54 ms of a 734 ms steady tick; comparing the inputs takes under 1 ms. The
        mappings are copied into the key, so a caller's later change to one cannot pass for none."""
        key = (layout, dict(applied), readiness, self.removing, None if aliases is None else dict(aliases))
        if self._worked_out is None or self._worked_out[0] != key:
            routes = desired_routes(
                layout=layout, applied=applied, readiness=readiness, draining=self.removing, aliases=aliases
            )
            self._worked_out = (key, routes)
        return self._worked_out[1]

    def settling(self, report: GatewayReport) -> bool:
        """Another tick soon: servers just added wait for their first check, or drains go on."""
        return bool(report.draining or report.deferred) or self._settle

    def readiness(self, ready: frozenset[str], silent: frozenset[str]) -> Readiness:
        view = self.view or GatewayView()
        return Readiness(ready=ready, silent=silent, healthy=view.healthy(), serving=view.serving())


def fleet_names(
    records: Sequence[Record],
    applied: Mapping[Key, tuple[int, tuple[PlannedServer, ...]]],
    renames: Renames | None = None,
) -> GatewayNames:
    """The servers the gateway should know, under its names: those applied to each slot's newest
    live record that is not going away, and those of every going one (`applied`: Store.applied;
    `renames`: the caller's copies, routes.Renames)."""
    live = sorted((r for r in records if r.state in LIVE), key=lambda r: r.attempt)
    current = {r.slot: r for r in live if r.state is not State.GOING_AWAY}
    return gateway_names(
        {s: (r.attempt, applied[r.key][1]) for s, r in current.items() if r.key in applied},
        {r.key: applied[r.key][1] for r in live if r.state is State.GOING_AWAY and r.key in applied},
        renames,
    )


def _applied_names(applied: Mapping[str, Sequence[PlannedServer]]) -> frozenset[str]:
    """The names of every server applied, gathered once a tick (asking per draining server went
    over all of them each time: quadratic in a large move)."""
    return frozenset(s.name for servers in applied.values() for s in servers)


def snapshot(step: GatewayStep, policy: Policy) -> dict[str, Any]:
    """`GET /v1/gateway`: per workload its servers (name, address, state, weight,
    planned_rate_rps, requests_total, current_sessions) and its measured rate and 5xx count."""
    view = step.view or GatewayView()
    drains = step.drains
    workloads: dict[str, Any] = {}
    for w in policy.workloads:
        b = view.backends.get(w.name)
        planned = {r.name: r for r in step.routes.get(w.name, ())}
        servers = sorted((s for s in view.servers.values() if s.workload == w.name), key=lambda s: s.name)
        workloads[w.name] = {
            "request_rate_rps": step.rates.get(w.name),
            "requests_total": b.requests_total if b else None,
            "errors_5xx": b.errors_5xx if b else None,
            "current_sessions": b.sessions if b else None,
            "servers": [_server_json(s, planned.get(s.name), drains.get(s.name)) for s in servers],
        }
    return {
        "kind": policy.gateway.kind,
        "listen": policy.gateway.listen,
        "hosts": list(policy.gateway.hosts),
        "ok": step.view is not None,
        "error": step.error,
        "observed_at": step.observed_at,
        "workloads": workloads,
    }


def _server_json(s: Any, route: Route | None, drain_since: float | None) -> dict[str, Any]:
    return {
        "name": s.name,
        "address": s.address,
        "state": s.admin,
        "weight": s.weight,
        "planned_rate_rps": route.planned_rate_rps if route else None,
        "requests_total": s.requests_total,
        "current_sessions": s.sessions,
        "status": s.status,
        "check_ok": s.check_ok,
        "errors_5xx": s.errors_5xx,
        "retiring": route.retiring if route else True,
        "drain_since": drain_since,
    }
