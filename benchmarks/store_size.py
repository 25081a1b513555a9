"""The state file of a 1,000-instance fleet over simulated time (issue 50 item 3): its size, and a
tick's store work (rows inserted, updated and deleted, by table), as the fleet ages.

The real Controller runs over benchmarks/_fleet_fakes.py's fakes with no latency (only the store is
measured here), on an SQLite state file in a temporary directory: the `mps` fleet of
benchmarks/fleet_scale.py at `--instances` (about 2.2 workloads an instance, from
../shared/scenarios/random-1000.yaml), ticks 60 s apart whose rates wander within +-20 % of each
workload's rate. Rows written and deleted are counted by temporary triggers on the store's own
connection (TEMP: nothing is added to the file); sizes by SQLite's dbstat, after a WAL checkpoint.

A whole day (1,440 ticks) takes too long on a loaded 2-core machine, so `--ticks N` runs N ticks
with `state.history_s` set to `--history` (default 30 minutes): the tables it governs (ticks,
actions, lifecycle history, closed records) are shown to stop growing once the window is full;
the day's file is then extrapolated, and said to be: every table's bytes per row times the rows a
day leaves in it (the rates table keeps at least a day, one row per workload a tick; the others,
at the default history of 7 days, keep all of the day's ticks).

    nice .venv/bin/python benchmarks/store_size.py [--instances 1000] [--ticks 90] [--history 1800] [--write]
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

from _fleet_fakes import Bench  # noqa: E402
from _results import Results  # noqa: E402
from fleet_scale import policy_doc  # noqa: E402

from autoscaler.config.policy import load_policy  # noqa: E402
from autoscaler.loop.state.store import ROW_TABLES  # noqa: E402

DAY_TICKS = 1440
OPS = ("insert", "update", "delete")


def count_writes(db: Any) -> None:
    """TEMP triggers on the store's connection that count each table's rows by operation."""
    db.execute("CREATE TEMP TABLE writes (tbl TEXT, op TEXT, n INTEGER, PRIMARY KEY (tbl, op))")
    for table in ROW_TABLES:
        for op in OPS:
            db.execute("INSERT INTO temp.writes VALUES (?, ?, 0)", (table, op))
            db.execute(
                f"CREATE TEMP TRIGGER count_{table}_{op} AFTER {op.upper()} ON main.{table} BEGIN "
                f"UPDATE writes SET n = n + 1 WHERE tbl = '{table}' AND op = '{op}'; END"
            )


def take_writes(db: Any) -> dict[str, dict[str, int]]:
    """Rows written since the last take, by table and operation (and the counters reset)."""
    out: dict[str, dict[str, int]] = {}
    for table, op, n in db.execute("SELECT tbl, op, n FROM temp.writes").fetchall():
        if n:
            out.setdefault(table, {})[op] = n
    db.execute("UPDATE temp.writes SET n = 0")
    return out


def table_bytes(db: Any) -> dict[str, int]:
    """Bytes of each table with its indexes (dbstat), after moving the WAL into the file."""
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    rows = db.execute("SELECT tbl_name, SUM(pgsize) FROM dbstat JOIN sqlite_schema USING (name) GROUP BY tbl_name")
    return {name: int(size) for name, size in rows.fetchall()}


def run(instances: int, ticks: int, history_s: float, seed: int, every: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        doc = policy_doc(tmp, "mps", instances, seed)
        doc["scaling"]["interval_s"] = 60
        doc["state"] = {"history_s": history_s}
        (tmp / "policy.yaml").write_text(yaml.safe_dump(doc))
        file = tmp / "state.sqlite"
        bench = Bench(load_policy(tmp / "policy.yaml"), str(file))
        db = bench.store._db
        bench.converge(12)  # the bring-up, written too: a fleet's first day includes it
        with bench.store._lock:
            count_writes(db)
        rng, base = random.Random(seed), {w.name: w.rate_rps for w in bench.policy.workloads}
        samples, work, cpu = [], [], []
        for n in range(1, ticks + 1):
            bench.wander(rng, base)
            _, fig = bench.tick()
            cpu.append(fig["cpu_s"])
            with bench.store._lock:
                work.append(take_writes(db))
                if n % every == 0 or n == ticks:
                    sizes = table_bytes(db)
                    samples.append(
                        {
                            "tick": n,
                            "file_bytes": file.stat().st_size,
                            "rows": bench.store.row_counts(),
                            "table_bytes": sizes,
                            "load_average": round(os.getloadavg()[0], 2),
                        }
                    )
                    print(f"tick {n}: {file.stat().st_size / 1e6:.1f} MB {samples[-1]['rows']}", flush=True)
        return {
            "instances": len(bench.provider._instances),
            "workloads": len(bench.policy.workloads),
            "samples": samples,
            "work": work,
            "cpu_s_median": sorted(cpu)[len(cpu) // 2],
        }


def day_estimate(
    last: dict[str, Any], workloads: int, ticks: int, history_ticks: int, work: list[Any]
) -> dict[str, Any]:
    """The file after a day at the default history (7 days: nothing dropped within the day but
    rates older than a day): each table's bytes per row times the rows a day leaves in it."""
    inserted = {
        t: sum(w.get(t, {}).get("insert", 0) for w in work[-history_ticks:]) / history_ticks for t in ROW_TABLES
    }
    out: dict[str, float] = {}
    for table in ROW_TABLES:
        rows, size = last["rows"][table], last["table_bytes"].get(table, 0)
        per_row = size / rows if rows else 0.0
        if table == "rates":
            day_rows = workloads * DAY_TICKS
        elif table in ("ticks", "actions", "instance_history"):
            day_rows = rows + inserted[table] * (DAY_TICKS - min(ticks, history_ticks))
        else:  # instances, applied, layouts: the fleet's own size (layouts: the newest 500 at most)
            day_rows = rows
        out[table] = per_row * day_rows
    return {"table_bytes": {t: round(v) for t, v in out.items()}, "total_mb": sum(out.values()) / 1e6}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--instances", type=int, default=1000)
    ap.add_argument("--ticks", type=int, default=90)
    ap.add_argument("--history", type=float, default=1800.0)
    ap.add_argument("--every", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    logging.disable(logging.CRITICAL)  # targets out of reach and slow ticks are expected here
    res = Results("store_size", "nice .venv/bin/python benchmarks/store_size.py " + " ".join(sys.argv[1:]))
    t0 = time.perf_counter()
    r = run(args.instances, args.ticks, args.history, args.seed, args.every)
    history_ticks = round(args.history / 60)
    day = day_estimate(r["samples"][-1], r["workloads"], args.ticks, history_ticks, r["work"])
    steady = r["work"][history_ticks + 10 :] or r["work"]
    per_tick = {
        t: {op: sorted(w.get(t, {}).get(op, 0) for w in steady)[len(steady) // 2] for op in OPS} for t in ROW_TABLES
    }
    res.doc.update(r, history_s=args.history, ticks=args.ticks, day_estimate=day, per_tick_median=per_tick)
    last, first_full = (
        r["samples"][-1],
        next((s for s in r["samples"] if s["tick"] >= history_ticks + 10), r["samples"][-1]),
    )
    res.figure("instances", r["instances"])
    res.figure("workloads", r["workloads"])
    res.figure("file_mb_end", last["file_bytes"] / 1e6)
    res.figure("day_mb_estimate", day["total_mb"])
    res.figure("rates_rows_per_tick", per_tick["rates"]["insert"])
    res.figure("rows_written_per_tick", sum(v["insert"] + v["update"] for v in per_tick.values()))
    res.figure("rows_deleted_per_tick", sum(v["delete"] for v in per_tick.values()))
    for table in ("ticks", "actions", "instance_history"):
        res.figure(f"{table}_rows_window_full", first_full["rows"][table])
        res.figure(f"{table}_rows_end", last["rows"][table])
    res.figure("cpu_s_median", r["cpu_s_median"])
    res.line("samples", "| tick | file MB | ticks | actions | history | rates | load |")
    res.line("samples", "| --- | --- | --- | --- | --- | --- | --- |")
    for s in r["samples"]:
        c = s["rows"]
        res.line(
            "samples",
            f"| {s['tick']} | {s['file_bytes'] / 1e6:.1f} | {c['ticks']} | {c['actions']} | "
            f"{c['instance_history']} | {c['rates']:,} | {s['load_average']} |",
        )
    print(f"{time.perf_counter() - t0:.0f} s; a day, extrapolated: {day['total_mb']:.0f} MB {day['table_bytes']}")
    print(f"now: {last['table_bytes']}")
    if args.write:
        res.write()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
