"""Advisory mode (`igniter run --advisory`): watch the autoscaler's decisions before it controls
anything, beside the autoscaler (or the people) that do.

Every tick reads the real fleet and rates as a leader does (list instances, agents' status, the
gateway's stats, the rate source: read-only calls), plans and diffs, and then publishes what it
would do instead of doing it: launches, terminations, drains, each agent's assignment, and the
gateway's changes (servers added, weights, drains), and the warm pool's (members it would launch,
stop, terminate). Nothing it calls can change the fleet:

- AdvisoryController.act records the diff's actions and runs no actuator; its refill_pool records
  the warm pool's refill (PoolStep.planned) and calls nothing;
- the provider, the transport and the gateway are wrapped in adapters that let an explicit list of
  reads through (list_instances, pool_members, host_keys; status; observe) and record and refuse
  every other call (AdvisoryRefusal), with no pass-through: the gateway's `route` computes the
  operations it would send (route_ops) and sends none; `ensure` (start, reload) and
  `clear_maxima` do nothing;
- under the adapters, the provider's and the rate source's AWS clients refuse every request that
  is not a Describe, Get or List as it is sent (refuse_aws_writes): RunInstances, StopInstances,
  StartInstances, TerminateInstances, CreateTags never leave the process, whatever calls them;
- it takes no lease (it needs none and holds none back), reads no interruption queue (receiving a
  message would hide it from the autoscaler that must act on it; AdvisoryController refuses one),
  so it never deletes a notice; writes no sample model, and keeps its own state file and host-key
  pins. The fast path, event ticks and the gateway keeper run only on a leader: never here.

Its state file holds its own view, adopted as a fresh start adopts the fleet (core/fleet/adopt.py:
the instances' tags, what each agent runs, the gateway's servers), so it advises the changes a
leader would make from here, not the fleet's whole assignment again.
"""

from __future__ import annotations

import functools
import inspect
import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, NoReturn

from autoscaler.core.rollout.actions import Configure, Drain, Launch, Terminate
from autoscaler.core.routing.routes import GatewayView, Route, describe, route_ops
from autoscaler.fleet.base import Instance, Provider
from autoscaler.leader.base import NotLeader
from autoscaler.loop.steps.actuator import Outcome
from autoscaler.loop.steps.pool_step import PoolReport
from autoscaler.loop.tick.controller import Controller, Deps
from autoscaler.loop.tick.records import Observation, TickReport

log = logging.getLogger(__name__)
ROLE = {"role": "advisory", "kind": "none", "owner": "", "holder": "", "token": None, "lease_s": None, "note": ""}


class AdvisoryRefusal(NotLeader):
    """A mutating call an advisory run refused (recorded in the advice, never sent)."""


class Advice:
    """One tick's intended actions, thread-safe (the tick thread adds, the status endpoint reads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: list[dict[str, Any]] = []

    def add(self, item: dict[str, Any]) -> None:
        with self._lock:
            self._items.append(item)

    def take(self) -> list[dict[str, Any]]:
        with self._lock:
            items, self._items = self._items, []
        return items


def action_json(action: Any, obs: Observation) -> dict[str, Any]:
    """A diff action as advice; the instance it would act on where one is known."""
    if isinstance(action, Launch):
        return {
            "action": "launch",
            "slot": action.slot,
            "instance_type": action.instance_type,
            "capacity_type": action.capacity_type,
            "pooled": action.pooled,  # the stopped pool member it would start, if any
            "reason": action.reason,
        }
    if isinstance(action, Terminate):
        return {
            "action": "terminate",
            "slot": action.slot,
            "instance_id": action.instance_id,
            "to_pool": action.to_pool,  # stopped into the warm pool instead, under this name
            "reason": str(action.reason.value),
        }
    if isinstance(action, Drain):
        return {
            "action": "drain",
            "slot": action.slot,
            "instance_id": _instance_of(obs, action.slot),
            "reason": action.reason,
        }
    assert isinstance(action, Configure)
    servers = [
        {
            "name": s.name,
            "workload": s.workload,
            "batch": s.batch,
            "mps_percent": s.mps_percent,
            "gpu_index": s.gpu_index,
        }
        for s in action.servers
    ]
    return {
        "action": "assign",
        "slot": action.slot,
        "instance_id": _instance_of(obs, action.slot),
        "servers": servers,
        "reason": action.reason,
    }


def _instance_of(obs: Observation, slot: str) -> str | None:
    return next((i.id for i in obs.instances.values() if i.slot == slot), None)


class AdvisoryController(Controller):
    """A Controller whose act step publishes the diff's actions instead of carrying them out."""

    def __init__(self, policy: Any, deps: Deps, advice: Advice) -> None:
        if deps.interruptions is not None:  # a receive hides a notice from the leader; a delete loses it
            raise ValueError("advisory mode reads no interruption queue")
        super().__init__(policy, deps)
        self.advice = advice
        refuse_aws_writes(getattr(deps.rates, "source", None), advice)  # CloudWatch: reads only

    def act(self, obs: Observation, actions: tuple[Any, ...], report: TickReport) -> Outcome:
        for action in actions:
            self.advice.add(action_json(action, obs))
        return report.outcome

    def refill_pool(self, report: TickReport) -> PoolReport | None:
        """The warm pool's refill as advice: the members it would launch, stop and terminate."""
        planned = self.pool.planned()
        if planned is None:
            return None
        changes, kept = planned
        for itype in changes.launch:
            self.advice.add({"action": "pool", "change": "launch", "instance_type": itype, "reason": "below target"})
        for iid in changes.stop:
            self.advice.add({"action": "pool", "change": "stop", "instance_id": iid, "reason": "initialised"})
        for iid in changes.terminate:
            self.advice.add({"action": "pool", "change": "terminate", "instance_id": iid, "reason": "over target"})
        return kept


