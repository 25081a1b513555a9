"""What a short `igniter` command costs with the fitted GPU profiles kept on disk and without
(model/fit_cache.py, loop/state/fit_files.py): `igniter plan policies/example.yaml` as a real
process, as a user types it.

Three ways, one after the other in turn so that drift in the machine's load hits each alike: with
the cache off (`IGNITER_NO_CACHE=1`: every process fits its profiles and imports scipy.optimize to
do it, as every process did before the cache), with an empty cache directory (the first command
on a host: it fits and writes), and with a warm one (it reads). For each: the process's wall time
and its CPU (user + system, from the children's rusage), the median of --runs.

    nice .venv/bin/python benchmarks/cli_start.py [--runs 15]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _results import ROOT, Results

COMMAND = [str(ROOT / ".venv" / "bin" / "igniter"), "plan", str(ROOT / "policies" / "example.yaml")]
WAYS = ("off", "cold", "warm")


def run_once(env: dict[str, str]) -> tuple[float, float]:
    """One command: its wall seconds and its CPU seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(COMMAND, env=env, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    res = Results("cli_start", f"nice .venv/bin/python benchmarks/cli_start.py --runs {args.runs}")
    base = {k: v for k, v in os.environ.items() if k not in ("IGNITER_NO_CACHE", "IGNITER_CACHE_DIR")}
    got: dict[str, list[tuple[float, float]]] = {way: [] for way in WAYS}
    with tempfile.TemporaryDirectory() as tmp:
        warm = str(Path(tmp) / "warm")
        run_once({**base, "IGNITER_CACHE_DIR": warm})  # fills it
        for i in range(args.runs):
            env = {
                "off": {**base, "IGNITER_NO_CACHE": "1"},
                "cold": {**base, "IGNITER_CACHE_DIR": str(Path(tmp) / f"cold{i}")},
                "warm": {**base, "IGNITER_CACHE_DIR": warm},
            }
            for way in WAYS:
                got[way].append(run_once(env[way]))
    res.line("cli", "| fitted profiles | wall (s) | CPU (s) |")
    res.line("cli", "| --- | --- | --- |")
    label = {"off": "not kept (`IGNITER_NO_CACHE=1`)", "cold": "kept, first command", "warm": "kept, read back"}
    for way in WAYS:
        wall = statistics.median(w for w, _ in got[way])
        cpu = statistics.median(c for _, c in got[way])
        res.figure(f"{way}_wall_s", wall)
        res.figure(f"{way}_cpu_s", cpu)
        res.line("cli", f"| {label[way]} | {wall:.2f} | {cpu:.2f} |")
    res.figure(
        "warm_over_off_cpu", statistics.median(c for _, c in got["warm"]) / statistics.median(c for _, c in got["off"])
    )
    res.figure("runs", args.runs)
    res.write()


if __name__ == "__main__":
    main()
