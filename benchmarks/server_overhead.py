"""What the inference server costs over calling the model in-process.

For batch 1 and 8: requests/s and latency p50/p99 of (a) the TorchScript model called directly in
this process and (b) the same model behind `python -m agents.server` on 127.0.0.1, driven by
closed-loop HTTP clients sending one-item requests (1 client at batch 1; 8 clients at batch 8, so
the dynamic batcher can fill batches). Two clients: httpx with KServe v2 JSON bodies (encoded once,
up front), and tritonclient (a client nobody here wrote) with binary tensors in and, where the
server advertises `binary_tensor_data`, out. Each figure is the median of several runs. Client and
server share this machine's CPUs, so on a small VM the client's own cost is part of the numbers;
the server's CPU time per request (from /proc) is the figure other load on the machine disturbs least.

    .venv/bin/python benchmarks/server_overhead.py [--seconds 3] [--runs 3] [--json] [--baseline DIR]

Run from another checkout's root (PYTHONPATH=.) to measure that checkout's server with this client.

`--baseline DIR` compares this checkout's server with the one in DIR (an exported older revision:
`git archive REV | tar -x -C DIR`): both run at once, and the clients take turns on them, round
after round, the order flipped each round. Sequential runs of the two mislead on a host whose
speed drifts: at 23:00 on 2026-12-06 the same server read 25 % slower in a run one minute later.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import torch


class SmallCNN(torch.nn.Module):
    """x [3, 32, 32] -> logits [10]: CIFAR-sized, cheap enough that overheads show."""

    def __init__(self) -> None:
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 3, padding=1),
            torch.nn.ReLU(),
            torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(16, 32, 3, padding=1),
            torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1),
        )
        self.head = torch.nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).flatten(1))


def make_model(directory: Path) -> torch.jit.ScriptModule:
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        scripted = torch.jit.script(SmallCNN().eval())
    scripted.save(str(directory / "model.pt"))
    (directory / "model.yaml").write_text(
        "inputs:\n- {name: x, shape: [3, 32, 32], datatype: FP32}\noutputs:\n- {name: y, shape: [10], datatype: FP32}\n"
    )
    return scripted


def summarise(latencies_s: list[float], items: int, seconds: float) -> dict[str, float]:
    ms = np.array(latencies_s) * 1000.0
    return {"rps": items / seconds, "p50_ms": float(np.percentile(ms, 50)), "p99_ms": float(np.percentile(ms, 99))}


def in_process(model: torch.jit.ScriptModule, batch: int, seconds: float) -> dict[str, float]:
    """Direct calls with a full batch: the floor the server is compared with (rps counts items)."""
    x = torch.randn(batch, 3, 32, 32)
    latencies: list[float] = []
    with torch.inference_mode():
        for _ in range(5):
            model(x)
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            t0 = time.perf_counter()
            model(x)
            latencies.append(time.perf_counter() - t0)
        elapsed = time.perf_counter() - start
    return summarise(latencies, len(latencies) * batch, elapsed)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(model_dir: Path, batch: int, tree: Path | None = None) -> tuple[subprocess.Popen, str]:
    """`python -m agents.server` of this checkout, or of the checkout at `tree`."""
    port = free_port()
    spec = {
        "name": "bench",
        "workload": "bench",
        "model_dir": str(model_dir),
        "batch": batch,
        "mps_percent": 100,
        "port": port,
        "max_queue_delay_ms": 2.0,
    }
    env = None if tree is None else {**os.environ, "PYTHONPATH": str(tree)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "agents.server", "--spec", json.dumps(spec)],
        stderr=subprocess.DEVNULL,
        cwd=tree,
        env=env,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/v2/health/ready", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("server did not become ready")


def httpx_client(url: str) -> Callable[[], None]:
    """One keep-alive httpx client sending the same v2 JSON body, encoded once."""
    x = torch.randn(1, 3, 32, 32)
    body = json.dumps(
        {"inputs": [{"name": "x", "shape": [1, 3, 32, 32], "datatype": "FP32", "data": x.flatten().tolist()}]}
    ).encode()
    client = httpx.Client(timeout=30)
    headers = {"Content-Type": "application/json"}

    def send() -> None:
        client.post(f"{url}/v2/models/bench/infer", content=body, headers=headers).raise_for_status()

    return send


def triton_client(url: str) -> Callable[[], None]:
    """One tritonclient HTTP client: binary input; binary output where the server offers it."""
    import tritonclient.http as triton

    client = triton.InferenceServerClient(url.removeprefix("http://"), connection_timeout=30, network_timeout=30)
    binary_out = "binary_tensor_data" in client.get_server_metadata().get("extensions", [])
    x = triton.InferInput("x", [1, 3, 32, 32], "FP32")
    x.set_data_from_numpy(np.random.default_rng(0).standard_normal((1, 3, 32, 32), dtype=np.float32))
    outputs = [triton.InferRequestedOutput("y", binary_data=binary_out)]

    def send() -> None:
        client.infer("bench", [x], outputs=outputs).as_numpy("y")

    return send


CLIENTS = {"httpx_json": httpx_client, "tritonclient": triton_client}


def client_loop(
    make: Callable[[str], Callable[[], None]],
    url: str,
    start: threading.Barrier,
    stop_at: list[float],
    out: list[float],
) -> None:
    """One closed-loop client, made in its own thread (tritonclient's gevent needs that), warmed,
    then sending the next request as soon as the last answer is in."""
    send = make(url)
    for _ in range(20):
        send()
    start.wait()
    while time.perf_counter() < stop_at[0]:
        t0 = time.perf_counter()
        send()
        out.append(time.perf_counter() - t0)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def through_server(
    make: Callable[[str], Callable[[], None]], url: str, clients: int, seconds: float, pid: int
) -> dict[str, float]:
    """Closed-loop clients for `seconds`; also the server's own CPU time per request, which other
    load on a shared machine disturbs far less than throughput."""
    results: list[list[float]] = [[] for _ in range(clients)]
    start, stop_at = threading.Barrier(clients + 1), [float("inf")]
    threads = [threading.Thread(target=client_loop, args=(make, url, start, stop_at, r)) for r in results]
    for thread in threads:
        thread.start()
    start.wait()
    begun, cpu_before = time.perf_counter(), cpu_seconds(pid)
    stop_at[0] = begun + seconds
    for thread in threads:
        thread.join()
    elapsed, cpu = time.perf_counter() - begun, cpu_seconds(pid) - cpu_before
    latencies = [v for r in results for v in r]
    return {**summarise(latencies, len(latencies), elapsed), "server_cpu_ms": 1000.0 * cpu / max(1, len(latencies))}


def median_of(runs: int, measure: Callable[[], dict[str, float]]) -> dict[str, float]:
    samples = [measure() for _ in range(runs)]
    return {key: statistics.median(s[key] for s in samples) for key in samples[0]}


def machine() -> dict[str, Any]:
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    return {
        "cpu_count": os.cpu_count(),
        "cpu_model": model,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "platform": platform.platform(),
    }


def server_version(url: str) -> str:
    meta = httpx.get(f"{url}/v2", timeout=5).json()
    return f"{meta.get('name')} {meta.get('version')} extensions={meta.get('extensions')}"


def bench(seconds: float, runs: int) -> dict[str, Any]:
    torch.set_num_threads(1)  # as the server does: several servers share the CPUs
    rows, version = [], ""
    with tempfile.TemporaryDirectory() as tmp:
        model = make_model(Path(tmp))
        for batch in (1, 8):
            row: dict[str, Any] = {"batch": batch, "clients": batch}
            row["in_process"] = median_of(runs, lambda batch=batch: in_process(model, batch, seconds))
            proc, url = start_server(Path(tmp), batch)
            try:
                version = server_version(url)
                for name, make in CLIENTS.items():
                    row[name] = median_of(
                        runs, lambda m=make, u=url, b=batch, p=proc.pid: through_server(m, u, b, seconds, p)
                    )
            finally:
                proc.terminate()
                proc.wait(10)
            rows.append(row)
    return {"machine": machine(), "server": version, "seconds_per_run": seconds, "runs": runs, "results": rows}


def against(seconds: float, runs: int, baseline: Path) -> dict[str, Any]:
    """This checkout's server and the baseline's, side by side: per batch and client, `runs` rounds
    in which each gets `seconds` of the same load, the first in turn; medians and their ratios."""
    torch.set_num_threads(1)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        make_model(Path(tmp))
        for batch in (1, 8):
            servers = {"this": start_server(Path(tmp), batch), "baseline": start_server(Path(tmp), batch, baseline)}
            try:
                for name, make in CLIENTS.items():
                    seen: dict[str, list[dict[str, float]]] = {side: [] for side in servers}
                    for turn in range(runs):
                        for side in sorted(servers, reverse=turn % 2 == 1):
                            proc, url = servers[side]
                            seen[side].append(through_server(make, url, batch, seconds, proc.pid))
                    medians = {side: {k: statistics.median(s[k] for s in v) for k in v[0]} for side, v in seen.items()}
                    ratio = {k: medians["this"][k] / medians["baseline"][k] for k in ("server_cpu_ms", "rps")}
                    rows.append({"batch": batch, "clients": batch, "client": name, **medians, "ratio": ratio})
            finally:
                for proc, _ in servers.values():
                    proc.terminate()
                    proc.wait(10)
    return {"machine": machine(), "baseline": str(baseline), "seconds_per_run": seconds, "runs": runs, "rows": rows}


def render_against(report: dict[str, Any]) -> str:
    lines = [
        f"this checkout against {report['baseline']}: median of {report['runs']} interleaved rounds x "
        f"{report['seconds_per_run']:g} s",
        f"{'batch':>5} {'client':<13} {'server CPU ms/req':>24} {'req/s':>20}",
    ]
    for r in report["rows"]:
        this, base, ratio = r["this"], r["baseline"], r["ratio"]
        cpu = f"{this['server_cpu_ms']:.3f} / {base['server_cpu_ms']:.3f} ({ratio['server_cpu_ms']:.2f})"
        rps = f"{this['rps']:.0f} / {base['rps']:.0f} ({ratio['rps']:.2f})"
        lines.append(f"{r['batch']:>5} {r['client']:<13} {cpu:>24} {rps:>20}")
    return "\n".join(lines)


MODES = ("in_process", *CLIENTS)


def render(report: dict[str, Any]) -> str:
    m = report["machine"]
    lines = [
        f"machine: {m['cpu_count']} CPUs, {m['cpu_model']}; python {m['python']}, torch {m['torch']}",
        f"server: {report['server']}",
        f"median of {report['runs']} runs x {report['seconds_per_run']:g} s; rps counts items (one per request)",
        f"{'batch':>5} {'mode':<13} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'server CPU ms/req':>18}",
    ]
    for row in report["results"]:
        for mode in MODES:
            r = row[mode]
            cpu = f"{r['server_cpu_ms']:>18.3f}" if "server_cpu_ms" in r else f"{'':>18}"
            lines.append(f"{row['batch']:>5} {mode:<13} {r['rps']:>9.1f} {r['p50_ms']:>8.2f} {r['p99_ms']:>8.2f} {cpu}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--baseline", type=Path, help="a checkout whose server to compare with, interleaved")
    args = parser.parse_args()
    if args.baseline is not None:
        if not (args.baseline / "agents" / "server" / "__main__.py").is_file():
            parser.error(f"--baseline: {args.baseline} holds no agents/server (an exported checkout's root)")
        report = against(args.seconds, args.runs, args.baseline.resolve())
        print(json.dumps(report, indent=1) if args.json else render_against(report))
        return 0
    report = bench(args.seconds, args.runs)
    print(json.dumps(report, indent=1) if args.json else render(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