AWS_READS = ("Describe", "Get", "List")  # the AWS operations that change nothing
AWS_HOOK = "igniter-advisory"  # the refusal's id on each client's event emitter
_MISSING = object()


class _ReadOnly:
    """Only the calls named in READS reach `inner`; any other of its methods, called, is recorded
    in the advice and refused (AdvisoryRefusal). Nothing passes through by default: a mutating
    method added to a provider, a transport or a gateway later is refused until listed here."""

    READS: ClassVar[frozenset[str]] = frozenset()
    KINDS: ClassVar[Mapping[str, str]] = {}  # method -> the advice's action kind for a refused call
    DEFAULT_KIND = "refused"

    def __init__(self, inner: Any, advice: Advice) -> None:
        self.inner, self.advice = inner, advice

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name in ("inner", "advice"):
            raise AttributeError(name)
        if name in self.READS:
            return getattr(self.inner, name)  # AttributeError where the inner part lacks it
        if inspect.getattr_static(self.inner, name, _MISSING) is _MISSING:
            raise AttributeError(name)
        return functools.partial(self._refuse, name)

    def close(self) -> None:
        self.inner.close()

    def _refuse(self, name: str, *args: Any, **kwargs: Any) -> NoReturn:
        what = {"action": self.KINDS.get(name, self.DEFAULT_KIND), "call": name, "refused": True}
        what.update(_subject(args, kwargs))
        self.advice.add(what)
        raise AdvisoryRefusal(f"{type(self.inner).__name__}.{name} refused: advisory mode")


