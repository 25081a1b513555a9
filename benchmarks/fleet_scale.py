"""A tick at fleet scale, I/O included (issue 50 item 5): the real Controller over a fake provider,
transport and gateway that wait as the real ones do (benchmarks/_fleet_fakes.py): 50 ms an agent
call, 150 ms an EC2 call, 1 ms a gateway runtime command, and one agent in 100 hanging until its
call's deadline (agents.connect_timeout_s + command_timeout_s: 1 + 2 s here).

Two fleet kinds, each at every size (instances, about):
- `mps`: V100 p3.2xlarge, the workloads of ../shared/scenarios/random-1000.yaml (cycled, renamed
  when a fleet needs more: about 2.2 workloads an instance);
- `mig`: A100 80GB a2-ultragpu-1g cut into MIG slices, planned from ParvaGPU's tables in
  ../shared/profiles/a100-80gb-mig (imported into a temporary directory for the run, never into
  the repository); the same draw of rates and SLOs, the models mapped onto the tables' models and
  the SLOs scaled to MIG slices' latencies.

Each (code, kind, size) runs in its own process (its own peak RSS), capped at `--cap` seconds of
wall time: one that does not finish is recorded as such, and that code's larger sizes of that kind
are not tried. A run brings the fleet up with no latency (not measured), then measures with the
latencies on: a steady tick (rates unchanged) and a re-plan tick (10 % of the workloads' rates
moved by +-30 %), each the median of `--repeat`, with wall time, CPU (process time, all threads),
calls by kind and the process's peak RSS. `--old REV` runs the same driver, in the same run,
against that revision exported with `git archive` (its own fakes, its own controller).

A run's process holds the controller and its fakes and nothing else, as an `igniter run` process
holds the controller, so by default its collector follows the `igniter` command's rule
(loop/tick/collect.py `own_heap`: a tick's survivors are frozen, and the whole heap is collected
now and then, at most a fiftieth of the CPU; a revision without that rule runs its own).
`--collector plain` collects the young generation at each tick's end instead, as a process that
runs other work beside its controllers does (the rule these runs had before 2026-12-07).

    nice .venv/bin/python benchmarks/fleet_scale.py [--sizes 100 500 1000 2000] [--kinds mps mig]
        [--old 2c6ca41] [--cap 300] [--repeat 3] [--collector own|plain] [--write]

--write saves benchmarks/results/fleet_scale.json (docs/operations.md quotes it); without it the
figures are printed only. `--name NAME` writes NAME.json instead: `--name fleet_scale_ab --old REV`
compares this code with REV on one machine in one run (fleet_scale_ab.json: each size's new/old
CPU ratio as a figure, `*_cpu_new_over_old_*`), without touching the reference run's file. Wall
times from a loaded machine are inflated: every run records its load average.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SHARED = ROOT.parent / "shared"
SCENARIO = SHARED / "scenarios" / "random-1000.yaml"
MIG_TABLES = SHARED / "profiles" / "a100-80gb-mig"
PER_INSTANCE = {"mps": 1000 / 460, "mig": 217 / 51}  # workloads an instance (calibrated by `igniter plan`)
MIG_MODEL = {"resnet50": "resnet50", "vgg19": "vgg19", "ssd": "resnet152", "alexnet": "mobilenetv2"}
MIG_SLO_SCALE = 3.0  # a MIG slice serves a batch slower than a whole V100: SLOs scaled to keep workloads feasible
DEADLINE = {"connect_timeout_s": 1.0, "command_timeout_s": 2.0}


def drawn(n: int, seed: int, kind: str) -> list[dict[str, Any]]:
    """`n` workloads drawn from the scenario's (cycled, renamed when more are needed)."""
    base = yaml.safe_load(SCENARIO.read_text())["workloads"]
    rng = random.Random(seed)
    out = [{**base[k % len(base)], "name": f"w{k}"} for k in rng.sample(range(max(n, len(base))), n)]
    if kind == "mig":
        out = [{**w, "model": MIG_MODEL[w["model"]], "slo_ms": round(w["slo_ms"] * MIG_SLO_SCALE)} for w in out]
    return out


