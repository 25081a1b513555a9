"""The fleet benchmarks' fakes (benchmarks/fleet_scale.py, benchmarks/store_size.py): a provider,
transport and gateway that wait as EC2, an agent over SSH and HAProxy's runtime API do, and count
their calls by kind; and `Bench`, one fleet's real Controller over them with a clock that moves an
interval per tick.

The same file drives the code of an older revision (fleet_scale.py runs it from an exported tree):
the imports try today's module paths first and fall back to those of the flat autoscaler/loop/
before issue 50 moved it into rooms. Nothing else differs between the two: the fakes subclass the
revision's own FakeProvider, FakeTransport and FakeGateway.

The provider declares EC2's `launch_concurrency` (fleet/ec2.py: 8 RunInstances in flight), so a
run of launches goes out as it would to EC2 (loop/steps/launches.py), each call still waiting its
150 ms; FakeProvider's lock keeps its instances and id counter whole under those threads. Code
from before concurrent launches (2c6ca41, the benchmark's default old revision) ignores the
attribute and launches one at a time, as it did against EC2.
"""

from __future__ import annotations

import contextlib
import random
import resource
import threading
import time
from collections import Counter
from typing import Any

from autoscaler.config.policy import Policy
from autoscaler.fleet.base import Instance
from autoscaler.fleet.fake import FakeProvider
from autoscaler.gateway.fake import FakeGateway
from autoscaler.rates.reader import RateReader
from autoscaler.rates.static import ManualRates
from autoscaler.transport.base import TransportError
from autoscaler.transport.fake import FakeTransport

try:  # issue 50 item 4's rooms
    from autoscaler.loop.service.wiring import default_planner
    from autoscaler.loop.state.store import Store
    from autoscaler.loop.tick.controller import Controller
    from autoscaler.loop.tick.records import Deps, TickReport

    LAYOUT = "rooms"
except ImportError:  # the flat loop/ of 2c6ca41 and before
    from autoscaler.loop.controller import Controller  # type: ignore[no-redef]
    from autoscaler.loop.store import Store  # type: ignore[no-redef]
    from autoscaler.loop.tick import Deps, TickReport  # type: ignore[no-redef]
    from autoscaler.loop.wiring import default_planner  # type: ignore[no-redef]

    LAYOUT = "flat"

AGENT_S, EC2_S, RUNTIME_S = 0.050, 0.150, 0.001
HANG_EVERY = 100  # one agent in HANG_EVERY answers nothing until its call's deadline
EC2_BATCH = 1000  # ids per TerminateInstances call (EC2's limit)


class Calls:
    """Counts calls by kind, from any thread; `slow` False: no latency (a bring-up's ticks)."""

    def __init__(self) -> None:
        self.lock, self.counts, self.slow = threading.Lock(), Counter[str](), False

    def add(self, kind: str, seconds: float, n: int = 1) -> None:
        with self.lock:
            self.counts[kind] += n
        if self.slow:
            time.sleep(seconds)

    def take(self) -> dict[str, int]:
        with self.lock:
            out, self.counts = dict(self.counts), Counter()
        return dict(sorted(out.items()))


class SlowProvider(FakeProvider):
    """EC2's latency on every call; a batched termination costs one call per EC2_BATCH ids; up to
    EC2's `launch_concurrency` launches in flight at once."""

    calls_by_kind: Calls
    launch_concurrency = 8  # fleet/ec2.py's Ec2Provider.launch_concurrency

    def list_instances(self) -> list[Instance]:
        self.calls_by_kind.add("ec2.describe", EC2_S)
        return super().list_instances()

    def launch(self, slot: str, instance_type: str, plan_generation: int, **kw: Any) -> Instance:
        self.calls_by_kind.add("ec2.run_instances", EC2_S)
        return super().launch(slot, instance_type, plan_generation, **kw)

    def terminate(self, instance_id: str) -> None:
        self.calls_by_kind.add("ec2.terminate", EC2_S)
        super().terminate(instance_id)

    def terminate_many(self, instance_ids: Any) -> dict[str, Any]:
        """TerminateInstances with many ids (used by code that batches; older code calls terminate)."""
        ids = list(instance_ids)
        for k in range(0, len(ids), EC2_BATCH):
            self.calls_by_kind.add("ec2.terminate_batch", EC2_S)
            with getattr(self, "_state_lock", None) or contextlib.nullcontext():  # an older FakeProvider has none
                for iid in ids[k : k + EC2_BATCH]:
                    self.calls.append(("terminate", iid))
                    self._instances.pop(iid, None)
        return {}


