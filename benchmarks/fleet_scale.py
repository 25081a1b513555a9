"""A tick at fleet scale, I/O included (issue 50 item 5): the real Controller over a fake provider,
transport and gateway that wait as the real ones do: 50 ms an agent call, 150 ms an EC2 call, 1 ms
a gateway runtime command, and one agent in 100 hanging until its call's deadline.

Workloads are drawn like ../shared/scenarios/random-1000.yaml (its workloads, cycled with new
names when a fleet needs more of them: about 2.2 workloads an instance on its V100 type). For each
size the fleet is first brought up (ticks until it has converged), then measured:

- a steady tick (rates unchanged) and a re-plan tick (10 % of the workloads' rates moved by
  +-30 %), each the median of `--repeat` runs;
- for each: wall time, CPU (process time: every thread), calls made by kind, and the peak RSS.

Run: nice .venv/bin/python benchmarks/fleet_scale.py --sizes 100 [--out benchmarks/results/fleet_scale.json]

Without --out it prints the figures only. The big sizes (500 to 2,000 instances) need a quiet
machine and minutes each; results written from a loaded machine are not worth quoting.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import resource
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autoscaler.config.policy import Policy, load_policy  # noqa: E402
from autoscaler.fleet.base import Instance  # noqa: E402
from autoscaler.fleet.fake import FakeProvider  # noqa: E402
from autoscaler.gateway.fake import FakeGateway  # noqa: E402
from autoscaler.loop.service.wiring import default_planner  # noqa: E402
from autoscaler.loop.state.store import Store  # noqa: E402
from autoscaler.loop.tick.controller import Controller  # noqa: E402
from autoscaler.loop.tick.records import Deps, TickReport  # noqa: E402
from autoscaler.rates.reader import RateReader  # noqa: E402
from autoscaler.rates.static import ManualRates  # noqa: E402
from autoscaler.transport.base import TransportError  # noqa: E402
from autoscaler.transport.fake import FakeTransport  # noqa: E402

SCENARIO = ROOT.parent / "shared" / "scenarios" / "random-1000.yaml"
WORKLOADS_PER_INSTANCE = 1000 / 460  # random-1000.yaml's first 1,000 workloads take about 460 instances
AGENT_S, EC2_S, RUNTIME_S = 0.050, 0.150, 0.001
HANG_EVERY = 100
DEADLINE = {"connect_timeout_s": 1.0, "command_timeout_s": 2.0}  # a hung agent costs 3 s of its worker


class Calls:
    """Counts calls by kind, from any thread."""

    def __init__(self) -> None:
        self.lock, self.counts = threading.Lock(), Counter[str]()

    def add(self, kind: str) -> None:
        with self.lock:
            self.counts[kind] += 1

    def take(self) -> dict[str, int]:
        with self.lock:
            out, self.counts = dict(self.counts), Counter()
        return out


class SlowProvider(FakeProvider):
    """EC2's latency on every call (a batch call costs one call's latency)."""

    calls_by_kind: Calls

    def list_instances(self) -> list[Instance]:
        self.calls_by_kind.add("ec2.describe")
        time.sleep(EC2_S)
        return super().list_instances()

    def launch(self, slot: str, instance_type: str, plan_generation: int, **kw: Any) -> Instance:
        self.calls_by_kind.add("ec2.run_instances")
        time.sleep(EC2_S)
        return super().launch(slot, instance_type, plan_generation, **kw)

    def terminate(self, instance_id: str) -> None:
        self.calls_by_kind.add("ec2.terminate")
        time.sleep(EC2_S)
        super().terminate(instance_id)


class SlowTransport(FakeTransport):
    """An agent call's latency; one agent in HANG_EVERY answers nothing until the call's deadline."""

    calls_by_kind: Calls
    deadline_s: float = 0.0

    def _wait(self, instance: Instance, kind: str) -> None:
        self.calls_by_kind.add(kind)
        if int(instance.id.rsplit("-", 1)[-1]) % HANG_EVERY == 0:
            time.sleep(self.deadline_s)
            raise TransportError(f"{instance.id}: no answer within {self.deadline_s:g} s (hung)")
        time.sleep(AGENT_S)

    def status(self, instance: Instance) -> dict[str, Any]:
        self._wait(instance, "agent.status")
        return super().status(instance)

    def apply(self, instance: Instance, assignment: dict[str, Any]) -> None:
        self._wait(instance, "agent.apply")
        super().apply(instance, assignment)


class SlowGateway(FakeGateway):
    """One runtime command's latency per operation, one for each read of the gateway."""

    calls_by_kind: Calls | None = None

    def observe(self) -> Any:
        self._wait("gateway.show", 1)
        return super().observe()

    def apply(self, ops: Any) -> list[str]:
        self._wait("gateway.command", len(ops))
        return super().apply(ops)

    def _wait(self, kind: str, n: int) -> None:
        if self.calls_by_kind is not None:
            for _ in range(n):
                self.calls_by_kind.add(kind)
        time.sleep(RUNTIME_S * n)