def mig_profiles(tmp: Path) -> Path:
    """ParvaGPU's A100 tables imported into `tmp` by the code under test's own importer."""
    from autoscaler.cli import main as igniter

    with contextlib.redirect_stdout(io.StringIO()):
        code = igniter(
            ["profile", "import", str(MIG_TABLES), "--gpu", "a100-80gb", "--out", str(tmp / "a100-80gb.yaml")]
        )
    if code != 0:
        raise SystemExit(f"igniter profile import {MIG_TABLES} failed ({code})")
    return tmp


def policy_doc(tmp: Path, kind: str, instances: int, seed: int) -> dict[str, Any]:
    doc = yaml.safe_load(SCENARIO.read_text())
    doc.update(
        fleet=f"bench-{kind}",
        workloads=drawn(round(instances * PER_INSTANCE[kind]), seed, kind),
        rates={"source": "static"},
        agents={"transport": "local", **DEADLINE},
        gateway={"kind": "haproxy"},
        scaling={"interval_s": 30, "headroom": 0.1, "forecast": "last", "scale_down_delay_s": 0},
    )
    if kind == "mig":
        doc["profiles_dir"] = str(mig_profiles(tmp))
        doc["instance_types"] = [{"name": "a2-ultragpu-1g", "gpu": "a100-80gb", "gpus": 1, "price_per_hour": 5.07}]
        doc["scaling"]["mig_latency_margin"] = 0.1
    else:
        doc["profiles_dir"] = str(SHARED / "profiles")
    return doc


def median_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run of median wall time (its own figures, not a mix of runs), and every run's wall and CPU."""
    ranked = sorted(runs, key=lambda r: r["wall_s"])
    return {
        **ranked[len(ranked) // 2],
        "wall_s_runs": [r["wall_s"] for r in runs],
        "cpu_s_runs": [r["cpu_s"] for r in runs],
    }


def worker(root: Path, kind: str, size: int, repeat: int, seed: int, collector: str = "own") -> dict[str, Any]:
    """One fleet's figures, measured on the code under `root` (imported from there). `collector`
    own: the process's heap is the controller's, as in the `igniter` command (loop/tick/collect.py
    own_heap: a tick's survivors are frozen; where `root` has no such rule, its own runs); plain:
    the young generation collected at each tick's end, as in a process that runs other work."""
    sys.path.insert(0, str(root))
    import logging

    from _fleet_fakes import LAYOUT, Bench
    from fleet_scale_sim import own_heap

    if collector == "own":
        own_heap()

    from autoscaler.config.policy import load_policy

    logging.disable(logging.CRITICAL)  # hung agents and the like are expected here; logging them costs CPU
    load0, t0 = os.getloadavg()[0], time.perf_counter()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        (tmp / "policy.yaml").write_text(yaml.safe_dump(policy_doc(tmp, kind, size, seed)))
        bench = Bench(load_policy(tmp / "policy.yaml"))
        bring_up = bench.converge(30)
        bring_up_s = time.perf_counter() - t0
        rng = random.Random(seed)
        bench.slow(True)
        steady = [bench.tick()[1] for _ in range(repeat)]
        replan = []
        for _ in range(repeat):
            bench.move_rates(rng)
            replan.append(bench.tick()[1])
            bench.slow(False)
            bench.converge(6)
            bench.slow(True)
        instances = len(bench.provider._instances)
    import autoscaler

    return {
        "code_layout": LAYOUT,
        "imported_from": str(Path(autoscaler.__file__).parent.parent),
        "instances": instances,
        "workloads": len(bench.policy.workloads),
        "collector": collector,
        "bring_up_ticks": bring_up,
        "bring_up_s": round(bring_up_s, 1),
        "steady": median_of(steady),
        "replan": median_of(replan),
        "load_average": [round(load0, 2), round(os.getloadavg()[0], 2)],
        "run_s": round(time.perf_counter() - t0, 1),
    }


def spawn(root: Path, kind: str, size: int, args: argparse.Namespace) -> dict[str, Any]:
    """`worker` in a fresh process on the code under `root`, cut off after `args.cap` seconds."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", str(root), "--kinds", kind]
    cmd += ["--sizes", str(size), "--repeat", str(args.repeat), "--seed", str(args.seed), "--collector", args.collector]
    load0 = os.getloadavg()[0]
    try:
        done = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=args.cap)
    except subprocess.TimeoutExpired:
        load = [round(load0, 2), round(os.getloadavg()[0], 2)]
        return {"did_not_finish_within_s": args.cap, "load_average": load}
    if done.returncode != 0:
        return {"failed": done.stderr.strip().splitlines()[-1:] or [f"exit {done.returncode}"]}
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def export(rev: str) -> Path:
    """The revision's tree, exported once into /tmp (git archive)."""
    out = Path(tempfile.gettempdir()) / f"igniter-{rev}"
    if not (out / "autoscaler").is_dir():
        out.mkdir(exist_ok=True)
        tar = subprocess.run(["git", "archive", rev], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(out)], input=tar, check=True)
    return out


