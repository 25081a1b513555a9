"""CPU per tick of `igniter simulate` at fleet scale (issue 50, item 1): the first N workloads of
../shared/scenarios/random-1000.yaml (one V100 type, headroom 0.1) over R rows of 60 s whose rates
wander within +-20 % of each workload's rate (a seeded random walk). The policy subset and the trace
are written to a temp dir (nothing shared is copied into the repo); the replay runs in this process
through the CLI, as `igniter simulate POLICY --trace CSV --json` does, and the ticks it makes
(interval ticks and the early ticks a replay adds) are counted.

Run: nice .venv/bin/python benchmarks/fleet_scale_sim.py --workloads 200 400 --rows 8 [--profile OUT]

`--profile OUT` writes a cProfile of the last size to OUT (read it with pstats). `--json` prints
one line per size. `--write NAME` also saves each size's figures (`w{N}/cpu_s`, `w{N}/wall_s`,
`w{N}/ticks`, `w{N}/cpu_per_tick_s`, cost, attainment, the process's peak RSS, the most instance
slots a tick's layout held and the size of the replay's state store at the end, in all and by
table) and, with
`--per-tick`, the last size's means per window (`tables.windows`) to benchmarks/results/NAME.json
for the docs to quote (a day: `--workloads 1000 --rows 1440 --per-tick FILE --window-s 3600
--write NAME`, under an hour on 2 cores); the commit recorded is this checkout's, so write only
from the checkout that runs.

`--plan-on interval` replays with scaling.plan_on: interval (the early ticks keep the standing
layout), for the same trace: what that costs in dollars and attainment, and saves in CPU.

`--skip-rows K` replays the same walk from its row K on (timed from 0): K rows later in the trace
but in a fresh process, so a window's CPU there against the same rows' window in a run from row 0
tells what the rows cost from what the process's age does (docs/operations.md, Fleet size).

`--split` prints where the last size's CPU went, by part of the tick (plan, planner, diff, surge,
record, ...) and in the cyclic garbage collector, timed without a profiler (_split.py: cProfile
reads the rollout's many small calls at more than their share); with `--json` they are in the
line too, as `split`.

`--per-tick OUT` writes one JSON line per tick of the last size (its simulated
time, CPU, actions, the layout's slots and servers, and the CPU of the controller's steps:
forecast, plan with the planner in it, diff, record) and prints their means per `--window-s` of
simulated time: what grows with the replay's history shows there (issue 50: the forecast step's
hour of rate history; the closed instance records read each tick). Run it from an
exported older revision (`git archive REV | tar -x -C DIR`, then `cd DIR && python
/path/to/fleet_scale_sim.py`) to time the code before a change the same way.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import os
import random
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from _results import Results
from _split import split, timing
from _split import table as split_table

SCENARIO = Path(__file__).resolve().parents[2] / "shared" / "scenarios" / "random-1000.yaml"


def write_inputs(
    tmp: Path, n: int, rows: int, seed: int, scenario: Path, plan_on: str | None = None, skip: int = 0
) -> tuple[Path, Path]:
    """The policy of the scenario's first `n` workloads (headroom 0.1; scaling.plan_on where given)
    and its wandering trace: `rows` rows of the seed's walk from its row `skip` on, timed from 0."""
    doc = yaml.safe_load(scenario.read_text())
    doc["workloads"] = doc["workloads"][:n]
    doc.setdefault("scaling", {})["headroom"] = 0.1
    if plan_on is not None:
        doc["scaling"]["plan_on"] = plan_on
    policy = tmp / "policy.yaml"
    policy.write_text(yaml.safe_dump(doc, sort_keys=False))
    rng = random.Random(seed)
    base = [float(w["rate_rps"]) for w in doc["workloads"]]
    level = [1.0] * n
    lines = ["time_s," + ",".join(w["name"] for w in doc["workloads"])]
    for r in range(skip + rows):
        if r >= skip:
            lines.append(f"{60 * (r - skip)}," + ",".join(f"{b * f:.3f}" for b, f in zip(base, level)))
        level = [min(1.2, max(0.8, f + rng.uniform(-0.05, 0.05))) for f in level]
    trace = tmp / "trace.csv"
    trace.write_text("\n".join(lines) + "\n")
    return policy, trace


# the controller's steps (and the replay's planner), as `--per-tick` times them (_split.timing)
STEPS = [
    ("autoscaler.loop.tick.controller", f"Controller.{method}", label)
    for label, method in {"forecast": "forecast", "plan": "plan", "diff": "_diff", "record": "record"}.items()
] + [("autoscaler.sim.memo", "MemoPlanner.__call__", "planner")]


WINDOW_KEYS = ["cpu", "forecast", "plan", "planner", "diff", "record"]


