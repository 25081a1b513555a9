"""The long-running service behind `igniter run`: APScheduler drives the tick, signals steer it.

- The tick runs every scaling.interval_s (coalesce, max_instances=1, misfire grace of one interval),
  the first one at start, and once more early when a tick asks for it (TickReport.wake_at:
  instances due to finish booting, make-before-break work settling; scaling.settle_s 0 turns it off).
- With an interruption queue, it is checked every scaling.spot.queue_poll_s between ticks, and a
  notice that names instances ticks at once: a spot warning gives two minutes, less than a long
  interval (0 turns the check off: the queue is then read by the ticks only).
- With a local gateway, the leader holds its listening socket and keeps its haproxy running
  (loop/service/keeper.py): a thread blocked on the haproxy's exit starts it again at once, on the same
  socket, with the servers it routed to, and books a tick; clients that connect in between are
  queued by the kernel, not refused.
- The fast path (core/rollout/fast_path.py, loop/service/watch.py): with a gateway, its request counters are
  read every scaling.fast_path.poll_s between ticks, and a workload that outruns its ready capacity
  (or panic_ratio x its planned rate) over the panic window ticks at once, a tick that only adds
  capacity; at most one per min_gap_s, never during a tick, never on a standby.
- Event ticks (loop/service/ready_watch.py): every scaling.ready_watch.poll_s, what the last tick saw not up
  yet is looked at again (an instance running, its agent answering, a server ready, the gateway
  serving it), and what came up ticks at once instead of waiting for the interval; at most one per
  min_gap_s, never during a tick, never on a standby.
- SIGTERM / SIGINT: the tick in progress finishes, then the process exits 0.
- SIGHUP, or a change of the policy file's mtime, reloads the policy before the next tick; an
  invalid policy is rejected with the error logged and the running one stays. Changes to `fleet`,
  `provider`, `agents` or `leader` need a restart (logged); rates, workloads, instance types and
  scaling take effect at once.
- One leader per fleet (leadership.py): a process that does not hold the fleet's lease is a
  standby. It ticks not at all (it acts on nothing and keeps no view of the fleet), says so in its
  log, /healthz and /metrics, and on taking over ticks at once, rebuilding its view from the
  instances' tags as a fresh start does. SIGTERM gives the lease up after the last tick.
"""

from __future__ import annotations

import logging
import math
import signal
import threading
import time
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from apscheduler.schedulers.background import BackgroundScheduler

from autoscaler.config.errors import InputError
from autoscaler.config.policy import Policy, load_policy
from autoscaler.fleet.samples import ensure_local_samples
from autoscaler.leader.base import Fence, LeaseError, NotLeader
from autoscaler.loop.service.keeper import GatewayKeeper
from autoscaler.loop.service.leadership import Leadership
from autoscaler.loop.service.ready_watch import ReadyWatch
from autoscaler.loop.service.skips import quiet_expected_skips
from autoscaler.loop.service.watch import FastWatch
from autoscaler.loop.service.wiring import build_advisory_controller, build_controller, make_leadership, make_rates
from autoscaler.loop.status.app import routes_listing
from autoscaler.loop.status.metrics_policy import PolicyCollector
from autoscaler.loop.status.server import StatusServer, StatusState
from autoscaler.loop.tick.advisory import ROLE as ADVISORY_ROLE
from autoscaler.loop.tick.advisory import AdvisoryController
from autoscaler.loop.tick.advisory import snapshot as advice_snapshot
from autoscaler.loop.tick.controller import Controller

log = logging.getLogger(__name__)
RESTART_SECTIONS = ("fleet", "provider", "agents", "leader")  # `gateway` changes apply at once (a reload)


@dataclass(frozen=True, kw_only=True)
class StatusBind:
    """Where the status endpoint listens, the policy field that said so, and its bearer token."""

    host: str = "127.0.0.1"
    port: int = 9464
    field: str = "scaling.status_listen"
    token: str | None = None


