"""Advisory mode (`igniter run --advisory`): watch the autoscaler's decisions before it controls
anything, beside the autoscaler (or the people) that do.

Every tick reads the real fleet and rates as a leader does (list instances, agents' status, the
gateway's stats, the rate source: read-only calls), plans and diffs, and then publishes what it
would do instead of doing it: launches, terminations, drains, each agent's assignment, and the
gateway's changes (servers added, weights, drains). Nothing it calls can change the fleet:

- AdvisoryController.act records the diff's actions and runs no actuator;
- the provider, the transport and the gateway are wrapped in adapters whose mutating methods
  record the call and refuse it (AdvisoryRefusal): the gateway's `route` computes the operations
  it would send (route_ops) and sends none; `ensure` (start, reload), `clear_maxima` and `stop`
  do nothing;
- it takes no lease (it needs none and holds none back), reads no interruption queue (receiving a
  message would hide it from the autoscaler that must act on it), writes no sample model, and keeps
  its own state file and host-key pins.

Its state file holds its own view (adopted from the instances' tags, as a fresh start does), so
it advises an assignment for every agent it has not told itself: `assignments` is what each agent
would be told, whatever it runs now.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from autoscaler.core.rollout.actions import Configure, Drain, Launch, Terminate
from autoscaler.core.routing.routes import GatewayView, Route, describe, route_ops
from autoscaler.fleet.base import Instance, Provider
from autoscaler.leader.base import NotLeader
from autoscaler.loop.steps.actuator import Outcome
from autoscaler.loop.tick.controller import Controller, Deps
from autoscaler.loop.tick.records import Observation, TickReport
from autoscaler.transport.base import Transport

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
            "reason": action.reason,
        }
    if isinstance(action, Terminate):
        return {
            "action": "terminate",
            "slot": action.slot,
            "instance_id": action.instance_id,
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
        super().__init__(policy, deps)
        self.advice = advice

    def act(self, obs: Observation, actions: tuple[Any, ...], report: TickReport) -> Outcome:
        for action in actions:
            self.advice.add(action_json(action, obs))
        return report.outcome


class ReadOnlyProvider:
    """Reads pass to the real provider; launch and terminate are recorded and refused."""

    def __init__(self, inner: Provider, advice: Advice) -> None:
        self.inner, self.advice = inner, advice

    def list_instances(self) -> list[Instance]:
        return self.inner.list_instances()

    def launch(self, slot: str, instance_type: str, plan_generation: int, **kwargs: Any) -> Instance:
        self.advice.add({"action": "launch", "slot": slot, "instance_type": instance_type, "refused": True})
        raise AdvisoryRefusal(f"launch {slot} refused: advisory mode")

    def terminate(self, instance_id: str) -> None:
        self.advice.add({"action": "terminate", "instance_id": instance_id, "refused": True})
        raise AdvisoryRefusal(f"terminate {instance_id} refused: advisory mode")

    def close(self) -> None:
        self.inner.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)  # host_keys, console output: reads


class ReadOnlyTransport:
    """An agent's status is read; an assignment is recorded and refused."""

    def __init__(self, inner: Transport, advice: Advice) -> None:
        self.inner, self.advice = inner, advice

    def status(self, instance: Instance) -> dict[str, Any]:
        return self.inner.status(instance)

    def apply(self, instance: Instance, assignment: dict[str, Any]) -> None:
        self.advice.add({"action": "assign", "instance_id": instance.id, "refused": True})
        raise AdvisoryRefusal(f"apply to {instance.id} refused: advisory mode")

    def close(self) -> None:
        self.inner.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class ReadOnlyGateway:
    """The gateway is observed; what routing would change is recorded, none of it sent."""

    def __init__(self, inner: Any, advice: Advice) -> None:
        self.inner, self.advice = inner, advice

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

    def stop(self) -> None:
        raise AdvisoryRefusal("stopping the gateway refused: advisory mode")

    def close(self) -> None:
        self.inner.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def snapshot(items: list[dict[str, Any]], report: TickReport) -> dict[str, Any]:
    """`GET /v1/advice`: what the last tick would have done, by kind, with the layout's cost."""
    kinds = ("launch", "terminate", "drain", "assign", "gateway")
    counts = {k: sum(1 for i in items if i["action"] == k) for k in kinds}
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
        "advice (tick %s%s): would launch %d, terminate %d, drain %d, assign %d agent(s), change the gateway %d time(s)",
        advice["tick"],
        "" if changed else ", unchanged",
        c["launch"],
        c["terminate"],
        c["drain"],
        c["assign"],
        c["gateway"],
    )
    if changed:
        for item in advice["actions"]:
            log.info("advice: would %s", _words(item))


def _key(item: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(sorted((k, str(v)) for k, v in item.items() if k != "reason"))


def _words(item: dict[str, Any]) -> str:
    kind = item["action"]
    if kind == "launch":
        return f"launch {item['slot']} ({item['instance_type']}, {item.get('capacity_type', 'on-demand')}): {item.get('reason', '')}"
    if kind == "gateway":
        return item["change"]
    if kind == "assign":
        names = ", ".join(
            f"{s['name']} ({s['workload']} batch {s['batch']}, {s['mps_percent']:g} %)" for s in item.get("servers", [])
        )
        return f"tell the agent of {item.get('slot') or item.get('instance_id')} to run: {names or 'nothing'}"
    return f"{kind} {item.get('slot') or ''} {item.get('instance_id') or ''}: {item.get('reason', '')}".replace(
        "  ", " "
    )