class SlowTransport(FakeTransport):
    """An agent call's latency; the agents of `hung` slots answer nothing until the deadline."""

    calls_by_kind: Calls
    deadline_s: float = 0.0
    hung: frozenset[str] = frozenset()

    def _wait(self, instance: Instance, kind: str) -> None:
        if self.calls_by_kind.slow and instance.slot in self.hung:
            self.calls_by_kind.add(kind + ".hung", 0.0)
            time.sleep(self.deadline_s)
            raise TransportError(f"{instance.id}: no answer within {self.deadline_s:g} s (hung)")
        self.calls_by_kind.add(kind, AGENT_S)

    def status(self, instance: Instance) -> dict[str, Any]:
        self._wait(instance, "agent.status")
        return super().status(instance)

    def apply(self, instance: Instance, assignment: dict[str, Any]) -> None:
        self._wait(instance, "agent.apply")
        super().apply(instance, assignment)


class SlowGateway(FakeGateway):
    """A runtime command's latency per operation, and one for each read of the gateway."""

    calls_by_kind: Calls | None = None

    def observe(self) -> Any:
        if self.calls_by_kind is not None:
            self.calls_by_kind.add("gateway.show", RUNTIME_S)
        return super().observe()

    def apply(self, ops: Any) -> list[str]:
        if self.calls_by_kind is not None and ops:
            self.calls_by_kind.add("gateway.command", RUNTIME_S * len(ops), len(ops))
        return super().apply(ops)


def peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


class Bench:
    """One fleet: the controller, its slow fakes and a clock that runs in real time, moved on
    by an interval between ticks."""

    def __init__(self, policy: Policy, store_path: str = ":memory:") -> None:
        self.offset, self.policy, self.calls = 0.0, policy, Calls()
        self.rates = ManualRates({w.name: w.rate_rps for w in policy.workloads})
        provider = SlowProvider(policy.fleet, self.clock)
        self.transport = SlowTransport()
        self.gateway = SlowGateway()
        provider.calls_by_kind = self.transport.calls_by_kind = self.gateway.calls_by_kind = self.calls
        self.transport.deadline_s = policy.agents.connect_timeout_s + policy.agents.command_timeout_s
        self.store = Store(store_path)
        reader = RateReader(self.rates, 300)
        deps = Deps(provider, self.transport, reader, self.store, default_planner, self.clock)
        deps.gateway = self.gateway
        self.provider = provider
        self.controller = Controller(policy, deps)

    def clock(self) -> float:
        return time.time() + self.offset

    def slow(self, on: bool) -> None:
        """Latencies and hung agents on (measured ticks) or off (bring-up). The hung agents are
        every HANG_EVERY-th slot in name order, chosen when they are turned on: a slot's
        replacement hangs as its instance did."""
        self.calls.slow = on
        slots = sorted(i.slot for i in self.provider._instances.values())
        self.transport.hung = frozenset(slots[HANG_EVERY - 1 :: HANG_EVERY]) if on else frozenset()

    def tick(self) -> tuple[TickReport, dict[str, Any]]:
        self.offset += self.policy.scaling.interval_s
        self.calls.take()
        wall, cpu = time.perf_counter(), time.process_time()
        report = self.controller.tick()
        figures = {
            "wall_s": round(time.perf_counter() - wall, 3),
            "cpu_s": round(time.process_time() - cpu, 3),
            "calls": self.calls.take(),
            "peak_rss_mb": peak_rss_mb(),
            "ok": report.ok,
            "actions": len(report.outcome.done),
        }
        return report, figures

    def converge(self, most: int) -> int:
        """Ticks until one did nothing (or `most`)."""
        for n in range(1, most + 1):
            report, _ = self.tick()
            if not report.outcome.done and not report.settling:
                return n
        return most

    def move_rates(self, rng: random.Random, share: float = 0.1, by: float = 0.3) -> None:
        """`share` of the workloads' rates moved by +-`by` (each up or down at random)."""
        names = sorted(self.rates.values)
        for name in rng.sample(names, max(1, round(len(names) * share))):
            self.rates.values[name] = (self.rates.values[name] or 0.0) * rng.choice((1 - by, 1 + by))

    def wander(self, rng: random.Random, base: dict[str, float], step: float = 0.05, band: float = 0.2) -> None:
        """Every rate takes a random step, staying within +-`band` of its base (a day's drift)."""
        for name, b in base.items():
            now = (self.rates.values[name] or b) / b
            self.rates.values[name] = b * min(1 + band, max(1 - band, now + rng.uniform(-step, step)))