class Service:
    def __init__(self, policy_path: Path, state_path: Path, status: StatusBind | None, advisory: bool = False) -> None:
        self.policy_path = policy_path
        self.state_path = state_path
        self.advisory = advisory  # loop/tick/advisory.py: no lease, and nothing it calls changes the fleet
        self.mtime = _mtime(policy_path)
        policy = load_policy(policy_path)
        self.fence = Fence(time.monotonic)
        self.controller: Controller = (
            build_advisory_controller(policy, state_path)
            if advisory
            else build_controller(policy, state_path, fence=self.fence)
        )
        self.state = StatusState()
        self.leadership: Leadership | None = None
        self.state.metrics.registry.register(PolicyCollector(lambda: self.controller.policy))
        self.stop = threading.Event()
        self.reload_requested = threading.Event()
        self.scheduler: BackgroundScheduler | None = None
        self.ticking = threading.Lock()
        self.booking = threading.Lock()
        self.closing = False
        self.was_standby = False
        gateway = self.controller.deps.gateway
        self.watch = FastWatch(gateway.observe, self.controller.store) if gateway is not None else None
        self.keeper = self._keeper()
        self.last_fast = -math.inf  # when the last fast tick ran
        self.ready_watch = ReadyWatch() if not advisory else None
        self.last_event = -math.inf  # when the last event tick ran
        self.in_tick = False  # a tick (regular, early, fast or event) is under way
        self.ticks_run = 0  # ticks started by this process
        try:
            self.server = self._status_server(status)
            if advisory:
                self.state.set_leader(dict(ADVISORY_ROLE), changed=True)
                log.info("advisory: reads the fleet and publishes what it would do (/v1/advice); changes nothing")
            else:
                self.leadership = make_leadership(policy, self.fence, self._role_changed)
                self._first_attempt()
        except BaseException:
            self._close_parts()
            raise

    def _keeper(self) -> GatewayKeeper | None:
        """A local gateway's keeper (none for a remote one, none in advisory mode)."""
        gateway = self.controller.deps.gateway
        if self.advisory or gateway is None or getattr(gateway, "revive", None) is None:
            return None
        return GatewayKeeper(gateway, lambda: self.fence.held, lambda: self._book_wake(time.time()))

    def _status_server(self, bind: StatusBind | None) -> StatusServer | None:
        if bind is None:
            return None
        try:
            return StatusServer(self.state, bind.port, bind.host, bind.token)
        except OSError as exc:
            raise InputError(
                self.policy_path, bind.field, f"cannot listen on {bind.host}:{bind.port}: {exc.strerror or exc}"
            ) from None

    def _first_attempt(self) -> None:
        """Leader or standby from the start; a lease table that cannot be used is bad input."""
        assert self.leadership is not None
        try:
            self.leadership.attempt(strict=True)
        except LeaseError as exc:
            field = "leader.table" if self.leadership.lease.kind == "dynamodb" else "leader.lock_dir"
            raise InputError(self.policy_path, field, str(exc)) from None
        self.state.set_leader(self.leadership.snapshot(), changed=True)

    def _role_changed(self, leader: bool) -> None:
        """From the lease thread: report the role; a new leader ticks at once, from the tags."""
        assert self.leadership is not None
        self.state.set_leader(self.leadership.snapshot(), changed=True)
        if not leader:
            self.was_standby = True
            if self.keeper is not None and self.controller.deps.gateway is not None:
                self.controller.deps.gateway.close()  # let go of the listening socket: the leader may need the port
            return
        if self.was_standby:
            self._forget_timers()
        self._book_wake(time.time())

    def _forget_timers(self) -> None:
        """A standby taking over starts its timers afresh, as a fresh start does: when each agent
        last answered, and since when a cheaper plan has held, date from when this process last
        led (another leader saw the fleet since), and would replace agents or scale in at once."""
        store = self.controller.store
        store.save_state(replace(store.load_state(), agent_seen={}, cheaper_since=None))

    @property
    def policy(self) -> Policy:
        return self.controller.policy

    def tick_job(self) -> None:
        """One scheduled tick: reload the policy if asked, tick, publish the status snapshot, and
        book the early tick the report asks for (instances due to finish booting, make-before-break
        work settling). The interval job and the early one never overlap: a tick that finds
        another in progress is skipped, since the one running does the same work."""
        if not self.ticking.acquire(blocking=False):
            return  # no beat: a tick that never ends fails /livez's tick-loop check
        try:
            self._full_tick()
        finally:
            self.ticking.release()

    def _full_tick(self) -> None:
        """tick_job's work, with `ticking` held."""
        try:
            self.state.beat(time.time(), self.policy.scaling.interval_s)
            if self.leadership is not None and not self.advisory:
                # Every tick, not only on the lease thread's changes of role: a term that ran out
                # between two renewals (a slow lease call) skips a tick as a standby's, and the late
                # renewal is no change of role to that thread, so /healthz would say standby on.
                self.state.set_leader(self.leadership.snapshot())
            if not self.advisory and not self.fence.held:  # a standby acts on nothing
                return
            self.maybe_reload()
            self._tick(fast=False)
        except Exception:  # never let one tick kill the scheduler thread
            log.exception("tick job failed")
            self.state.metrics.errors.labels("tick").inc()

    def _tick(self, fast: bool) -> None:
        self.in_tick = True
        self.ticks_run += 1
        try:
            report = self.controller.tick(fast=fast)
        finally:
            self.in_tick = False
        self.state.publish(self.controller, report)
        if isinstance(self.controller, AdvisoryController):
            self.state.set_advice(advice_snapshot(self.controller.advice.take(), report))
        self._book_wake(report.wake_at)

    def watch_job(self) -> None:
        """The fast path (core/rollout/fast_path.py): between ticks, a workload whose rate over the panic
        window outruns its ready capacity or panic_ratio x its planned rate ticks at once, as a
        fast tick that only adds capacity; at most one per min_gap_s, none while a tick runs (the
        watcher itself waits for no tick: it skips its read), none on a standby."""
        cfg = self.policy.scaling.fast_path
        if self.watch is None or not cfg.enabled or not self.fence.held or not self.ticking.acquire(blocking=False):
            return
        try:
            now = time.time()
            panics = self.watch.check(now, cfg)
            if panics and now - self.last_fast >= cfg.min_gap_s and self.fence.held:
                self.last_fast = now
                log.warning("fast tick: %s", "; ".join(f"{p.workload} {p.why}" for p in panics))
                self.state.metrics.fast_ticks.inc()
                self._tick(fast=True)
        except Exception:
            log.exception("fast path failed")
        finally:
            self.ticking.release()

    def ready_job(self) -> None:
        """Event ticks (loop/service/ready_watch.py): what came up since the last tick (an instance running,
        its agent answering, a server ready, the gateway serving it) ticks now, a whole regular
        tick; at most one per min_gap_s, none while a tick runs (the watcher then skips its look),
        none on a standby. What the gap holds back ticks at the first look after it. The look
        holds no lock (an agent slow to answer delays no tick); a tick that starts meanwhile sees
        the same, and the event tick is then left out. The fast path's read holds `ticking` for a
        moment: that one is waited for (a second at most)."""
        cfg = self.policy.scaling.ready_watch
        if self.ready_watch is None or not cfg.enabled or not self.fence.held or self.in_tick:
            return
        if time.time() - self.last_event < cfg.min_gap_s:
            return
        ticks = self.ticks_run
        try:
            news = self.ready_watch.news(self.controller, time.time())
        except Exception:
            log.exception("ready watch failed")
            return
        if not news or not self.fence.held or self.in_tick or not self.ticking.acquire(timeout=1.0):
            return
        try:
            if self.ticks_run != ticks:  # a tick ran during the look: it saw what came up
                return
            self.last_event = time.time()
            again = self.ready_watch.fire(news, self.last_event)
            log.info("event tick: %s%s", news.words(), f" (again, not seen since: {again.words()})" if again else "")
            self.state.metrics.event_ticks.inc()
            self._full_tick()
        finally:
            self.ticking.release()

    def poll_job(self) -> None:
        """Between ticks: a notice on the interruption queue ticks now (the notice is kept for that
        tick's receive). A tick already running skips this one; the next poll finds the notice still
        kept and tries again."""
        source = self.controller.deps.interruptions
        try:
            if source is not None and self.fence.held and source.poll():
                self.tick_job()
        except NotLeader as exc:  # the term ran out as the receive was sent: no error, a standby now
            log.info("interruption poll stopped: %s", exc)
        except Exception:
            log.exception("interruption poll failed")

    def _book_wake(self, wake_at: float | None) -> None:
        """Book the early tick, unless the scheduler is shutting down: its shutdown holds the job
        store's lock while it waits for this very tick, so adding a job then would deadlock."""
        with self.booking:
            if wake_at is None or self.scheduler is None or self.closing:
                return
            self.scheduler.add_job(
                self.tick_job, "date", run_date=datetime.fromtimestamp(wake_at), id="wake", replace_existing=True
            )

    def maybe_reload(self) -> bool:
        mtime = _mtime(self.policy_path)
        if not self.reload_requested.is_set() and mtime == self.mtime:
            return False
        self.reload_requested.clear()
        self.mtime = mtime
        try:
            new = load_policy(self.policy_path)
        except InputError as exc:
            log.error("policy reload rejected, the running policy stays: %s", exc)
            self.state.metrics.errors.labels("policy").inc()
            return False
        self._adopt(new)
        return True

    def _adopt(self, new: Policy) -> None:
        old = self.controller.policy
        for section in RESTART_SECTIONS:
            if getattr(old, section) != getattr(new, section):
                log.warning("policy reload: `%s` changed; it takes effect after a restart", section)
        if (new.gateway.kind, new.gateway.hosts) != (old.gateway.kind, old.gateway.hosts):
            log.warning("policy reload: gateway.kind or gateway.hosts changed; it takes effect after a restart")
            new = new.model_copy(update={"gateway": old.gateway})
        new = new.model_copy(update={s: getattr(old, s) for s in RESTART_SECTIONS})
        if new.rates != old.rates or new.workloads != old.workloads:
            self.controller.deps.rates = make_rates(new, self.controller.deps.gateway)
        if not self.advisory:
            ensure_local_samples(new, self.state_path)  # a workload added may need a model
        self.controller.set_policy(new)
        if new.scaling.interval_s != old.scaling.interval_s and self.scheduler is not None:
            self.scheduler.reschedule_job("tick", trigger="interval", seconds=new.scaling.interval_s)
        log.info("policy reloaded from %s", self.policy_path)

    def run(self) -> int:
        """Serve until SIGTERM/SIGINT; returns the exit code."""
        self._signals()
        if self.server is not None:
            self.server.start()
            log.info(
                "status on http://%s:%d (%s%s)",
                self.server.host,
                self.server.port,
                " ".join(routes_listing()),
                "; /v1/* with a bearer token" if self.server.token else "",
            )
        if self.leadership is not None:
            self.leadership.start()
        interval = self.policy.scaling.interval_s
        quiet_expected_skips()  # the watchers' skips are the design (loop/service/skips.py)
        self.scheduler = BackgroundScheduler(
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": max(1, int(interval))}
        )
        self.scheduler.add_job(self.tick_job, "interval", seconds=interval, id="tick", next_run_time=datetime.now())
        fast = self.policy.scaling.fast_path
        if self.watch is not None and fast.enabled:
            self.scheduler.add_job(self.watch_job, "interval", seconds=fast.poll_s, id="fast-path")
        if self.ready_watch is not None:  # the job itself checks `enabled` (a reload may change it)
            self.scheduler.add_job(
                self.ready_job, "interval", seconds=self.policy.scaling.ready_watch.poll_s, id="ready-watch"
            )
        poll_s = self.policy.scaling.spot.queue_poll_s
        if self.controller.deps.interruptions is not None and poll_s > 0:
            self.scheduler.add_job(self.poll_job, "interval", seconds=poll_s, id="interruptions")
        self.scheduler.start()
        if self.keeper is not None:
            self.keeper.start()
        while not self.stop.wait(0.2):
            pass
        log.info("stopping: finishing the tick in progress")
        with self.booking:
            self.closing = True
        self.scheduler.shutdown(wait=True)
        self.close()
        return 0

    def _signals(self) -> None:
        signal.signal(signal.SIGTERM, lambda *_: self.stop.set())
        signal.signal(signal.SIGINT, lambda *_: self.stop.set())
        signal.signal(signal.SIGHUP, lambda *_: self.reload_requested.set())

    def close(self) -> None:
        """After the last tick: give the lease up (a standby takes over at once), then close."""
        if self.server is not None:
            self.server.close()
        self._close_parts()

    def _close_parts(self) -> None:
        leadership = getattr(self, "leadership", None)
        if leadership is not None:
            leadership.stop()
        keeper = getattr(self, "keeper", None)
        if keeper is not None:
            keeper.close()
        self.controller.deps.transport.close()
        if self.controller.deps.gateway is not None:
            self.controller.deps.gateway.close()  # the gateway itself keeps running, as instances do
        self.controller.deps.provider.close()
        self.controller.store.close()


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return time.time()
