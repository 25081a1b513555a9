"""What `make demo` needs on disk: a tiny TorchScript model, the demo policy, the trace slice.

Everything lives under one temporary directory, so the final sweep can recognise the demo's own
processes by that path in their command line and nothing outside it is touched.
"""

from __future__ import annotations

import argparse
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from agents.samples import TINY, write
from autoscaler.fleet.local import port_is_free
from autoscaler.sim.traces import Trace, read_wide, window

REPO = Path(__file__).resolve().parents[2]
TRACE = REPO / "traces" / "servegen-3models-wide.csv"

# The replayed workloads: trace column -> (profiled model, SLO ms).
WORKLOADS = {"m-mid": ("resnet50", 40.0), "m-small": ("alexnet", 30.0)}


@dataclass(frozen=True)
class DemoConfig:
    """The knobs of the demo; the defaults fit a 2-core machine and end well within 3 minutes."""

    duration_s: float = 110.0  # wall seconds of replay
    day: int = 1  # which day of the 14-day ServeGen trace to replay
    send_per_planned: float = 0.01  # real requests sent per planned request (1 in 100)
    plan_scale: float = 1.0  # planned rate = trace rate x plan_scale
    interval_s: float = 4.0
    boot_s: float = 2.0
    scale_down_delay_s: float = 12.0
    max_instances: int = 5
    seed: int = 1
    gateway_port: int | None = None  # None: 8000 when it is free, else a free one (gateway_port)


def tiny_model(directory: Path) -> Path:
    """A TorchScript model (x [8] FP32 -> y [4] FP32) in the agent's model directory layout: the
    smallest sample model (agents/samples.py), so the demo's requests are cheap to send."""
    return write(directory, TINY)


def free_port_base(span: int = 1000, start: int = 10000, stop: int = 20000) -> int:
    """A port range start whose first ports are free on 127.0.0.1 (instances use base + 100 k + i).

    Below Linux's ephemeral range (32768-60999), which every outgoing connection and every server
    bound to port 0 draws from: a port checked free here is bound only when its instance launches,
    maybe minutes later. (The local provider checks again then and skips a range taken meanwhile.)"""
    rng = np.random.default_rng()
    for _ in range(50):
        base = int(rng.integers(start, stop - span)) // 100 * 100
        if all(port_is_free(base + k * 100 + i) for k in range(5) for i in range(3)):
            return base
    raise RuntimeError("no free port range on 127.0.0.1 for the demo's servers")


def port_arg(text: str) -> int:
    """--port: a TCP port, 1..65535 (argparse's type)."""
    try:
        port = int(text)
    except ValueError:
        port = 0
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"a TCP port is 1..65535, got {text!r}")
    return port


def gateway_port(preferred: int = 8000) -> int:
    """The gateway's port: 8000 (the default) when it is free, else a free one."""
    if port_is_free(preferred):
        return preferred
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def slice_trace(cfg: DemoConfig) -> Trace:
    """One day of the ServeGen trace, only the demo's workloads."""
    day = window(read_wide(TRACE), cfg.day * 86400.0, (cfg.day + 1) * 86400.0)
    return Trace(day.source, day.times, {w: day.rates[w] for w in WORKLOADS}, day.step_s)


def local_fleet(root: Path, port: int | None = None) -> dict[str, Any]:
    """The policy sections of a demo fleet on this machine, all state under `root`: the local
    provider and transport, a haproxy gateway on `port` (None: 8000 when it is free, else a free
    one), its rates."""
    return {
        "provider": {
            "kind": "local",
            "state_root": str(root / "instances"),
            "base_port": free_port_base(),
            "ready_timeout_s": 90,
        },
        "agents": {"transport": "local", "state_dir": str(root / "agent"), "command_timeout_s": 20},
        "gateway": {
            "kind": "haproxy",
            "listen": f"127.0.0.1:{port or gateway_port()}",
            "state_dir": str(root / "gateway"),
            "check_interval_s": 0.5,
            "drain_timeout_s": 10,
        },
        "rates": {"source": "gateway", "stale_after_s": 30},
    }


def write_policy(root: Path, model_dir: Path, cfg: DemoConfig, peak: dict[str, float]) -> Path:
    """The demo policy: local provider and transport, a gateway (haproxy) under the demo's
    directory, one instance type, the tiny model for both workloads."""
    data = {
        "fleet": f"demo-{root.name[-8:].lower().replace('_', '-')}",
        "instance_types": [
            {
                "name": "g4dn.xlarge",
                "gpu": "t4-synthetic",
                "gpus": 1,
                "price_per_hour": 0.526,
                "max_instances": cfg.max_instances,
            }
        ],
        "workloads": [
            {
                "name": w,
                "model": m,
                "slo_ms": slo,
                "rate_rps": round(peak[w] * cfg.plan_scale, 1),
                "model_dir": str(model_dir),
            }
            for w, (m, slo) in WORKLOADS.items()
        ],
        **local_fleet(root, cfg.gateway_port),
        "scaling": {
            "interval_s": cfg.interval_s,
            "boot_s": cfg.boot_s,
            "headroom": 0.1,
            "scale_down_delay_s": cfg.scale_down_delay_s,
            "forecast": "ewma",
            "planner": "igniter",
        },
    }
    path = root / "demo-policy.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path
