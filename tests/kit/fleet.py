"""A real local fleet behind a real gateway, for the data-plane tests: the controller with the
local provider (real `igniter-agent run --no-gpu` processes and inference servers), the local
transport and a haproxy on a free loopback port, driven by a plan the test sets; and a load
generator that sends real KServe v2 requests through the gateway from several threads."""

from __future__ import annotations

import os
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from autoscaler.config.policy import Policy, load_policy
from autoscaler.core.routing.routes import GatewayNames
from autoscaler.loop.service.wiring import build_controller
from autoscaler.loop.steps.gateway_step import fleet_names
from autoscaler.loop.tick.controller import Controller
from autoscaler.planner.types import GpuOut, InstanceOut, PlacementOut, Plan
from autoscaler.rates.reader import RateReader
from autoscaler.rates.static import ManualRates
from autoscaler.transport.base import parse_status
from tests.kit import web
from tests.kit.agent import free_port
from tests.kit.control import write_policy

BODY = {"inputs": [{"name": "x", "shape": [1, 8], "datatype": "FP32", "data": [0.125 * i for i in range(8)]}]}
# (instance type, [(gpu index, workload, planned rate)]) per instance
Shape = Sequence[tuple[str, Sequence[tuple[int, str, float]]]]


def make_plan(shape: Shape) -> Plan:
    """A plan with one placement per (gpu, workload, rate); the performance numbers are nominal."""
    gpus = {"p3.2xlarge": 1, "p3.8xlarge": 4}
    instances = []
    for itype, places in shape:
        by_gpu = {
            g: tuple(PlacementOut(w, "alexnet", 4, 20.0, r, 5.0, r * 1.5) for gi, w, r in places if gi == g)
            for g in range(gpus[itype])
        }
        price = 3.06 if itype == "p3.2xlarge" else 12.24
        instances.append(InstanceOut(itype, price, tuple(GpuOut(g, "v100", p) for g, p in by_gpu.items())))
    return Plan("fixed", tuple(instances))


@dataclass
class FixedPlanner:
    """The planner the test sets: `shape` is what every tick plans, whatever the rates."""

    shape: Shape

    def __call__(self, policy: Policy, rates: Any, corrections: Any, caps: Any, current: Any) -> Plan:
        return make_plan(self.shape)


INSTANCE_TYPES = [
    {"name": "p3.2xlarge", "gpu": "v100", "gpus": 1, "price_per_hour": 3.06},
    {"name": "p3.8xlarge", "gpu": "v100", "gpus": 4, "price_per_hour": 12.24},
]


def fleet_policy(
    tmp_path: Path,
    model_dir: Path,
    workloads: Sequence[str],
    *,
    instance_types: Sequence[Mapping[str, Any]] = INSTANCE_TYPES,
    agents: Mapping[str, Any] | None = None,
    scaling: Mapping[str, Any] | None = None,
    **gateway: Any,
) -> Policy:
    """`agents` and `scaling` add to (or override) the sections' test defaults."""
    path = write_policy(
        tmp_path / "policy.yaml",
        fleet=f"gw-{tmp_path.name[-10:].lower().replace('_', '-')}".rstrip("-"),
        instance_types=list(instance_types),
        workloads=[
            {"name": w, "model": "alexnet", "slo_ms": 30, "rate_rps": 50, "model_dir": str(model_dir)}
            for w in workloads
        ],
        provider={"kind": "local", "base_port": free_base(), "state_root": str(tmp_path / "instances")},
        agents={"transport": "local", "command_timeout_s": 30, **(agents or {})},
        scaling={
            "interval_s": 1,
            "settle_s": 0.2,
            "headroom": 0.0,
            "forecast": "last",
            "scale_down_delay_s": 0,
            **(scaling or {}),
        },
        gateway={
            "kind": "haproxy",
            "listen": f"127.0.0.1:{free_port()}",
            "check_interval_s": 0.3,
            "drain_timeout_s": 10,
            **gateway,
        },
    )
    return load_policy(path)


def free_base(span: int = 300) -> int:
    """A base port whose next `span` ports are all free right now, for a local provider's servers.

    Below Linux's ephemeral range (32768-60999: what free_port and outgoing connections get), and,
    under pytest-xdist, in a band of its own per worker, so two workers choosing at the same moment
    cannot both take a range neither has bound yet. The start within the band is random, so tests
    in one worker rarely meet ports a previous test's processes still hold."""
    from autoscaler.demo.setup import port_is_free

    lo, hi = _port_band(20000, 32700)
    bases = list(range(lo, hi - span, span))
    start = random.randrange(len(bases))
    for base in bases[start:] + bases[:start]:
        if all(port_is_free(base + k) for k in range(span)):
            return base
    raise RuntimeError(f"no free range of {span} ports in {lo}-{hi}")


