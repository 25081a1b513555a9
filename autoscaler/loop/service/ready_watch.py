"""Event ticks (scaling.ready_watch; Service.ready_job runs it): between ticks, a watcher looks at
what is coming up, and the service ticks at once when it sees something the last tick did not.

A tick acts on what it observes, so a part that comes up just after a tick waits up to a whole
interval for the next one: an agent that answers, a server its agent reports ready, a server the
gateway starts sending requests to. Karpenter does not wait for a clock there either: it acts on a
node's registration. The watcher asks only about what is not up yet, as the last tick saw it:

- the instances of booting records (requested, pending, running): the provider's listing (is it
  running now?) and, once it runs and may be contacted, its agent (does it answer?);
- the agents of ready instances that have servers assigned their agents did not report ready;
- with a gateway, one read of it (`show stat`) while a server assigned is not served yet.

A settled fleet costs it nothing. Each thing that came up fires one event tick (`fired`
remembers it until it goes away again), so a difference between what the watcher and a tick see
cannot tick over and over. If the ticks after it still do not see it (the tick's read of that agent
failed, or the tick failed), it fires again after RETRY_S, then twice as long each time up to
RETRY_MAX_S, as a Kubernetes controller requeues a failed item with backoff: one failed read must
not leave a bring-up waiting for the next interval. The service bounds event ticks to one per
min_gap_s, never during a tick, never on a standby, exactly as the fast path's (loop/service/watch.py).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

from autoscaler.core.fleet.lifecycle import BOOTING, Record, State
from autoscaler.core.layout.layout_types import PlannedServer
from autoscaler.fleet.base import Instance
from autoscaler.gateway.base import GatewayError
from autoscaler.loop.steps.gateway_step import fleet_names
from autoscaler.loop.tick.observe import reachable
from autoscaler.loop.tick.records import Observation
from autoscaler.transport.base import AgentStatus, TransportError, parse_status

if TYPE_CHECKING:
    from autoscaler.loop.tick.controller import Controller

log = logging.getLogger(__name__)

RETRY_S = 5.0  # the first re-fire of something the ticks since its event tick did not see
RETRY_MAX_S = 120.0  # the backoff doubles up to this

Applied = Mapping[tuple[str, int], tuple[int, tuple[PlannedServer, ...]]]  # Store.applied


@dataclass(frozen=True, kw_only=True)
class Seen:
    """What is up: instances by id, agents' servers as `<instance id>/<server>`, gateway servers by
    their gateway names (the attempt is in each, so a replacement is not its predecessor)."""

    running: frozenset[str] = frozenset()  # instances the provider lists running
    answered: frozenset[str] = frozenset()  # instances whose agent answers
    ready: frozenset[str] = frozenset()  # servers their agents report ready
    healthy: frozenset[str] = frozenset()  # servers the gateway's check passes
    serving: frozenset[str] = frozenset()  # servers the gateway sends requests to

    def _parts(self) -> dict[str, frozenset[str]]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def __bool__(self) -> bool:
        return any(self._parts().values())

    def items(self) -> frozenset[tuple[str, str]]:
        """(part, name) pairs: `("ready", "i-1/alex-0")`."""
        return frozenset((k, n) for k, v in self._parts().items() for n in v)

    @classmethod
    def of(cls, items: Iterable[tuple[str, str]]) -> Seen:
        parts: dict[str, set[str]] = {f.name: set() for f in fields(cls)}
        for part, name in items:
            parts[part].add(name)
        return cls(**{k: frozenset(v) for k, v in parts.items()})

    def words(self) -> str:
        """For the log line: `running: i-1; ready: i-1/alex-0`."""
        return "; ".join(f"{k}: {', '.join(sorted(v))}" for k, v in self._parts().items() if v)


def seen_by(obs: Observation | None) -> Seen:
    """What a tick observed, in the watcher's terms (nothing before the first tick)."""
    if obs is None:
        return Seen()
    by_slot = {i.slot: i.id for i in obs.instances.values() if i.state == "running"}
    gw = obs.gateway
    return Seen(
        running=frozenset(by_slot.values()),
        answered=frozenset(by_slot[s] for s, st in obs.statuses.items() if st.running and s in by_slot),
        ready=frozenset(
            f"{by_slot[s]}/{n}" for s, st in obs.statuses.items() if s in by_slot for n in st.ready_names()
        ),
        healthy=gw.healthy() if gw is not None else frozenset(),
        serving=gw.serving() if gw is not None else frozenset(),
    )


