"""One control-loop tick, in named steps: observe -> sync -> forecast -> guard -> plan -> diff -> act -> record.

Side effects live behind the Provider, Transport and RateSource interfaces and the Store; what the
controller remembers between ticks is one typed ControllerState (loop/state/controller_state.py), loaded at the start
of a tick and saved once at its end; failures are handled as the contracts' error tables say
(fleet/base.py, transport/base.py). Time comes from an injected clock, so the same code runs under
APScheduler (`igniter run`) and under a simulated clock (`igniter simulate`). The pure parts are
lifecycle.sync, forecast, headroom, slo_guard, scaling.choose, layout_from_plan and
reconcile.diff; the observe step is loop/tick/observe.py, the forecast step loop/tick/tuning.py, the pure
parts' inputs are built from the store in loop/tick/inputs.py, and what is serving now in
loop/tick/fleet_view.py.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import agents.logs as logs
from autoscaler.config.offerings import offering_prices
from autoscaler.config.policy import Policy
from autoscaler.core.capacity.scaling import choose, hold_rates, newly_placed, next_wake
from autoscaler.core.capacity.slo_guard import update as guard_update
from autoscaler.core.fleet.adopt import ADOPTED_PLANNER, hold_adopted
from autoscaler.core.fleet.lifecycle import BOOTING, Record, State, SyncInput, going_away, sync, unclaimed
from autoscaler.core.layout.layout_types import Layout, layout_to_plan
from autoscaler.core.rollout.colocation import server_judge
from autoscaler.core.rollout.fast_path import additive, no_less
from autoscaler.core.rollout.reconcile import Diff, FleetView, diff
from autoscaler.core.routing.routes import GatewayNames, Renames
from autoscaler.fleet.base import Instance, ProviderError, Retry
from autoscaler.leader.base import NotLeader
from autoscaler.loop.state.controller_state import ControllerState, StateError
from autoscaler.loop.steps.actuator import Actuator, Outcome
from autoscaler.loop.steps.gateway_step import GatewayStep, fleet_names
from autoscaler.loop.steps.pool_step import PoolReport, PoolStep
from autoscaler.loop.tick import inputs
from autoscaler.loop.tick.adopt_step import adopt_step
from autoscaler.loop.tick.collect import held_off
from autoscaler.loop.tick.fleet_view import ViewInput, agent_ready, fleet_view, live_records
from autoscaler.loop.tick.inputs import AGENT_DRAIN_WAIT_S, layout_input
from autoscaler.loop.tick.last_layout import LastLayout
from autoscaler.loop.tick.observe import agent_facts, observe, remember_agents, worst_p99
from autoscaler.loop.tick.reach import ReachWatch
from autoscaler.loop.tick.records import BoundFn, Deps, Observation, PlanFn, TickReport
from autoscaler.loop.tick.tuning import planned_rates, ready_capacity
from autoscaler.planner.limits import TooManyInstances
from autoscaler.planner.types import Plan
from autoscaler.transport.base import TransportError
from autoscaler.transport.bounded import agent_deadline_s

log = logging.getLogger(__name__)

__all__ = ["AGENT_DRAIN_WAIT_S", "Controller", "Deps", "Observation", "PlanFn", "TickReport"]


class Controller:
    def __init__(self, policy: Policy, deps: Deps) -> None:
        self.set_policy(policy)
        self.deps = deps
        self.store = deps.store
        self.state = ControllerState()  # the tick's working copy (see loop/state/controller_state.py)
        self._saved: ControllerState | None = None  # as saved at the end of the last tick
        self.routing = GatewayStep(deps.gateway) if deps.gateway is not None else None
        self.agent_mig: dict[str, Any] = {}  # slot -> its agent's last `mig` status (/v1/fleet)
        self.reach = ReachWatch()  # says once when a target goes out of reach (loop/tick/reach.py)
        self.fast = False  # the tick under way is a fast one (core/rollout/fast_path.py)
        self.last_obs: Observation | None = None  # what the last tick observed (loop/service/ready_watch.py)
        self.pool = PoolStep(policy, deps.provider, deps.store, deps.transport, deps.contact, deps.clock)
        self.layouts = LastLayout()  # layout_from_plan, the tick before's answer kept (loop/tick/last_layout.py)
        self.renames = Renames()  # the applied servers under the gateway's names, kept (core/routing/routes.py)
        self.standing: Standing | None = None  # the last forecast, while the layout planned for it stands

    def current_state(self) -> ControllerState:
        """The cross-tick state as the last tick saved it (the status server reads this)."""
        return self._saved if self._saved is not None else self.store.load_state()

    # -- the tick ---------------------------------------------------------------------------------
    def tick(self, fast: bool = False) -> TickReport:
        """One full tick; a failure is recorded in the report (and the store), never raised.
        `fast`: a tick the fast path asked for, which only adds capacity (core/rollout/fast_path.py)."""
        start = self.deps.clock()
        report = TickReport(self.store.begin_tick(start), start, fast=fast)
        self.fast = fast
        d = self.deps  # the policy may have been reloaded, a dependency replaced (a fence); listed afresh
        self.pool = replace(self.pool, policy=self.policy, provider=d.provider, transport=d.transport, _members=None)
        # every line logged during the tick names it (--log-format json); the cyclic collector waits
        # for the tick's end (loop/tick/collect.py: a fifth of a steady tick's CPU at 2,000 instances)
        with logs.tick_context(report.tick), held_off():
            return self._tick(report, start)

    def _tick(self, report: TickReport, start: float) -> TickReport:
        try:
            self.state = self.store.load_state()
        except StateError as exc:  # never overwrite a state this version cannot read
            report.ok, report.error = False, f"StateError: {exc}"
            report.outcome.error("tick", f"tick failed: {report.error}")
            self.record(report, save=False)
            return report
        try:
            obs = self.last_obs = self.adopt(self.observe(start))
            orphans = self.sync(obs)
            obs = self.interrupted(obs, report)
            report.ready_servers, report.agent_errors = agent_facts(obs.statuses, self.deps.contact)
            plans = self.plans(obs.now)
            planned = self.forecast(obs, report) if plans else self._standing(obs, report)
            report.latency_p99_ms = worst_p99(obs.statuses)
            corrections = self.guard(report.latency_p99_ms)
            self.converge(obs, orphans, planned, corrections, report, plans=plans)
            if not self.fast:  # refilling is a normal tick's work (loop/steps/pool_step.py)
                report.warm_pool = self.refill_pool(report)
            self.route(obs, report)
        except (ProviderError, TransportError) as exc:
            report.ok, report.error = False, f"{type(exc).__name__}: {exc}"
            report.outcome.error("provider", f"tick aborted: {report.error}")
            self._aborted_by(exc, start)
        except NotLeader as exc:  # the lease ran out mid-tick: what is not done yet waits for the next leader
            report.ok, report.error = False, str(exc)
            report.outcome.error("leader", f"tick stopped: {exc}")
        except TooManyInstances as exc:  # rates far past what the policy allows: the fleet stays as it is
            report.ok, report.error = False, f"plan refused: {exc}"
            report.outcome.error("plan", report.error)
        except Exception as exc:  # a bug or bad planner input: record it, keep the loop alive
            log.exception("tick %d failed", report.tick)
            report.ok, report.error = False, f"{type(exc).__name__}: {exc}"
            report.outcome.error("tick", f"tick failed: {report.error}")
        report.wake_at = self._wake(start, report.settling)
        self.record(report)
        return report

    def refill_pool(self, report: TickReport) -> PoolReport | None:
        """The warm pool kept at its target (loop/steps/pool_step.py); an advisory run's controller
        publishes what this would change instead (loop/tick/advisory.py)."""
        return self.pool.refill(report.outcome)

    def _aborted_by(self, exc: ProviderError | TransportError, now: float) -> None:
        """A listing that was throttled or refused backs off the provider's mutations too."""
        if isinstance(exc, ProviderError) and exc.decision.retry is Retry.BACKOFF:
            self.state = replace(self.state, backoff=self.state.backoff.failed(now, f"{exc.kind}: {exc}"))

    def _wake(self, now: float, settling: bool) -> float | None:
        """An early tick for instances due to finish booting, or for make-before-break work."""
        sc = self.policy.scaling
        records = self.store.open_records()
        booting = [r.created_at for r in records if r.state in BOOTING]
        due = self._drains_due(records)
        warm = [r for r in records if r.state in BOOTING and r.key in self.pool.started]
        self.pool = replace(self.pool, started=frozenset(r.key for r in warm))
        due += [r.created_at + sc.warm_pool.warm_boot_s for r in warm]  # a started pool member is up sooner
        return next_wake(now, booting, sc.boot_s, sc.settle_s, settling, due)

    def _drains_due(self, records: Sequence[Record]) -> list[float]:
        """With a gateway, a going instance's drain must begin drain_timeout_s before the cloud
        takes it (going_away.taken_soon): a tick then, whatever the interval."""
        if self.routing is None:
            return []
        lead = self.policy.gateway.drain_timeout_s
        return [r.leaves_at - lead for r in records if r.state is State.GOING_AWAY and r.leaves_at is not None]

    def observe(self, now: float) -> Observation:
        """The provider's instances, the agents' status, the rates (loop/tick/observe.py)."""
        obs, self.state = observe(self.deps, self.policy, self.routing, self.state, now)
        self.agent_mig = {slot: st.mig for slot, st in obs.statuses.items() if st.mig is not None}
        return obs

    def adopt(self, obs: Observation) -> Observation:
        """Instances no record knows (a fresh state file) are taken as they run, before any diff
        (loop/tick/adopt_step.py)."""
        out = adopt_step(self.deps, self.policy, self.judge, self.state, obs)
        self.state = out.state
        return out.obs

    def sync(self, obs: Observation) -> list[Instance]:
        """Lifecycle transitions implied by the observation; returns orphan instances."""
        agents_ok = frozenset(s for s, st in obs.statuses.items() if st.running)
        records = self.store.open_records()
        inp = SyncInput(
            records,
            list(obs.instances.values()),
            self.store.closed_among(unclaimed(obs.instances.values(), records)),
            agents_ok,
            self.deps.contact,
        )
        changes, orphans = sync(inp, obs.now)
        self.store.apply(changes)
        for ch in changes:
            log.info(
                "%s#%d %s -> %s (%s) %s",
                ch.record.slot,
                ch.record.attempt,
                ch.before,
                ch.record.state,
                ch.reason,
                ch.detail,
            )
        self.state = remember_agents(self.state, self.store.open_records(), agents_ok, obs.now)
        return orphans

    def interrupted(self, obs: Observation, report: TickReport) -> Observation:
        """Notices -> GOING_AWAY transitions (lifecycle.going_away), persisted before the messages
        are deleted, so a crash in between only replays them; reconcile then replaces those
        instances in this tick's diff. Every notice read is deleted once handled. The going
        instances' agent answers are dropped from the observation: their servers carry their
        slots' names and must not pass for the replacements'."""
        if not obs.notices:
            return obs
        changes = going_away(self.store.open_records(), obs.notices, obs.now)
        self.store.apply(changes)
        for ch in changes:
            log.warning("%s#%d going away (%s): %s", ch.record.slot, ch.record.attempt, ch.reason, ch.detail)
            report.notes.append(f"{ch.record.slot} going away: {ch.reason} {ch.detail}".rstrip())
        for n in obs.notices:
            if n.kind == "malformed":
                report.outcome.error("interruptions", f"malformed interruption message deleted: {n.detail}")
        assert self.deps.interruptions is not None
        self.deps.interruptions.done(obs.notices)
        gone = {ch.record.slot for ch in changes}
        return replace(obs, statuses={s: st for s, st in obs.statuses.items() if s not in gone})

    def plans(self, now: float) -> bool:
        """Whether this tick forecasts and plans (scaling.plan_on). With `interval`, an early tick
        (settle_s, a boot or drain due, a spot warning) less than interval_s after the last tick
        that planned carries the rollout on to the standing layout instead: its forecast would move
        by a few seconds of rates, and a fresh plan may redirect moves still under way. A
        fast tick plans (it has a burst to answer), and so does the first tick of a process (no
        standing forecast in hand: a restart or a new leader) and one whose clock went back."""
        if self.policy.scaling.plan_on == "tick" or self.fast or self.standing is None:
            return True
        since = now - self.standing.at
        return not 0 <= since < self.policy.scaling.interval_s - 1e-6

    def _standing(self, obs: Observation, report: TickReport) -> dict[str, float]:
        """An early tick that does not plan (`plans`): the report shows the standing forecast
        (what the layout in force was planned for), the rates read now, and the rates the
        layout was planned for are what a re-plan after a capacity error plans for."""
        assert self.standing is not None
        self.standing.show(report)
        _reading(obs, report)
        return dict(self.standing.forecast)

    def forecast(self, obs: Observation, report: TickReport) -> dict[str, float]:
        """Rate to plan for per workload (tuning.planned_rates), shown in the report and kept in
        the store's rate history for the forecasts of later ticks."""
        sc = self.policy.scaling
        out = planned_rates(self.policy, self.store, self.state.headroom, obs, self.deps.contact)
        tuned = out.tuned
        self.state = replace(self.state, headroom=tuned.state)
        report.headroom, report.forecast_error, report.attainment = tuned.headroom, tuned.errors, tuned.attainment
        report.burst_floor, report.headroom_quantile, report.ramp_floor = tuned.floor, tuned.level, tuned.ramp
        report.periods, report.ahead = {w: [p.period_s for p in ps] for w, ps in out.periods.items()}, out.ahead
        report.recent_errors = out.recent_errors
        report.reach = self.reach.update(self.policy, self.store, obs.now, tuned.headroom, tuned.attainment)
        report.forecast = out.rates
        _reading(obs, report)
        self.store.add_rates(
            obs.now, obs.reading.fresh, out.rates, keep_s=max(86400.0, sc.seasons * sc.season_s + 3600.0)
        )
        self.standing = None if self.fast else Standing.of(obs.now, report)
        return out.rates

    def guard(self, p99: dict[str, float]) -> dict[str, float]:
        """SLO guard: p99 above the SLO for 3 ticks raises that workload's correction factor."""
        state, events = guard_update(self.state.slo_guard, p99, {w.name: w.slo_ms for w in self.policy.workloads})
        for ev in events:
            log.warning("SLO guard: %s correction %.3f -> %.3f (%s)", ev.workload, ev.old, ev.new, ev.why)
        self.state = replace(self.state, slo_guard=state)
        return dict(state.corrections)

    # -- plan, diff, act --------------------------------------------------------------------------
    def converge(
        self,
        obs: Observation,
        orphans: list[Instance],
        planned: dict[str, float],
        corrections: dict[str, float],
        report: TickReport,
        plans: bool = True,
    ) -> None:
        """Plan -> diff -> act; a capacity error marks the type unavailable and re-plans this tick.
        `plans`: False on an early tick that keeps the standing layout (Controller.plans)."""
        previous = self.store.current_layout()
        events = list(report.notes)  # what happened before planning (instances going away)
        short = inputs.shortfall(obs.reading.rates, ready_capacity(self.store, obs.statuses, self.deps.contact))
        for round_ in range(1, len(offering_prices(self.policy)) + 2):
            report.rounds = round_
            if round_ == 1 and not plans and previous is not None:
                layout, report.decision = previous, "standing: an early tick carries the rollout on (plan_on: interval)"
            else:
                layout, report.decision = self.plan(
                    obs.now, planned, corrections, previous, bool(obs.reading.missing), short=short
                )
            report.layout = layout
            actions = self._diff(layout, obs, orphans)
            self._report_moves(actions, layout, report, events)
            outcome = self.act(obs, actions.actions, report)
            report.notes.extend(n for n in outcome.notes if n not in report.notes)
            if not outcome.capacity:
                return
            self._mark_unavailable(outcome.capacity, obs.now)
            report.outcome.capacity.clear()

    def _report_moves(self, actions: Diff, layout: Layout, report: TickReport, events: list[str]) -> None:
        """The diff's account of the moves, and the capacity before the change for the next tick.
        `events`: what happened before planning (instances going away)."""
        unplaced = [f"unplaced {u.workload}: {u.reason}" for u in layout.unplaced]
        report.notes = events + list(actions.notes) + unplaced
        report.settling = actions.settling
        report.draining = sorted(actions.draining)
        report.breaches = [b.to_json() for b in actions.breaches]
        report.converged = actions.converged
        report.surge_slots = sorted(actions.surge_slots)
        report.bursts = sorted(actions.bursts)
        self.state = replace(self.state, rollout_baseline=actions.baseline)

    def plan(
        self,
        now: float,
        planned: dict[str, float],
        corrections: dict[str, float],
        previous: Layout | None,
        missing: bool,
        short: Mapping[str, float] | None = None,
    ) -> tuple[Layout, str]:
        """Hold plan, or the target plan once a cheaper one has held; the layout is saved first.
        `short`: the workloads whose observed rate is above their ready capacity, by how much (the
        booting slots go to them first: slots.match_slots)."""
        current = layout_to_plan(previous) if previous else None
        planned = no_less(planned, previous.rates) if self.fast and previous else planned
        caps = self.caps(now)
        held_rates = hold_rates(planned, previous.rates) if previous else dict(planned)
        q = _Question(
            planner=self.deps.planner,
            policy=self.policy,
            corrections=corrections,
            caps=caps,
            current=current,
            now=now,
            planned=planned,
            held_rates=held_rates,
            previous=previous,
        )
        chosen, rates, why = self._waiting(q, missing) or self._chosen(q, missing)
        inp = layout_input(
            self.policy,
            self.store,
            previous,
            rates,
            self.judge,
            self.deps.model_root,
            short=short,
            warm=self.pool.started,
        )
        layout = self.layouts(chosen, inp)
        self._save_layout(layout, previous, why, now)
        return layout, why

    def _chosen(self, q: _Question, missing: bool) -> tuple[Plan, dict[str, float], str]:
        """The plan to lay out, the rates it is for and why: the adopted fleet held, the target
        plan, or the hold plan while a cheaper target waits out scale_down_delay_s."""
        target = q.ask(q.planned)
        adopted = self._adopted(q.now, target, q.previous, missing)
        if adopted is not None:
            return adopted[0], q.planned, adopted[1]
        if q.held_rates == q.planned:
            self.state = replace(self.state, cheaper_since=None)
            why = "target: no rate fell below the current layout's" if q.previous else "target: first plan"
            return target, q.planned, why
        held = q.ask(q.held_rates)
        choice = choose(
            q.now,
            target.cost_per_hour,
            held.cost_per_hour,
            self.state.cheaper_since,
            self.policy.scaling.scale_down_delay_s,
            missing,
            places=newly_placed((u.workload for u in target.unplaced), (u.workload for u in held.unplaced)),
        )
        self.state = replace(self.state, cheaper_since=choice.cheaper_since)
        chosen, rates = (target, q.planned) if choice.use == "target" else (held, q.held_rates)
        return chosen, rates, f"{choice.use}: {choice.why}"

    def _waiting(self, q: _Question, missing: bool) -> tuple[Plan, dict[str, float], str] | None:
        """The hold plan, where a cheaper target is still waiting out scale_down_delay_s, told
        without making the target plan; None: `_chosen` decides, as it always can.

        While a scale-in waits (most ticks of a fleet whose rates wander: the hold rates keep
        each workload's highest), `choose` reads the target plan only as "cheaper than the hold
        plan" and whether it places what the hold plan leaves out. A cost the target surely does
        not exceed (Deps.bound: the plan that keeps placements, planner.api.cost_ceiling) says
        the first, and a hold plan that places everything the second; then `choose` gives what it
        gives with the target itself, and the fresh plan under the target (0.08 s of CPU a tick at
        1,000 workloads) is not made. Anything else (no bound, the wait is over, a plan refused)
        leaves the decision to `_chosen`, which asks as before."""
        bound, delay = self.deps.bound, self.policy.scaling.scale_down_delay_s
        since = self.state.cheaper_since
        if bound is None or q.previous is None or q.previous.planner == ADOPTED_PLANNER or missing:
            return None
        if q.held_rates == q.planned or q.now - (q.now if since is None else since) >= delay:
            return None
        try:
            held = q.ask(q.held_rates)
            ceiling = None if held.unplaced else q.bound(bound)
        except (TooManyInstances, ValueError):  # `_chosen` asks for the target first, and reports its refusal
            return None
        if ceiling is None or not ceiling < held.cost_per_hour - 1e-9:
            return None
        choice = choose(q.now, ceiling, held.cost_per_hour, since, delay, missing)
        self.state = replace(self.state, cheaper_since=choice.cheaper_since)
        return held, q.held_rates, f"{choice.use}: {choice.why}"

    def _adopted(self, now: float, target: Plan, previous: Layout | None, missing: bool) -> tuple[Plan, str] | None:
        """While the layout is the fleet a fresh start adopted, a cheaper target waits out
        scale_down_delay_s with that fleet held as it runs (core/fleet/adopt.py hold_adopted);
        None once a plan of its own replaced it."""
        if previous is None or previous.planner != ADOPTED_PLANNER:
            return None
        delay = self.policy.scaling.scale_down_delay_s
        hold = hold_adopted(now, target, previous, self.state.cheaper_since, delay, missing)
        self.state = replace(self.state, cheaper_since=hold.cheaper_since)
        return (layout_to_plan(previous), f"hold: {hold.why}") if hold.held else (target, f"target: {hold.why}")

    def _save_layout(self, layout: Layout, previous: Layout | None, kind: str, now: float) -> None:
        if previous is None or _signature(layout) != _signature(previous):
            self.state = replace(self.state, plan_generation=self.state.plan_generation + 1)
            log.info("new layout: %d slot(s), %.2f/h (%s)", len(layout.slots), layout.cost_per_hour, kind)
        self.store.save_layout(layout, kind, now)

    def view(
        self, obs: Observation, orphans: list[Instance], names: GatewayNames | None = None, layout: Layout | None = None
    ) -> FleetView:
        """The fleet for reconcile (loop/tick/fleet_view.py): what is serving now. `names`: the
        gateway's names of the applied servers, where the caller has them already. The newest
        attempts read are those of the slots a launch may name: `layout`'s and the open records'
        (a surge slot's new name has none: the store's slot tops put it above every name used)."""
        records = self.store.open_records()
        inp = ViewInput(
            records=records,
            applied_all=self.store.applied(),
            max_attempt=self.store.max_attempts(
                {r.slot for r in records} | {s.slot for s in (layout.slots if layout else ())}
            ),
            slot_tops=self.store.slot_tops(),
            orphans=[(i.slot, i.id) for i in orphans],
            prices=offering_prices(self.policy),
            state=self.state,
            contact=self.deps.contact,
            names=(names if names is not None else self._gateway_names()) if obs.gateway is not None else None,
        )
        return fleet_view(obs, inp)

    def _diff(self, layout: Layout, obs: Observation, orphans: list[Instance]) -> Diff:
        """reconcile.diff; with a gateway, make-before-break goes through it (GatewayStep.gated_diff):
        a server leaves its agent's assignment, and a going instance the fleet, only once the
        gateway has drained it, and the servers reconcile lets go (`Diff.draining`: their
        successors serve already) begin draining, which the drain book in the controller state
        remembers across ticks."""
        names = self._gateway_names() if self.routing is not None else None  # read once for both (thousands of servers)
        view = self.view(obs, orphans, names, layout)
        limits = inputs.limits(
            self.policy, self.store, self.judge, contact=self.deps.contact, gated=self.routing is not None
        )
        if self.routing is None or names is None:
            out = diff(layout, view, obs.now, limits)
        else:
            book = self.state.gateway_drains
            out, after = self.routing.gated_diff(
                layout, view, obs.now, limits, names, book, self.policy.gateway.drain_timeout_s
            )
            if self.fast:  # drains under way go on; a fast tick begins none
                after = self.routing.drain(frozenset(book), book, obs.now)
            self.state = replace(self.state, gateway_drains=after)
        return replace(out, actions=tuple(additive(out.actions, view.applied))) if self.fast else out

    def _gateway_names(self) -> GatewayNames:
        return fleet_names(self.store.open_records(), self.store.applied(), self.renames)

    def route(self, obs: Observation, report: TickReport) -> None:
        """The gateway follows what the agents were told to run this tick (see gateway_step)."""
        if self.routing is None:
            return
        applied_all = self.store.applied()
        fleet = live_records(self.store.open_records(), applied_all)
        report.gateway = self.routing.route_fleet(
            layout=report.layout,
            names=fleet_names(fleet.serving, applied_all, self.renames),
            applied=fleet.applied,
            asked=frozenset(obs.statuses),
            ready=agent_ready(fleet, obs, contact=self.deps.contact),
        )
        if report.gateway.error:
            report.outcome.error("gateway", f"gateway: {report.gateway.error}")
        for message in report.gateway.failed:
            report.outcome.error("gateway", f"gateway: {message}")
        report.notes.extend(f"gateway: {m} waits for its connections to close" for m in report.gateway.deferred)
        report.settling = report.settling or self.routing.settling(report.gateway)

    def act(self, obs: Observation, actions: tuple[Any, ...], report: TickReport) -> Outcome:
        agent_gen = {s: st.assignment_generation or 0 for s, st in obs.statuses.items()}
        # a launch starts a stopped warm-pool member where there is one; a scale-in refills the pool
        actions = self.pool.reuse(self.pool.assign(actions), self.state.quarantined)
        actuator = Actuator(
            store=self.store,
            provider=self.deps.provider,
            transport=self.deps.transport,
            instances=obs.instances,
            assignment_generation=agent_gen,
            default_port_base=self.policy.agents.server_base_port,
            state=self.state,
            tick=report.tick,
            clock=self.deps.clock,
            outcome=report.outcome,
            host_override=self.policy.agents.host_override,
            max_concurrency=self.policy.agents.max_concurrency,
            deadline_s=agent_deadline_s(self.policy.agents),
            answered=frozenset(obs.statuses) if self.deps.contact else None,  # the silent are sent nothing
        )
        outcome = actuator.run(actions)
        self.state = actuator.state
        self.pool = replace(self.pool, started=self.pool.started | set(outcome.warm_started))
        return outcome

    def caps(self, now: float) -> dict[str, int]:
        """Per offering that reported no capacity lately, the instances it may keep (inputs.caps)."""
        return inputs.caps(self.store, self.state.unavailable, now)

    def _mark_unavailable(self, offerings: list[str], now: float) -> None:
        until = {t: e for t, e in self.state.unavailable.items() if e > now}
        for t in offerings:
            until[t] = now + self.policy.provider.unavailable_s
            log.warning(
                "%s has no capacity: unavailable until +%.0f s; re-planning", t, self.policy.provider.unavailable_s
            )
        self.state = replace(self.state, unavailable=until)

    # -- record -----------------------------------------------------------------------------------
    def record(self, report: TickReport, save: bool = True) -> None:
        """Save the tick's state (once per tick) and its report."""
        end = self.deps.clock()
        report.duration_s = max(0.0, end - report.now)
        report.overrun = report.duration_s > self.policy.scaling.interval_s / 2
        if report.overrun:
            log.warning("tick %d took %.1f s, more than half of scaling.interval_s", report.tick, report.duration_s)
        if save:
            self.store.save_state(self.state)
            self._saved = self.state
            report.quarantined = {k: q.reason for k, q in self.state.quarantined.items()}
            report.backoff_until = self.state.backoff.until if self.state.backoff.active(end) else None
        self.store.prune_applied({r.key for r in self.store.open_records()})
        self.store.end_tick(report.tick, end, report.ok, report.summary(), keep_s=self.policy.state.history_s)
        level = logging.INFO if report.ok else logging.ERROR
        log.log(
            level,
            "tick %d: %s; %d action(s) done, %d failed%s",
            report.tick,
            report.decision or report.error,
            len(report.outcome.done),
            len(report.outcome.failed),
            "; " + "; ".join(report.notes) if report.notes else "",
        )

    def set_policy(self, policy: Policy) -> None:
        self.policy = policy
        self.judge = server_judge(policy)


