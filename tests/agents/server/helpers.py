"""Real inference server processes for the server tests: start one, wait until ready, stop it."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import torch

from tests.kit import web
from tests.kit.agent import free_port, load_scripted, wait_until


@dataclass
class Served:
    proc: subprocess.Popen
    url: str
    workload: str
    stats: Path
    model: torch.jit.ScriptModule
    port: int
    log: Path


def start_server(tmp: Path, model_dir: Path, name: str, *args: str, **extra: Any) -> Served:
    """`python -m agents.server` with a spec (batch 8 unless given) and extra command-line flags."""
    port = extra.pop("port", None) or free_port()
    spec = {"name": name, "workload": name, "model_dir": str(model_dir), "batch": 8, "mps_percent": 50, "port": port}
    spec.update(extra)
    stats, log = tmp / f"{name}.json", tmp / f"{name}.log"
    cmd = [sys.executable, "-m", "agents.server", "--spec", json.dumps(spec), "--stats-file", str(stats), *args]
    proc = subprocess.Popen(cmd, stderr=open(log, "wb"))
    url = f"http://{spec.get('host', '127.0.0.1')}:{port}"
    # waits on readiness itself; the bound is generous because under xdist several servers import
    # torch at once (30 s was exceeded at 4 workers on a loaded 2-core machine)
    wait_until(lambda: is_ready(url) or proc.poll() is not None, 90, "server ready")
    assert proc.poll() is None, log.read_text()
    return Served(proc, url, name, stats, load_scripted(model_dir), port, log)


def is_ready(url: str) -> bool:
    try:
        return web.get(f"{url}/v2/health/ready", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def stop_server(served: Served) -> None:
    if served.proc.poll() is None:
        served.proc.kill()
    served.proc.wait(10)