def _port_band(lo: int, hi: int) -> tuple[int, int]:
    """This xdist worker's share of [lo, hi) (all of it outside xdist)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if not worker.startswith("gw") or count <= 1:
        return lo, hi
    width = (hi - lo) // count
    index = int(worker[2:]) % count
    return lo + index * width, lo + (index + 1) * width


@contextmanager
def local_fleet(policy: Policy, tmp_path: Path, shape: Shape | None) -> Iterator[tuple[Controller, FixedPlanner]]:
    """A controller on a real local fleet and gateway; everything is stopped at the end. With a
    `shape` every tick plans it; with None the policy's own planner plans."""
    ctl = build_controller(policy, tmp_path / "state.sqlite")
    planner = FixedPlanner(shape or ())
    if shape is not None:
        ctl.deps.planner = planner
    ctl.deps.rates = RateReader(ManualRates({w.name: w.rate_rps for w in policy.workloads}), 300)
    try:
        yield ctl, planner
    finally:
        for inst in ctl.deps.provider.list_instances():
            ctl.deps.provider.terminate(inst.id)
        if ctl.deps.gateway is not None:
            ctl.deps.gateway.stop()
        ctl.store.close()


def serving(ctl: Controller) -> set[str]:
    assert ctl.deps.gateway is not None
    return set(ctl.deps.gateway.observe().serving())


def planned_names(ctl: Controller) -> set[str]:
    layout = ctl.store.current_layout()
    return {s.name for _, s in layout.servers()} if layout else set()


def converged(ctl: Controller) -> bool:
    """The gateway sends requests to exactly the layout's servers (under their gateway names: a
    slot's later instance names them after its attempt) and holds no other; the agents run
    exactly those."""
    assert ctl.deps.gateway is not None
    view = ctl.deps.gateway.observe()
    want = planned_names(ctl)
    at_gateway = gateway_names(ctl).to_gateway(want)
    return (
        bool(want)
        and len(at_gateway) == len(want)
        and set(view.serving()) == at_gateway
        and {s.name for s in view.servers.values()} == at_gateway
        and agents_run(ctl) == want
    )


def gateway_names(ctl: Controller) -> GatewayNames:
    return fleet_names(ctl.store.open_records(), ctl.store.applied())


def agents_run(ctl: Controller) -> set[str]:
    names: set[str] = set()
    for inst in ctl.deps.provider.list_instances():
        if inst.state == "running":
            names |= {s.name for s in parse_status(ctl.deps.transport.status(inst)).servers}
    return names


def server_counts(ctl: Controller) -> dict[str, int]:
    """requests_total per server, as the servers themselves count them (via their agents)."""
    out: dict[str, int] = {}
    for inst in ctl.deps.provider.list_instances():
        if inst.state == "running":
            out.update({s.name: s.requests_total for s in parse_status(ctl.deps.transport.status(inst)).servers})
    return out


def tick_until(ctl: Controller, done: Callable[[], bool], timeout: float = 150.0, pause: float = 0.3) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        report = ctl.tick()
        assert report.ok, report.error
        if done():
            return
        time.sleep(pause)
    raise AssertionError(f"timed out; last tick: {ctl.store.actions()[-4:]}")


@dataclass
class Load:
    """Clients through the gateway: each thread sends one request after another (closed loop), or
    one every `pace_s` at most (a steady rate, so a refused connection does not speed it up)."""

    url: str
    threads: int = 8
    timeout_s: float = 10.0
    pace_s: float = 0.0
    ok: int = 0
    failed: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stop: threading.Event = field(default_factory=threading.Event)
    _workers: list[threading.Thread] = field(default_factory=list)

    @property
    def sent(self) -> int:
        return self.ok + self.failed

    def start(self) -> Load:
        self._workers = [threading.Thread(target=self._run, daemon=True) for _ in range(self.threads)]
        for t in self._workers:
            t.start()
        return self

    def _run(self) -> None:
        with web.client(timeout=self.timeout_s) as client:
            while not self.stop.is_set():
                due = time.monotonic() + self.pace_s
                self._one(client)
                self.stop.wait(max(0.0, due - time.monotonic()))

    def _one(self, client: httpx.Client) -> None:
        try:
            reply = client.post(self.url, json=BODY)
            good, why = reply.status_code == 200, f"HTTP {reply.status_code}: {reply.text[:120]}"
        except httpx.HTTPError as exc:
            good, why = False, f"{type(exc).__name__}: {exc}"
        with self.lock:
            if good:
                self.ok += 1
            else:
                self.failed += 1
                self.errors[why] += 1

    def wait_for(self, n: int, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while self.sent < n and time.monotonic() < deadline:
            time.sleep(0.05)

    def close(self) -> None:
        self.stop.set()
        for t in self._workers:
            t.join(timeout=15)


def send(url: str, n: int, threads: int = 8) -> Load:
    """Exactly about `n` requests through the gateway (closed loop), then stop."""
    load = Load(url, threads).start()
    load.wait_for(n)
    load.close()
    return load


def infer_url(policy: Policy, workload: str) -> str:
    return f"http://{policy.gateway.listen}/v2/models/{workload}/infer"


def shares(counts: Mapping[str, int]) -> dict[str, float]:
    total = sum(counts.values())
    return {k: v / total for k, v in counts.items()} if total else {}
