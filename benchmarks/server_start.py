"""What an inference server's start costs, exec'd against forked from the zygote (agents/node/zygote.py).

The agent's two starters, called as its daemon calls them: `launch_server` (`python -m agents.server`,
a new interpreter that imports torch) and `fork_server` (a fork of the zygote, torch imported
already), on a small TorchScript CNN (benchmarks/server_overhead.py's), on the CPU. For each start:
the wall time from the call to the server's stats file saying ready, and the server process's own
CPU until then (/proc/PID/stat: user + system). The zygote's own start (once per agent: an
interpreter importing torch) is measured apart, and is what a fork's first start adds. The starts
alternate exec, fork, exec, ... so drift in the machine's load hits both; each figure is the median
of --runs starts. About a minute on 2 cores.

    nice .venv/bin/python benchmarks/server_start.py [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _results import Results
from server_overhead import make_model

from agents.fsutil import read_json
from agents.node.supervisor import ServerFiles, ServerProcess, launch_server
from agents.node.zygote import fork_server, zygote
from agents.spec import ServerSpec

TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_once(starter: Callable[..., ServerProcess], model_dir: Path, state: Path, name: str) -> dict[str, float]:
    """One start to ready: wall seconds and the server's CPU seconds; then a SIGTERM stop."""
    spec = ServerSpec(name=name, workload="w", model_dir=str(model_dir), batch=8, mps_percent=50.0, port=_port())
    files = ServerFiles.under(state, name)
    t0 = time.perf_counter()
    proc = starter(spec, {}, "cpu", files)
    while not ((s := read_json(files.stats)) and isinstance(s, dict) and s.get("ready") and s.get("pid") == proc.pid):
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited with {proc.returncode}: {files.log.read_text()[-500:]}")
        time.sleep(0.005)
    out = {"wall_s": time.perf_counter() - t0, "cpu_s": _cpu_s(proc.pid)}
    proc.terminate()
    proc.wait(30)
    return out


def zygote_start() -> dict[str, float]:
    """The zygote's own start (an interpreter that imports torch and the server's modules): wall to
    its first fork and its CPU, measured on the first fork (`fork_server` starts it)."""
    from multiprocessing import forkserver

    t0 = time.perf_counter()
    zygote()
    forkserver.ensure_running()
    pid = forkserver._forkserver._forkserver_pid  # type: ignore[attr-defined]
    # it preloads after it starts listening: a first connection waits for the imports
    proc = zygote().Process(target=int)
    proc.start()
    proc.join()
    return {"wall_s": time.perf_counter() - t0, "cpu_s": _cpu_s(pid)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    res = Results("server_start", f"nice .venv/bin/python benchmarks/server_start.py --runs {args.runs}")
    with tempfile.TemporaryDirectory() as tmp:
        model_dir, state = Path(tmp) / "cnn", Path(tmp) / "state"
        model_dir.mkdir()
        make_model(model_dir)
        first = zygote_start()
        runs: dict[str, list[dict[str, float]]] = {"exec": [], "fork": []}
        for i in range(args.runs):
            runs["exec"].append(start_once(launch_server, model_dir, state, f"e{i}"))
            runs["fork"].append(start_once(fork_server, model_dir, state, f"f{i}"))
    med: dict[str, Any] = {
        way: {k: statistics.median(r[k] for r in rs) for k in ("wall_s", "cpu_s")} for way, rs in runs.items()
    }
    for way in ("exec", "fork"):
        for k in ("wall_s", "cpu_s"):
            res.figure(f"{way}_{k}", med[way][k])
    for k in ("wall_s", "cpu_s"):
        res.figure(f"zygote_{k}", first[k])
    res.figure("runs", args.runs)
    res.figure("cpu_ratio", med["exec"]["cpu_s"] / med["fork"]["cpu_s"])
    res.line("starts", "| start | to ready (s) | server CPU to ready (s) |")
    res.line("starts", "| --- | --- | --- |")
    res.line(
        "starts", f"| exec'd (`python -m agents.server`) | {med['exec']['wall_s']:.2f} | {med['exec']['cpu_s']:.2f} |"
    )
    res.line("starts", f"| forked from the zygote | {med['fork']['wall_s']:.2f} | {med['fork']['cpu_s']:.2f} |")
    res.line("starts", f"| the zygote itself (once per agent) | {first['wall_s']:.2f} | {first['cpu_s']:.2f} |")
    res.write()


if __name__ == "__main__":
    main()