def _subject(args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The instance (or slot) a refused call was about, for the advice."""
    first = args[0] if args else next(iter(kwargs.values()), None)
    out: dict[str, Any] = {}
    if isinstance(first, Instance):
        out["instance_id"] = first.id
    elif isinstance(first, str):
        out["instance_id" if first.startswith("i-") else "slot"] = first
    itype = kwargs.get("instance_type", args[1] if len(args) > 1 else None)
    if isinstance(itype, str):
        out["instance_type"] = itype
    return out


class ReadOnlyProvider(_ReadOnly):
    """Listing, the pool's listing and host keys (console output) are read; launch, terminate,
    the pool's launch, stop, start and return, and anything else, are recorded and refused. The
    inner provider's AWS client refuses every request that is not a read as it is sent too
    (refuse_aws_writes), whatever object makes it."""

    READS = frozenset({"list_instances", "pool_members", "host_keys"})
    KINDS: ClassVar[Mapping[str, str]] = {
        "launch": "launch",
        "start_pooled": "launch",
        "terminate": "terminate",
        "pool_launch": "pool",
        "pool_stop": "pool",
        "pool_return": "pool",
    }

    def __init__(self, inner: Provider, advice: Advice) -> None:
        super().__init__(inner, advice)
        refuse_aws_writes(inner, advice)

    def list_instances(self) -> list[Instance]:
        instances: list[Instance] = self.inner.list_instances()
        return instances

    def launch(self, *args: Any, **kwargs: Any) -> Instance:
        self._refuse("launch", *args, **kwargs)

    def terminate(self, *args: Any, **kwargs: Any) -> None:
        self._refuse("terminate", *args, **kwargs)


class ReadOnlyTransport(_ReadOnly):
    """An agent's status is read; an assignment, and anything else, is recorded and refused."""

    READS = frozenset({"status"})
    DEFAULT_KIND = "assign"

    def status(self, instance: Instance) -> dict[str, Any]:
        status: dict[str, Any] = self.inner.status(instance)
        return status

    def apply(self, *args: Any, **kwargs: Any) -> None:
        self._refuse("apply", *args, **kwargs)


class ReadOnlyGateway(_ReadOnly):
    """The gateway is observed (`show stat`, `show servers state`); what routing would change is
    recorded, none of it sent; starting, reloading, reviving, clearing its counters and stopping
    it are the autoscaler's that runs it: ensure and clear_maxima do nothing (every tick calls
    them), anything else is recorded and refused."""

    READS = frozenset({"observe"})
    DEFAULT_KIND = "gateway"

    def ensure(self, spec: Any) -> bool:
        return False  # starting or reloading it is its autoscaler's business

    def observe(self) -> GatewayView:
        view: GatewayView = self.inner.observe()
        return view

    def route(self, desired: Mapping[str, Sequence[Route]], seen: GatewayView) -> tuple[list[Any], list[str]]:
        ops = list(route_ops(desired, seen))
        for op in ops:
            self.advice.add({"action": "gateway", "workload": op.workload, "server": op.name, "change": describe(op)})
        return ops, []

    def apply(self, ops: Sequence[Any]) -> list[str]:
        for op in ops:
            self.advice.add({"action": "gateway", "workload": op.workload, "server": op.name, "change": describe(op)})
        return []

    def clear_maxima(self) -> None:
        return None  # the leader's rate maxima (its burst floor) are not ours to reset

    def stop(self, *args: Any, **kwargs: Any) -> None:
        self._refuse("stop", *args, **kwargs)


def refuse_aws_writes(part: object, advice: Advice) -> bool:
    """Bind `part`'s botocore client (`part.client`, where it has one) to refuse every request
    that is not a read (Describe*, Get*, List*) before it is sent: the floor under the adapters,
    which no code path holding the inner object can get past. True when a client was bound."""
    events = getattr(getattr(getattr(part, "client", None), "meta", None), "events", None)
    if events is None:
        return False
    events.register("before-send", _AwsRefusal(advice), unique_id=AWS_HOOK)
    return True


class _AwsRefusal:
    def __init__(self, advice: Advice) -> None:
        self.advice = advice

    def __call__(self, event_name: str, **kwargs: Any) -> None:
        service, operation = event_name.split(".", 2)[1:]
        if operation.startswith(AWS_READS):
            return None
        self.advice.add({"action": "refused", "call": f"{service} {operation}", "refused": True})
        raise AdvisoryRefusal(f"{service} {operation} refused: advisory mode")


# every kind of advice an item may be (its "action"), as /v1/advice counts them and openapi.py lists them
ADVICE_KINDS = ("launch", "terminate", "drain", "assign", "gateway", "pool", "refused")


def snapshot(items: list[dict[str, Any]], report: TickReport) -> dict[str, Any]:
    """`GET /v1/advice`: what the last tick would have done, by kind, with the layout's cost."""
    counts = {k: sum(1 for i in items if i["action"] == k) for k in ADVICE_KINDS}
    return {
        "mode": "advisory",
        "tick": report.tick,
        "at": report.now,
        "decision": report.decision,
        "cost_per_hour": report.layout.cost_per_hour if report.layout else None,
        "counts": counts,
        "actions": items,
        "ok": report.ok,
        "error": report.error,
    }


def log_advice(advice: dict[str, Any], previous: dict[str, Any] | None) -> None:
    """One summary line per tick; each intended action once more when the advice changed."""
    c = advice["counts"]
    changed = previous is None or [_key(i) for i in previous.get("actions", [])] != [_key(i) for i in advice["actions"]]
    log.info(
        "advice (tick %s%s): would launch %d, terminate %d, drain %d, assign %d agent(s), change the gateway %d "
        "time(s), change the warm pool %d time(s)%s",
        advice["tick"],
        "" if changed else ", unchanged",
        c["launch"],
        c["terminate"],
        c["drain"],
        c["assign"],
        c["gateway"],
        c.get("pool", 0),
        f"; {c['refused']} call(s) refused" if c.get("refused") else "",
    )
    if changed:
        for item in advice["actions"]:
            log.info("advice: would %s", _words(item))


def _key(item: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(sorted((k, str(v)) for k, v in item.items() if k != "reason"))


def _words(item: dict[str, Any]) -> str:
    kind = item["action"]
    if item.get("refused"):
        return f"{item['call']} {item.get('slot') or item.get('instance_id') or ''}".rstrip() + " (called, and refused)"
    if kind == "launch":
        return f"launch {item['slot']} ({item['instance_type']}, {item.get('capacity_type', 'on-demand')}): {item.get('reason', '')}"
    if kind == "gateway":
        return item["change"]
    if kind == "pool":
        return f"{item['change']} a warm pool member {item.get('instance_type') or item.get('instance_id')}: {item['reason']}"

    if kind == "assign":
        names = ", ".join(
            f"{s['name']} ({s['workload']} batch {s['batch']}, {s['mps_percent']:g} %)" for s in item.get("servers", [])
        )
        return f"tell the agent of {item.get('slot') or item.get('instance_id')} to run: {names or 'nothing'}"
    return f"{kind} {item.get('slot') or ''} {item.get('instance_id') or ''}: {item.get('reason', '')}".replace(
        "  ", " "
    )
