"""How a killed local gateway recovers under load: seconds until it serves again, and the share of
requests refused or failed around each kill.

A real `igniter run` (its own process: the scheduler, the lease, the gateway keeper, all as
shipped) on a local fleet (the local provider's `igniter-agent` processes and their inference
servers on the tiny TorchScript model) behind its haproxy. Client threads send KServe v2 requests
through the gateway at a steady pace (each one at most every `--pace` s, on keep-alive
connections, as tests/kit/fleet.py's Load does). Each trial kill -9s the haproxy named in the
gateway's pid file, then:

- back_s: from the kill until a request sent after it is answered 200 (a probe thread sends one
  after another; a refused one is sent again at once);
- failed: requests of the client threads that did not get a 200 between the kill and `--window`
  seconds after it, against those sent in that window (refused connections, resets of the
  requests in flight inside the killed process, 5xx).

The figures are the medians over `--trials` kills (one `igniter run`, `--gap` s of steady load
between kills). It runs `igniter` and `igniter-agent` from this interpreter's environment, so
PYTHONPATH=<another checkout> measures that checkout (how the issue-32 "before" was taken).

    .venv/bin/python benchmarks/gateway_kill.py [--trials 5] [--threads 8] [--pace 0.02] [--window 5] [--json]

benchmarks/results/gateway_kill.json (about 3 minutes per checkout on a 2-core machine):

    git archive <before> | tar -x -C /tmp/before
    PYTHONPATH=/tmp/before nice .venv/bin/python benchmarks/gateway_kill.py --label before --out benchmarks/results/gateway_kill.json
    nice .venv/bin/python benchmarks/gateway_kill.py --label after --out benchmarks/results/gateway_kill.json
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import describe

from autoscaler.demo.setup import free_port_base, tiny_model

BODY = {"inputs": [{"name": "x", "shape": [1, 8], "datatype": "FP32", "data": [0.125 * i for i in range(8)]}]}


@dataclass
class Clients:
    """Paced client threads; every reply is logged with when it was sent, so a window of sends
    can be counted after the fact."""

    url: str
    threads: int
    pace_s: float
    log: list[tuple[float, bool]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stop: threading.Event = field(default_factory=threading.Event)
    workers: list[threading.Thread] = field(default_factory=list)

    def start(self) -> Clients:
        self.workers = [threading.Thread(target=self._run, daemon=True) for _ in range(self.threads)]
        for t in self.workers:
            t.start()
        return self

    def _run(self) -> None:
        with httpx.Client(timeout=10) as client:
            while not self.stop.is_set():
                sent = time.monotonic()
                try:
                    good = client.post(self.url, json=BODY).status_code == 200
                except httpx.HTTPError:
                    good = False
                with self.lock:
                    self.log.append((sent, good))
                self.stop.wait(max(0.0, sent + self.pace_s - time.monotonic()))

    def window(self, start: float, end: float) -> tuple[int, int]:
        """(sent, failed) among the requests sent in [start, end)."""
        with self.lock:
            inside = [good for t, good in self.log if start <= t < end]
        return len(inside), inside.count(False)

    def close(self) -> None:
        self.stop.set()
        for t in self.workers:
            t.join(15)


def policy(root: Path, rate: float) -> Path:
    model = tiny_model(root / "models")
    data = {
        "fleet": f"gwkill-{os.getpid()}",
        "instance_types": [{"name": "g4dn.xlarge", "gpu": "t4-synthetic", "gpus": 1, "price_per_hour": 0.526}],
        "workloads": [{"name": "w", "model": "alexnet", "slo_ms": 30, "rate_rps": rate, "model_dir": str(model)}],
        "provider": {"kind": "local", "state_root": str(root / "instances"), "base_port": free_port_base()},
        "agents": {"transport": "local", "state_dir": str(root / "agent"), "command_timeout_s": 30},
        "gateway": {"kind": "haproxy", "listen": f"127.0.0.1:{free_port()}", "state_dir": str(root / "gateway")},
        "rates": {"source": "static"},
        "leader": {"lock_dir": str(root / "locks")},
        "scaling": {"interval_s": 5, "headroom": 0.0, "forecast": "last", "scale_down_delay_s": 600},
    }
    path = root / "policy.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def served(url: str, timeout: float = 10.0) -> bool:
    try:
        return httpx.post(url, json=BODY, timeout=timeout).status_code == 200
    except httpx.HTTPError:
        return False


def wait(what: str, done: Any, timeout: float, poll: float = 0.2) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise SystemExit(f"gave up waiting for {what}")
        time.sleep(poll)


def gateway_pid(root: Path) -> int | None:
    try:
        return int((root / "gateway" / "haproxy.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def kill_once(root: Path, url: str, clients: Clients, window_s: float) -> dict[str, float]:
    pid = gateway_pid(root)
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    killed = time.monotonic()
    while not served(url, timeout=30):
        time.sleep(0.005)
    back = time.monotonic() - killed
    time.sleep(max(0.0, killed + window_s - time.monotonic()) + 1.0)  # the window's last replies come in
    sent, failed = clients.window(killed, killed + window_s)
    return {"back_s": back, "sent": sent, "failed": failed, "failed_pct": 100.0 * failed / max(1, sent)}


def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="igniter-gwkill-") as tmp:
        root = Path(tmp)
        path = policy(root, rate=100.0)
        url = f"http://{yaml.safe_load(path.read_text())['gateway']['listen']}/v2/models/w/infer"
        bin_dir = str(Path(sys.executable).parent)
        env = {**os.environ, "PATH": f"{bin_dir}:{os.environ.get('PATH', '')}"}
        argv = [str(Path(bin_dir) / "igniter"), "run", str(path), "--state", str(root / "s.sqlite")]
        proc = subprocess.Popen(
            [*argv, "--no-status"], env=env, stdout=subprocess.DEVNULL, stderr=open(root / "run.log", "w")
        )
        clients = None
        try:
            wait("the fleet to serve", lambda: served(url, timeout=2), 240)
            clients = Clients(url, args.threads, args.pace).start()
            time.sleep(args.gap)
            trials = []
            for _ in range(args.trials):
                trials.append(kill_once(root, url, clients, args.window))
                time.sleep(args.gap)
        finally:
            if clients is not None:
                clients.close()
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
            subprocess.run(
                [argv[0], "down", str(path), "--state", str(root / "s.sqlite")],
                env=env,
                capture_output=True,
                timeout=120,
            )
    return {
        "machine": describe(),
        "load_average": os.getloadavg(),
        "offered_rps": round(args.threads / args.pace),
        "window_s": args.window,
        "trials": trials,
        "median_back_s": statistics.median(t["back_s"] for t in trials),
        "median_failed_pct": statistics.median(t["failed_pct"] for t in trials),
        "max_failed_pct": max(t["failed_pct"] for t in trials),
    }


def render(r: dict[str, Any]) -> str:
    lines = [f"machine: {r['machine']}; load average {', '.join(f'{x:.1f}' for x in r['load_average'])}"]
    lines.append(f"offered {r['offered_rps']} req/s; failures counted over {r['window_s']} s from each kill")
    for i, t in enumerate(r["trials"], 1):
        lines.append(
            f"  kill {i}: back after {t['back_s']:.2f} s; {t['failed']} of {t['sent']} failed ({t['failed_pct']:.2f} %)"
        )
    lines.append(
        f"median: back after {r['median_back_s']:.2f} s, {r['median_failed_pct']:.2f} % failed "
        f"(worst {r['max_failed_pct']:.2f} %)"
    )
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=5)
    p.add_argument("--threads", type=int, default=8)
    p.add_argument("--pace", type=float, default=0.02, help="seconds between one thread's requests, at least")
    p.add_argument("--window", type=float, default=5.0, help="seconds after a kill whose requests are counted")
    p.add_argument(
        "--gap", type=float, default=4.0, help="seconds of steady load before the first kill and between kills"
    )
    p.add_argument("--json", action="store_true")
    p.add_argument("--label", help="with --out: the key this run's report is stored under (e.g. before, after)")
    p.add_argument("--out", type=Path, help="a JSON file the report is merged into, under --label")
    args = p.parse_args()
    report = run(args)
    print(json.dumps(report, indent=1) if args.json else render(report))
    if args.out is not None:
        stored = json.loads(args.out.read_text()) if args.out.exists() else {}
        stored[args.label or "run"] = report
        args.out.write_text(json.dumps(stored, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