def row(code: str, kind: str, size: int, r: dict[str, Any]) -> str:
    """One table row: a finished run's figures, or why there are none."""
    if "steady" not in r:
        why = (
            f"did not finish within {r['did_not_finish_within_s']} s"
            if "did_not_finish_within_s" in r
            else r.get("skipped") or f"failed: {r.get('failed')}"
        )
        load = r.get("load_average", ["", ""])
        return f"| {size:,} | {kind} | {code} | {why} | | | | | {load[0]} |"
    s, p = r["steady"], r["replan"]
    return (
        f"| {size:,} ({r['instances']:,}) | {kind} | {code} | {s['wall_s']:.2f} | {s['cpu_s']:.2f} | "
        f"{p['wall_s']:.2f} | {p['cpu_s']:.2f} | {max(s['peak_rss_mb'], p['peak_rss_mb']):.0f} | {r['load_average'][0]} |"
    )


HEADER = [
    "| instances (measured) | type | code | steady wall s | steady CPU s | re-plan wall s | re-plan CPU s | peak RSS MB | load |",
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
]


def targets(runs: dict[str, dict[str, Any]], res: Any) -> None:
    """Issue 50's targets, from the new code's runs (quoted by docs/operations.md): the MPS
    fleet's figures by their names, the MIG fleet's with `mig_` before them."""
    for kind, prefix in (("mps", ""), ("mig", "mig_")):
        small, big, mid = (runs.get(f"new/{kind}/{n}", {}) for n in (100, 2000, 1000))
        if "steady" in small and "steady" in big:
            growth = big["steady"]["cpu_s"] / max(small["steady"]["cpu_s"], 1e-3)
            res.figure(f"{prefix}cpu_growth_100_to_2000", growth)
        for name, r in (("1000", mid), ("2000", big)):
            if "steady" in r:
                res.figure(f"{prefix}steady_cpu_s_{name}", r["steady"]["cpu_s"])
                res.figure(f"{prefix}steady_wall_s_{name}", r["steady"]["wall_s"])
                res.figure(f"{prefix}replan_wall_s_{name}", r["replan"]["wall_s"])
                res.figure(f"{prefix}peak_rss_mb_{name}", max(r["steady"]["peak_rss_mb"], r["replan"]["peak_rss_mb"]))
            old = runs.get(f"old/{kind}/{name}", {})
            if "steady" in r and "steady" in old:  # the new code's CPU over the old's, same run
                for tick in ("steady", "replan"):
                    ratio = r[tick]["cpu_s"] / max(old[tick]["cpu_s"], 1e-3)
                    res.figure(f"{prefix}{tick}_cpu_new_over_old_{name}", ratio)


