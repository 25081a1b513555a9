"""What an inference server's start costs, exec'd against forked from the zygote (agents/node/zygote.py).

The agent's two starters, called as its daemon calls them: `launch_server` (`python -m agents.server`,
a new interpreter that imports torch) and `fork_server` (a fork of the zygote, torch imported
already), on a small TorchScript CNN (benchmarks/server_overhead.py's), on the CPU. For each start:
the wall time from the call to the server's stats file saying ready, and the server process's own
CPU until then (/proc/PID/stat: user + system). The zygote's own start (once per agent: an
interpreter importing torch) is measured apart, and is what a fork's first start adds. The starts
alternate exec, fork, exec, ... so drift in the machine's load hits both; each figure is the median
of --runs starts. Then memory: --servers servers of each kind running at once, their proportional
set size (PSS, /proc/PID/smaps_rollup: shared pages split among the processes sharing them) summed,
with the zygote's for the forked ones. About a minute on 2 cores.

    nice .venv/bin/python benchmarks/server_start.py [--runs 7] [--servers 3]
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
from agents.node.zygote import fork_server, parent_of, proc_stat, zygote
from agents.spec import ServerSpec

TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int) -> float:
    fields = proc_stat(pid)
    assert fields is not None, f"pid {pid} is gone"
    return (int(fields[11]) + int(fields[12])) / TICKS


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no Pss for pid {pid}")


def _ready(proc: ServerProcess, files: ServerFiles) -> bool:
    s = read_json(files.stats)
    if proc.poll() is not None:
        raise RuntimeError(f"pid {proc.pid} exited with {proc.returncode}: {files.log.read_text()[-500:]}")
    return isinstance(s, dict) and bool(s.get("ready")) and s.get("pid") == proc.pid


def _spec(name: str, model_dir: Path) -> ServerSpec:
    return ServerSpec(name=name, workload="w", model_dir=str(model_dir), batch=8, mps_percent=50.0, port=_port())


def memory(starter: Callable[..., ServerProcess], model_dir: Path, state: Path, prefix: str, n: int) -> float:
    """MB of PSS of `n` ready servers started by `starter` (and of their zygote, if forked)."""
    started = []
    for i in range(n):
        files = ServerFiles.under(state, f"{prefix}{i}")
        started.append((starter(_spec(f"{prefix}{i}", model_dir), {}, "cpu", files), files))
    while not all(_ready(p, f) for p, f in started):
        time.sleep(0.05)
    pids = {p.pid for p, _ in started}
    parents = {parent_of(pid) for pid in pids}
    zygotes = {p for p in parents if p is not None} - {os.getpid()}
    total = sum(_pss_mb(pid) for pid in pids | zygotes)
    for p, _ in started:
        p.terminate()
    for p, _ in started:
        p.wait(30)
    return total


def start_once(starter: Callable[..., ServerProcess], model_dir: Path, state: Path, name: str) -> dict[str, float]:
    """One start to ready: wall seconds and the server's CPU seconds; then a SIGTERM stop."""
    files = ServerFiles.under(state, name)
    t0 = time.perf_counter()
    proc = starter(_spec(name, model_dir), {}, "cpu", files)
    while not _ready(proc, files):
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
    parser.add_argument("--servers", type=int, default=3)
    args = parser.parse_args()
    command = f"nice .venv/bin/python benchmarks/server_start.py --runs {args.runs} --servers {args.servers}"
    res = Results("server_start", command)
    with tempfile.TemporaryDirectory() as tmp:
        model_dir, state = Path(tmp) / "cnn", Path(tmp) / "state"
        model_dir.mkdir()
        make_model(model_dir)
        first = zygote_start()
        runs: dict[str, list[dict[str, float]]] = {"exec": [], "fork": []}
        for i in range(args.runs):
            runs["exec"].append(start_once(launch_server, model_dir, state, f"e{i}"))
            runs["fork"].append(start_once(fork_server, model_dir, state, f"f{i}"))
        pss = {
            "exec": memory(launch_server, model_dir, state, "me", args.servers),
            "fork": memory(fork_server, model_dir, state, "mf", args.servers),
        }
    med: dict[str, Any] = {
        way: {k: statistics.median(r[k] for r in rs) for k in ("wall_s", "cpu_s")} for way, rs in runs.items()
    }
    for way in ("exec", "fork"):
        for k in ("wall_s", "cpu_s"):
            res.figure(f"{way}_{k}", med[way][k])
    for k in ("wall_s", "cpu_s"):
        res.figure(f"zygote_{k}", first[k])
    res.figure("runs", args.runs)
    res.figure("servers", args.servers)
    res.figure("exec_pss_mb", pss["exec"])
    res.figure("fork_pss_mb", pss["fork"])
    res.figure("cpu_ratio", med["exec"]["cpu_s"] / med["fork"]["cpu_s"])
    res.line("starts", "| start | to ready (s) | server CPU to ready (s) |")
    res.line("starts", "| --- | --- | --- |")
    res.line(
        "starts", f"| exec'd (`python -m agents.server`) | {med['exec']['wall_s']:.2f} | {med['exec']['cpu_s']:.2f} |"
    )
    res.line("starts", f"| forked from the zygote | {med['fork']['wall_s']:.2f} | {med['fork']['cpu_s']:.2f} |")
    res.line("starts", f"| the zygote itself (once per agent) | {first['wall_s']:.2f} | {first['cpu_s']:.2f} |")
    res.line("memory", f"| {args.servers} servers ready | PSS, MB |")
    res.line("memory", "| --- | --- |")
    res.line("memory", f"| exec'd | {pss['exec']:.0f} |")
    res.line("memory", f"| forked, with the zygote | {pss['fork']:.0f} |")
    res.write()


if __name__ == "__main__":
    main()
