"""Shared test helpers for the control loop: policies, a clock, a stand-in planner, a controller."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from autoscaler.config.policy import Policy, load_policy
from autoscaler.fleet.fake import FakeProvider
from autoscaler.loop.state.store import Store
from autoscaler.loop.tick.controller import Controller, Deps
from autoscaler.planner.types import GpuOut, InstanceOut, PlacementOut, Plan
from autoscaler.rates.reader import RateReader
from autoscaler.rates.static import ManualRates
from autoscaler.transport.fake import FakeTransport

REPO = Path(__file__).resolve().parents[2]

BASE_POLICY: dict[str, Any] = {
    "fleet": "test",
    "instance_types": [
        {"name": "p3.2xlarge", "gpu": "v100", "gpus": 1, "price_per_hour": 3.06},
        {"name": "p3.8xlarge", "gpu": "v100", "gpus": 4, "price_per_hour": 12.24},
    ],
    "workloads": [
        {"name": "alex", "model": "alexnet", "slo_ms": 15, "rate_rps": 150},
        {"name": "res", "model": "resnet50", "slo_ms": 40, "rate_rps": 50},
    ],
    "scaling": {"interval_s": 30, "scale_down_delay_s": 600, "headroom": 0.0, "forecast": "last"},
    "gateway": {"kind": "none"},  # no data plane unless a test asks for one (tests/gateway)
}


def write_policy(path: Path, **overrides: Any) -> Path:
    data = {**BASE_POLICY, **overrides}
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def make_policy(tmp_path: Path, **overrides: Any) -> Policy:
    return load_policy(write_policy(tmp_path / "policy.yaml", **overrides))


class Clock:
    def __init__(self, t: float = 1_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, s: float) -> None:
        self.t += s


def stub_planner(
    policy: Policy,
    rates: Mapping[str, float],
    corrections: Mapping[str, float],
    caps: Mapping[str, int],
    current: Plan | None,
) -> Plan:
    """A stand-in planner: every 100 req/s (divided by the correction) takes one single-GPU
    instance of the cheapest type not capped; one placement per GPU at 50 % MPS, batch 4."""
    types = sorted((t for t in policy.instance_types if t.gpus == 1), key=lambda t: t.price_per_hour)
    types += sorted((t for t in policy.instance_types if t.gpus > 1), key=lambda t: t.price_per_hour)
    used = {t.name: 0 for t in types}
    instances = []
    for w in policy.workloads:
        rate = rates.get(w.name, 0.0)
        per = 100.0 / corrections.get(w.name, 1.0)
        n = math.ceil(rate / per - 1e-9)
        for _ in range(n):
            t = next(t for t in types if used[t.name] < caps.get(t.name, 10**9))
            used[t.name] += 1
            place = PlacementOut(w.name, w.model, 4, 50.0, rate / n, 5.0, per)
            gpus = tuple(GpuOut(i, t.gpu, (place,) if i == 0 else ()) for i in range(t.gpus))
            instances.append(InstanceOut(t.name, t.price_per_hour, gpus))
    return Plan("stub", tuple(instances))


def make_controller(
    policy: Policy,
    clock: Clock | None = None,
    rates: Mapping[str, float] | None = None,
    contact: bool = True,
    store: Store | None = None,
    planner: Any = stub_planner,
    provider: FakeProvider | None = None,
    transport: Any = None,
) -> tuple[Controller, FakeProvider, Any, ManualRates]:
    clock = clock or Clock()
    provider = provider or FakeProvider(policy.fleet, clock)
    transport = transport if transport is not None else FakeTransport()
    manual = ManualRates(rates if rates is not None else {w.name: w.rate_rps for w in policy.workloads})
    deps = Deps(
        provider,
        transport,
        RateReader(manual, policy.rates.stale_after_s),
        store or Store(":memory:"),
        planner,
        clock,
        contact,
    )
    return Controller(policy, deps), provider, transport, manual


def cloud_init_console(key_lines: list[str], host: str = "ip-10-0-1-23", end: bool = True) -> str:
    """Console output as an Ubuntu EC2 node prints it: kernel and cloud-init lines, then what
    cloud-init's write-ssh-key-fingerprints helper logs (through `logger -t ec2`) at first boot."""
    head = (
        "[    0.000000] Linux version 6.8.0-1015-aws (buildd@lcy02-amd64-029) #16-Ubuntu SMP\n"
        "[   12.345678] cloud-init[812]: Cloud-init v. 24.1.3 running 'modules:final'. Up 12.34 seconds.\n"
        "ec2: \nec2: #############################################################\n"
        "ec2: -----BEGIN SSH HOST KEY FINGERPRINTS-----\n"
        f"ec2: 256 SHA256:2nY0dRcyb4ZUD9WhmtbJc0H9MvYxw5o3yTqJFYv1vyQ root@{host} (ED25519)\n"
        "ec2: -----END SSH HOST KEY FINGERPRINTS-----\n"
        "ec2: #############################################################\n"
        "-----BEGIN SSH HOST KEY KEYS-----\n"
    )
    keys = "".join(f"{line} root@{host}\n" for line in key_lines)
    tail = (
        "-----END SSH HOST KEY KEYS-----\n"
        "[  301.000000] cloud-init[812]: Cloud-init v. 24.1.3 finished. Datasource DataSourceEc2Local.\n"
    )
    return head + keys + (tail if end else "")