def order(item: tuple[str, Any]) -> tuple[int, int, int]:
    """Runs by size, then kind (mps first), then code (new first)."""
    code, kind, size = item[0].split("/")
    return int(size), ["mps", "mig"].index(kind), ["new", "old"].index(code)


def reskip(runs: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The skipped runs' reason, again after a merge: the first smaller size that did not finish."""
    first: dict[tuple[str, str], int] = {}
    for key, r in runs.items():
        code, kind, size = key.split("/")
        if "skipped" in r and (code, kind) in first:
            r["skipped"] = f"not tried: {first[(code, kind)]:,} did not finish"
        elif "steady" not in r and "skipped" not in r:
            first.setdefault((code, kind), int(size))
    return runs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 500, 1000, 2000])
    ap.add_argument("--kinds", nargs="+", default=["mps", "mig"], choices=["mps", "mig"])
    ap.add_argument("--old", default="2c6ca41", help="the older revision run beside (git archive)")
    ap.add_argument("--codes", nargs="+", default=["new", "old"], choices=["new", "old"])
    ap.add_argument("--merge", action="store_true", help="keep the results file's runs that are not run now")
    ap.add_argument("--cap", type=float, default=300.0, help="wall seconds a run may take")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--name", default="fleet_scale", help="the results file: benchmarks/results/NAME.json")
    ap.add_argument(
        "--collector",
        choices=["own", "plain"],
        default="own",
        help="own: the tick's survivors frozen, as the igniter command does (loop/tick/collect.py); plain: collected young",
    )
    ap.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker is not None:
        print(
            json.dumps(worker(args.worker, args.kinds[0], args.sizes[0], args.repeat, args.seed, args.collector)),
            flush=True,
        )
        return 0
    sys.path.insert(0, str(HERE))
    from _results import Results, commit

    res = Results(args.name, "nice .venv/bin/python benchmarks/fleet_scale.py " + " ".join(argv or sys.argv[1:]))
    roots = {"new": (commit(), ROOT), "old": (args.old, export(args.old) if "old" in args.codes else None)}
    before = json.loads(res.path.read_text()) if args.merge and res.path.is_file() else {}
    kept = before.get("runs", {})
    earlier = before.get("commands", [before["command"]] if "command" in before else [])
    res.doc["commands"] = [*earlier, res.doc["command"]]  # every run's, when merged
    runs: dict[str, dict[str, Any]] = {}
    stopped: dict[tuple[str, str], str] = {}
    for size in args.sizes:
        for kind in args.kinds:
            for code in ("new", "old"):
                key, (rev, root) = f"{code}/{kind}/{size}", roots[code]
                if code not in args.codes:
                    continue
                if (code, kind) in stopped:
                    runs[key] = {"skipped": stopped[(code, kind)], "revision": rev}
                    continue
                print(f"{key} ...", file=sys.stderr, flush=True)
                started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
                runs[key] = {**spawn(root, kind, size, args), "revision": rev, "date": started}
                if "steady" not in runs[key]:
                    stopped[(code, kind)] = f"not tried: {size:,} did not finish"
    runs = reskip(dict(sorted({**kept, **runs}.items(), key=order)))
    for line in HEADER:
        res.line("runs", line)
    for key, r in runs.items():
        code, kind, size = key.split("/")
        res.line("runs", row(f"{code} {r['revision']}", kind, int(size), r))
    targets(runs, res)
    res.doc.update(runs=runs, latency_s={"agent": 0.05, "ec2": 0.15, "runtime": 0.001}, hang_every=100)
    res.doc.update(deadline_s=DEADLINE, cap_s=args.cap, repeat=args.repeat, old=args.old, collector=args.collector)
    if args.write:
        res.write()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