@dataclass(frozen=True, slots=True, kw_only=True)
class Standing:
    """The last forecast that was planned for (scaling.plan_on: interval), shown by the early
    ticks that keep its layout: when it was made, the rates planned for (`forecast`), and what its
    report said of them (the forecast errors and periods found are measured by a forecast, so
    they are not)."""

    at: float
    forecast: Mapping[str, float]
    headroom: Mapping[str, float]
    attainment: Mapping[str, float | None]
    burst_floor: Mapping[str, float]
    headroom_quantile: Mapping[str, float]
    ramp_floor: Mapping[str, float]
    reach: Mapping[str, Any]

    @classmethod
    def of(cls, now: float, report: TickReport) -> Standing:
        return cls(at=now, **{name: getattr(report, name) for name in _SHOWN})

    def show(self, report: TickReport) -> None:
        for name in _SHOWN:
            setattr(report, name, dict(getattr(self, name)))


def _reading(obs: Observation, report: TickReport) -> None:
    """The rates read this tick, those missing and the source's error, in the report."""
    if obs.reading.error:
        report.outcome.error("rates", obs.reading.error)
    report.observed, report.missing = dict(obs.reading.rates), sorted(obs.reading.missing)


_SHOWN = ("forecast", "headroom", "attainment", "burst_floor", "headroom_quantile", "ramp_floor", "reach")


@dataclass(frozen=True, slots=True, kw_only=True)
class _Question:
    """What one tick asks the planner, for the target (`planned`) and the hold rates."""

    planner: PlanFn
    policy: Policy
    corrections: Mapping[str, float]
    caps: Mapping[str, int]
    current: Plan | None
    now: float
    planned: dict[str, float]
    held_rates: dict[str, float]
    previous: Layout | None

    def ask(self, rates: Mapping[str, float]) -> Plan:
        return self.planner(self.policy, rates, self.corrections, self.caps, self.current)

    def bound(self, fn: BoundFn) -> float | None:
        """`fn`'s ceiling on the target plan's cost (Deps.bound)."""
        return fn(self.policy, self.planned, self.corrections, self.caps, self.current)


def _signature(layout: Layout) -> tuple[Any, ...]:
    return tuple((s.slot, s.instance_type, tuple(sorted(v.agent_key() for v in s.servers))) for s in layout.slots)
