"""What the gateway costs: latency and maximum throughput through HAProxy against straight to the
inference server, with the same client, in one run.

One real inference server (`python -m agents.server`, the tiny TorchScript model, batch 1, no
batching delay) behind the fleet's gateway (autoscaler/gateway/local.py: the configuration
`igniter run` renders, the server added through the runtime API). The client is a minimal
keep-alive HTTP/1.1 client on raw sockets (the request encoded once, the reply read by its
Content-Length), so its own cost is small and the same on both paths:

- latency: one client, closed loop, `--requests` requests per run; p50 and p99;
- maximum throughput: `--clients` closed-loop client processes for `--seconds` per run; req/s.

Runs alternate direct / gateway, and each figure is the median over `--runs` runs. Client, server
and haproxy share this machine's CPUs, so on a small VM the figures include that contention
(the machine and its load average are printed). Goal (issue 15): at most 0.3 ms added at p50,
and at least 90 % of the direct maximum.

    .venv/bin/python benchmarks/gateway_overhead.py [--runs 5] [--requests 2000] [--clients 4] [--seconds 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from _results import Results

from autoscaler.core.routing.routes import AddServer, SetWeight
from autoscaler.demo.setup import tiny_model
from autoscaler.gateway.base import GatewaySpec
from autoscaler.gateway.local import LocalHaproxy

BODY = json.dumps(
    {"inputs": [{"name": "x", "shape": [1, 8], "datatype": "FP32", "data": [0.125 * i for i in range(8)]}]}
).encode()


def request_bytes(host: str, port: int) -> bytes:
    head = (
        f"POST /v2/models/bench/infer HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(BODY)}\r\n\r\n"
    )
    return head.encode() + BODY


class Client:
    """One keep-alive connection; `call()` sends the request and reads one whole reply."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.req = request_bytes("127.0.0.1", port)
        self.buf = b""

    def call(self) -> None:
        self.sock.sendall(self.req)
        while b"\r\n\r\n" not in self.buf:
            self._more()
        head, _, rest = self.buf.partition(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(head.split(b"\r\n", 1)[0].decode())
        length = int(next(ln.split(b":")[1] for ln in head.split(b"\r\n") if ln.lower().startswith(b"content-length")))
        while len(rest) < length:
            rest += self._recv()
        self.buf = rest[length:]

    def _more(self) -> None:
        self.buf += self._recv()

    def _recv(self) -> bytes:
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("closed")
        return data

    def close(self) -> None:
        self.sock.close()


def latency(port: int, n: int) -> dict[str, float]:
    client = Client(port)
    for _ in range(50):
        client.call()
    ms = np.empty(n)
    for i in range(n):
        t0 = time.perf_counter()
        client.call()
        ms[i] = (time.perf_counter() - t0) * 1000.0
    client.close()
    return {"p50_ms": float(np.percentile(ms, 50)), "p99_ms": float(np.percentile(ms, 99))}


def _worker(port: int, seconds: float, start_at: float, out: Any) -> None:
    client = Client(port)
    while time.time() < start_at:
        client.call()  # warm up until everyone starts together
    n, stop = 0, start_at + seconds
    while time.time() < stop:
        client.call()
        n += 1
    client.close()
    out.put(n)


def throughput(port: int, clients: int, seconds: float) -> float:
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    start_at = time.time() + 0.5
    procs = [ctx.Process(target=_worker, args=(port, seconds, start_at, out)) for _ in range(clients)]
    for p in procs:
        p.start()
    total = sum(out.get(timeout=seconds + 60) for _ in procs)
    for p in procs:
        p.join()
    return total / seconds


def start_server(model_dir: Path, port: int) -> subprocess.Popen[bytes]:
    spec = {
        "name": "bench-0",
        "workload": "bench",
        "model_dir": str(model_dir),
        "batch": 1,
        "mps_percent": 100,
        "port": port,
        "max_queue_delay_ms": 0.0,
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "agents.server", "--spec", json.dumps(spec)], stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            Client(port).call()
            return proc
        except (OSError, RuntimeError):
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("the inference server did not become ready")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def bench(runs: int, requests: int, clients: int, seconds: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        server_port, gw_port = free_port(), free_port()
        proc = start_server(tiny_model(root / "model"), server_port)
        gateway = LocalHaproxy(root / "gw")
        try:
            gateway.ensure(GatewaySpec(listen=f"127.0.0.1:{gw_port}", workloads=("bench",), check_interval_s=1.0))
            gateway.apply([AddServer("bench", "bench-0", f"127.0.0.1:{server_port}")])
            _wait(lambda: "bench-0" in gateway.observe().healthy())
            gateway.apply([SetWeight("bench", "bench-0", 256)])
            samples: dict[str, list[dict[str, float]]] = {"direct": [], "gateway": []}
            for _ in range(runs):
                for path, port in (("direct", server_port), ("gateway", gw_port)):
                    row = latency(port, requests)
                    row["rps"] = throughput(port, clients, seconds)
                    samples[path].append(row)
        finally:
            gateway.stop()
            proc.terminate()
            proc.wait(10)
    med = {p: {k: statistics.median(r[k] for r in rows) for k in rows[0]} for p, rows in samples.items()}
    return {
        "machine": machine(),
        "runs": runs,
        "requests_per_latency_run": requests,
        "clients": clients,
        "seconds_per_throughput_run": seconds,
        "median": med,
        "added_p50_ms": med["gateway"]["p50_ms"] - med["direct"]["p50_ms"],
        "added_p99_ms": med["gateway"]["p99_ms"] - med["direct"]["p99_ms"],
        "max_rps_ratio": med["gateway"]["rps"] / med["direct"]["rps"],
        "samples": samples,
    }


def _wait(check: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError("the gateway's health check did not pass")
        time.sleep(0.1)


def machine() -> dict[str, Any]:
    model = next(
        (
            ln.split(":", 1)[1].strip()
            for ln in Path("/proc/cpuinfo").read_text().splitlines()
            if ln.startswith("model name")
        ),
        platform.processor(),
    )
    haproxy = subprocess.run(["haproxy", "-v"], capture_output=True, text=True).stdout.split("\n", 1)[0]
    return {
        "cpu_count": os.cpu_count(),
        "cpu_model": model,
        "load_average": os.getloadavg(),
        "haproxy": haproxy,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def render(r: dict[str, Any]) -> str:
    m = r["machine"]
    la = ", ".join(f"{v:.1f}" for v in m["load_average"])
    lines = [
        f"machine: {m['cpu_count']} CPUs, {m['cpu_model']} (load average {la}); {m['haproxy']}",
        f"median of {r['runs']} runs; latency: 1 client x {r['requests_per_latency_run']} requests; "
        f"max throughput: {r['clients']} client processes x {r['seconds_per_throughput_run']:g} s",
        f"{'path':<8} {'p50 ms':>8} {'p99 ms':>8} {'max req/s':>10}",
    ]
    for path in ("direct", "gateway"):
        x = r["median"][path]
        lines.append(f"{path:<8} {x['p50_ms']:>8.3f} {x['p99_ms']:>8.3f} {x['rps']:>10.0f}")
    lines.append(
        f"gateway adds {r['added_p50_ms']:.3f} ms at p50 (goal <= 0.3), {r['added_p99_ms']:.3f} ms at p99; "
        f"max throughput {100 * r['max_rps_ratio']:.1f} % of direct (goal >= 90 %)"
    )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    out = Results("gateway_overhead", "python benchmarks/gateway_overhead.py " + " ".join(sys.argv[1:]))
    report = bench(args.runs, args.requests, args.clients, args.seconds)
    print(json.dumps(report, indent=1) if args.json else render(report))
    out.doc["report"] = report
    out.figure("added_p50_ms", report["added_p50_ms"])
    out.figure("added_p99_ms", report["added_p99_ms"])
    out.figure("max_rps_pct_of_direct", 100 * report["max_rps_ratio"])
    out.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