def agent_seen(statuses: Mapping[str, tuple[Instance, AgentStatus]]) -> tuple[frozenset[str], frozenset[str]]:
    """(instances whose agent answers, their servers ready) from the statuses the watcher read."""
    answered = frozenset(inst.id for inst, st in statuses.values() if st.running)
    ready = frozenset(f"{inst.id}/{n}" for inst, st in statuses.values() for n in st.ready_names())
    return answered, ready


@dataclass(frozen=True, kw_only=True)
class Fired:
    """An event tick run for one thing: when, and how many times before this one."""

    at: float
    retries: int = 0

    def due(self, now: float) -> bool:
        """Fire again: the ticks since did not see it, and the backoff has passed."""
        return now >= self.at + min(RETRY_S * 2**self.retries, RETRY_MAX_S)


class ReadyWatch:
    """The watcher; the controller it looks through is passed in (the service may replace it)."""

    def __init__(self) -> None:
        self.fired: dict[tuple[str, str], Fired] = {}  # what event ticks were run for, while it stays up

    def news(self, ctl: Controller, now: float) -> Seen:
        """What is up now that the last tick did not see, and no event tick was run for (or one
        was, and its backoff has passed)."""
        look = self.look(ctl).items()
        self.fired = {k: f for k, f in self.fired.items() if k in look}  # gone again: it fires when back
        unseen = look - seen_by(ctl.last_obs).items()
        return Seen.of(k for k in unseen if k not in self.fired or self.fired[k].due(now))

    def fire(self, news: Seen, now: float) -> Seen:
        """Remember that an event tick runs for `news` now; returns the part of it that fired
        before (the ticks since did not see it), for the log."""
        again = Seen.of(k for k in news.items() if k in self.fired)
        for k in news.items():
            before = self.fired.get(k)
            self.fired[k] = Fired(at=now, retries=0 if before is None else before.retries + 1)
        return again

    def look(self, ctl: Controller) -> Seen:
        """Ask about what the last tick saw not up yet, and nothing else (see the module's doc)."""
        seen = seen_by(ctl.last_obs)
        records = ctl.store.open_records()
        applied = ctl.store.applied()
        coming = [r for r in records if r.state in BOOTING]
        unready = [r for r in records if r.state is State.READY and not _all_ready(r, applied, seen)]
        known = dict(ctl.last_obs.instances) if ctl.last_obs is not None else {}
        listed = {i.id: i for i in ctl.deps.provider.list_instances()} if coming else known
        running = frozenset(i for r in coming if (i := _running(r, listed)) is not None)
        answered, ready = agent_seen(_statuses(ctl, [*coming, *unready], listed))
        healthy, serving = _gateway(ctl, records, applied, seen)
        return Seen(running=running, answered=answered, ready=ready, healthy=healthy, serving=serving)


def _statuses(
    ctl: Controller, records: Iterable[Record], listed: Mapping[str, Instance]
) -> dict[str, tuple[Instance, AgentStatus]]:
    """The agents of `records` that may be contacted (running, host key pinned, not quarantined)."""
    deps = ctl.deps
    if not deps.contact:
        return {}
    out = {}
    for r in records:
        inst = listed.get(r.instance_id or "")
        if inst is None or inst.state != "running" or not reachable(deps, ctl.state, inst):
            continue
        try:
            out[r.slot] = (inst, parse_status(deps.transport.status(inst)))
        except TransportError as exc:  # the next tick reads it and handles the error
            log.debug("ready watch: agent of %s: %s", r.slot, exc)
    return out


def _gateway(
    ctl: Controller, records: Sequence[Record], applied: Applied, seen: Seen
) -> tuple[frozenset[str], frozenset[str]]:
    """(healthy, serving) among the servers assigned that the last tick did not see served."""
    gateway = ctl.deps.gateway
    if gateway is None:
        return frozenset(), frozenset()
    names = fleet_names(records, applied)
    waiting = frozenset(s.name for servers in names.applied.values() for s in servers) - seen.serving
    if not waiting:
        return frozenset(), frozenset()
    try:
        view = gateway.observe()
    except GatewayError as exc:
        log.debug("ready watch: gateway read failed: %s", exc)
        return frozenset(), frozenset()
    return view.healthy() & waiting, view.serving() & waiting


def _running(rec: Record, listed: Mapping[str, Instance]) -> str | None:
    inst = listed.get(rec.instance_id or "")
    return inst.id if inst is not None and inst.state == "running" else None


def _all_ready(rec: Record, applied: Applied, seen: Seen) -> bool:
    """Every server assigned to it was reported ready to the last tick (none assigned: nothing to wait for)."""
    servers = applied[rec.key][1] if rec.key in applied else ()
    return all(f"{rec.instance_id}/{s.name}" in seen.ready for s in servers)