def window_means(lines: list[dict[str, Any]], window_s: float) -> list[tuple[float, int, dict[str, float]]]:
    """(start, ticks, means) per window of simulated time: CPU per tick in all and by step, and the
    actions, slots and servers a tick."""
    groups: dict[int, list[dict[str, Any]]] = {}
    for line in lines:
        groups.setdefault(int(line["now"] // window_s), []).append(line)
    keys = [*WINDOW_KEYS, "actions", "slots", "servers"]
    return [
        (g * window_s, len(w), {k: sum(x.get(k, 0.0) for x in w) / len(w) for k in keys})
        for g, w in sorted(groups.items())
    ]


def windows(lines: list[dict[str, Any]], window_s: float) -> str:
    """Mean CPU per tick (in all and by step) per window of simulated time."""
    out = ["from_s ticks " + " ".join(f"{k:>8}" for k in WINDOW_KEYS) + "  actions    slots  servers"]
    for start, n, mean in window_means(lines, window_s):
        cells = " ".join(f"{mean[k]:8.3f}" for k in WINDOW_KEYS)
        counts = " ".join(f"{mean[k]:8.1f}" for k in ["actions", "slots", "servers"])
        out.append(f"{start:6.0f} {n:5d} {cells} {counts}")
    return "\n".join(out)


def window_table(lines: list[dict[str, Any]], window_s: float) -> list[str]:
    """`windows` as markdown rows (the results file's `tables.windows`)."""
    out = ["| from s | ticks | " + " | ".join(f"{k} s" for k in WINDOW_KEYS) + " | slots | servers |"]
    out.append("| --- " * (len(WINDOW_KEYS) + 4) + "|")
    for start, n, mean in window_means(lines, window_s):
        cells = " | ".join(f"{mean[k]:.3f}" for k in WINDOW_KEYS)
        out.append(f"| {start:,.0f} | {n} | {cells} | {mean['slots']:.0f} | {mean['servers']:.0f} |")
    return out


def run_one(
    n: int,
    rows: int,
    seed: int,
    scenario: Path,
    profile: Path | None,
    per_tick: Path | None = None,
    window_s: float = 600.0,
    plan_on: str | None = None,
    parts: dict[str, float] | None = None,
    skip: int = 0,
) -> dict[str, Any]:
    """One replay: CPU seconds in all, ticks, CPU per tick, and the summary's cost and attainment;
    with `per_tick`, each tick's CPU by step written there (one JSON line a tick); with `parts`,
    the CPU of each part of the tick added to it (_split.py)."""
    from autoscaler.cli import main
    from autoscaler.sim import engine

    ticks, slots = 0, 0
    replay: list[Any] = []  # the replay, for its state store once it is done
    original = engine.Replay.tick
    acc: dict[str, float] = {}
    lines: list[dict[str, Any]] = []
    table: list[str] = []

    def counted(self: Any, now: float, fast: bool = False) -> Any:
        nonlocal ticks, slots
        ticks += 1
        acc.clear()
        c = time.process_time()
        report = original(self, now, fast)
        replay[:] = [self]
        slots = max(slots, len(report.layout.slots) if report.layout is not None else 0)
        if per_tick:
            cpu = time.process_time() - c
            acts = len(report.outcome.done) + len(report.outcome.failed)
            lay = report.layout
            size = {"slots": len(lay.slots), "servers": len(lay.servers())} if lay is not None else {}
            lines.append(
                {"now": now, "cpu": round(cpu, 4), "actions": acts, **size, **{k: round(v, 4) for k, v in acc.items()}}
            )
        return report

    engine.Replay.tick = counted  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory() as d:
        policy, trace = write_inputs(Path(d), n, rows, seed, scenario, plan_on, skip)
        out = io.StringIO()
        prof = cProfile.Profile() if profile else None
        cpu, wall = time.process_time(), time.perf_counter()
        with (
            contextlib.redirect_stdout(out),
            timing(STEPS, acc) if per_tick else contextlib.nullcontext(),
            split(parts) if parts is not None else contextlib.nullcontext(),
        ):
            if prof:
                prof.enable()
            code = main(["simulate", str(policy), "--trace", str(trace), "--json"])
            if prof:
                prof.disable()
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    engine.Replay.tick = original  # type: ignore[method-assign]
    store_mb = store_size_mb(replay[0].store) if replay else None
    tables_mb = store_tables_mb(replay[0].store) if replay else {}
    if per_tick:
        per_tick.write_text("".join(json.dumps(line) + "\n" for line in lines))
        print(windows(lines, window_s), file=sys.stderr, flush=True)
        table = window_table(lines, window_s)
    if prof and profile:
        prof.dump_stats(str(profile))
    summary = json.loads(out.getvalue()) if code == 0 else {}
    return {
        "workloads": n,
        "rows": rows,
        "skip_rows": skip,
        "exit": code,
        "cpu_s": round(cpu, 2),
        "wall_s": round(wall, 1),
        "ticks": ticks,
        "cpu_per_tick_s": round(cpu / max(1, ticks), 3),
        "cost_total_usd": summary.get("cost_total_usd"),
        "max_slots": slots,  # the most instance slots a tick's layout held
        "store_mb": store_mb,
        "store_tables_mb": tables_mb,
        "slo_attainment": summary.get("slo_attainment"),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "peak_rss_mb": round(
            resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1
        ),  # the process's, all sizes run
        "windows": table,
    }


def store_size_mb(store: Any) -> float | None:
    """The replay's state store at the end (the in-memory SQLite database of the same schema and
    retention as `igniter run`'s file): its pages, what the file would hold; None where the
    revision's store keeps its connection elsewhere."""
    db = getattr(store, "_db", None)
    if db is None:
        return None
    pages = db.execute("PRAGMA page_count").fetchone()[0]
    return round(pages * db.execute("PRAGMA page_size").fetchone()[0] / 1e6, 2)


def store_tables_mb(store: Any) -> dict[str, float]:
    """The replay's state store at the end by table, its indexes counted with it (store_size.py's
    dbstat sum)."""
    from store_size import table_bytes

    db = getattr(store, "_db", None)
    if db is None:
        return {}
    return {name: round(size / 1e6, 2) for name, size in sorted(table_bytes(db).items(), key=lambda r: -r[1])}


def rows_count(text: str) -> int:
    """--skip-rows: a whole number of rows, 0 or more."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of rows (0 or more)")
    return int(text)


def own_heap() -> None:
    """The replay runs in this process as in the `igniter` command's own: where the revision run
    has loop/tick/collect.py's `own_heap`, the ticks' survivors are frozen, not collected young."""
    try:
        from autoscaler.loop.tick.collect import own_heap as mark
    except ImportError:
        return
    mark()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workloads", type=int, nargs="+", default=[200, 400])
    ap.add_argument("--rows", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--skip-rows",
        type=rows_count,
        default=0,
        help="replay the walk from this row on (timed from 0), in a fresh process",
    )
    ap.add_argument("--scenario", type=Path, default=SCENARIO)
    ap.add_argument("--profile", type=Path, help="write a cProfile of the last size here")
    ap.add_argument("--per-tick", type=Path, help="write each tick's CPU by step of the last size here (JSON lines)")
    ap.add_argument("--window-s", type=float, default=600.0, help="--per-tick: simulated seconds a printed mean spans")
    ap.add_argument(
        "--plan-on", choices=["tick", "interval"], help="the policy's scaling.plan_on (default: its default)"
    )
    ap.add_argument("--split", action="store_true", help="print the last size's CPU by part of the tick")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--write", metavar="NAME", help="save the figures to benchmarks/results/NAME.json")
    args = ap.parse_args()
    sys.path.insert(0, os.getcwd())  # the autoscaler of the current directory (an exported revision)
    own_heap()
    res = Results(args.write, "python benchmarks/fleet_scale_sim.py " + " ".join(sys.argv[1:])) if args.write else None
    for i, n in enumerate(args.workloads):
        last = i == len(args.workloads) - 1
        r = run_one(
            n,
            args.rows,
            args.seed,
            args.scenario,
            args.profile if last else None,
            args.per_tick if last else None,
            args.window_s,
            args.plan_on,
            parts := {} if args.split and last else None,
            args.skip_rows,
        )
        table = r.pop("windows")
        if parts is not None:
            print(split_table(parts, r["cpu_s"]), file=sys.stderr, flush=True)
            r["split"] = {k.strip(): round(v, 2) for k, v in parts.items()}
        if res is not None:
            keep(res, r, table)
        if args.json:
            print(json.dumps(r), flush=True)
        else:
            print(
                f"{n:5d} workloads {r['rows']:4d} rows: {r['ticks']:4d} ticks, {r['cpu_s']:8.2f} s CPU, "
                f"{r['cpu_per_tick_s']:.3f} s/tick, cost {r['cost_total_usd']}, attainment "
                f"{r['slo_attainment']} (load {r['load_average'][0]})",
                flush=True,
            )

    if res is not None:
        res.write()


def keep(res: Results, r: dict[str, Any], table: list[str]) -> None:
    """One size's figures, and its windows' table where the run kept one (the last size's)."""
    for key in [
        "rows",
        "skip_rows",
        "ticks",
        "cpu_s",
        "wall_s",
        "cpu_per_tick_s",
        "cost_total_usd",
        "slo_attainment",
        "peak_rss_mb",
        "max_slots",
        "store_mb",
    ]:
        if r.get(key) is not None:  # an older revision's replay may not tell its store's size
            res.figure(f"w{r['workloads']}/{key}", r[key])
    for table, mb in r.get("store_tables_mb", {}).items():
        res.figure(f"w{r['workloads']}/store_tables_mb/{table}", mb)
    for line in table:
        res.line("windows", line)


if __name__ == "__main__":
    main()