def workloads(n: int, seed: int) -> list[dict[str, Any]]:
    """`n` workloads drawn from the scenario's (cycled, renamed when more are needed)."""
    base = yaml.safe_load(SCENARIO.read_text())["workloads"]
    rng = random.Random(seed)
    return [{**base[k % len(base)], "name": f"w{k}"} for k in rng.sample(range(max(n, len(base))), n)]


def policy_for(tmp: Path, instances: int, seed: int) -> Policy:
    doc = yaml.safe_load(SCENARIO.read_text())
    doc.update(
        fleet="bench",
        workloads=workloads(round(instances * WORKLOADS_PER_INSTANCE), seed),
        rates={"source": "static"},
        agents={"transport": "local", **DEADLINE},
        gateway={"kind": "haproxy"},
        scaling={"interval_s": 30, "headroom": 0.1, "forecast": "last", "scale_down_delay_s": 0},
    )
    path = tmp / "policy.yaml"
    path.write_text(yaml.safe_dump(doc))
    return load_policy(path)


class Bench:
    """One fleet: the controller, its slow fakes and a clock that runs in real time, moved on
    by an interval between ticks."""

    def __init__(self, policy: Policy) -> None:
        self.offset = 0.0
        self.calls = Calls()
        self.rates = ManualRates({w.name: w.rate_rps for w in policy.workloads})
        provider = SlowProvider(policy.fleet, self.clock)
        provider.calls_by_kind = self.calls
        transport = SlowTransport()
        transport.calls_by_kind, transport.deadline_s = self.calls, sum(DEADLINE.values())
        gateway = SlowGateway()
        gateway.calls_by_kind = self.calls
        deps = Deps(provider, transport, RateReader(self.rates, 300), Store(":memory:"), default_planner, self.clock)
        deps.gateway = gateway
        self.controller = Controller(policy, deps)
        self.policy = policy

    def clock(self) -> float:
        return time.time() + self.offset

    def tick(self) -> tuple[TickReport, dict[str, Any]]:
        self.offset += self.policy.scaling.interval_s
        self.calls.take()
        wall, cpu = time.perf_counter(), time.process_time()
        report = self.controller.tick()
        figures = {
            "wall_s": round(time.perf_counter() - wall, 3),
            "cpu_s": round(time.process_time() - cpu, 3),
            "calls": dict(sorted(self.calls.take().items())),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        }
        return report, figures

    def converge(self, most: int = 12) -> int:
        for n in range(1, most + 1):
            report, _ = self.tick()
            if report.converged and not report.outcome.done:
                return n
        return most

    def move_rates(self, rng: random.Random) -> None:
        """10 % of the workloads' rates moved by +-30 %."""
        names = sorted(self.rates.values)
        for name in rng.sample(names, max(1, len(names) // 10)):
            self.rates.values[name] = (self.rates.values[name] or 0.0) * rng.choice((0.7, 1.3))


def measure(size: int, repeat: int, seed: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        bench = Bench(policy_for(Path(tmp), size, seed))
        bring_up = bench.converge()
        rng = random.Random(seed)
        steady = [bench.tick()[1] for _ in range(repeat)]
        replan = []
        for _ in range(repeat):
            bench.move_rates(rng)
            replan.append(bench.tick()[1])
            bench.converge(4)
        instances = len(bench.controller.deps.provider.list_instances())
    return {
        "size": size,
        "instances": instances,
        "workloads": len(bench.policy.workloads),
        "bring_up_ticks": bring_up,
        "steady": median_of(steady),
        "replan": median_of(replan),
    }


def median_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run of median wall time (its own figures, not a mix of runs), and every run's wall time."""
    ranked = sorted(runs, key=lambda r: r["wall_s"])
    return {**ranked[len(ranked) // 2], "wall_s_runs": [r["wall_s"] for r in runs]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 500, 1000, 2000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)  # the ticks' warnings (hung agents, targets out of reach) are expected
    results = []
    for size in args.sizes:
        results.append(measure(size, args.repeat, args.seed))
        print(json.dumps(results[-1]), flush=True)
    if args.out is not None:
        body = {"latency_s": {"agent": AGENT_S, "ec2": EC2_S, "runtime": RUNTIME_S}, "hang_every": HANG_EVERY}
        args.out.write_text(json.dumps({**body, "deadline": DEADLINE, "results": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
