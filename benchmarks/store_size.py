"""The state file of a 1,000-instance fleet over simulated time (issue 50 item 3): its size, and a
tick's store work (rows inserted, updated and deleted, by table), as the fleet ages.

The real Controller runs over benchmarks/_fleet_fakes.py's fakes with no latency (only the store is
measured here), on an SQLite state file in a temporary directory: the `mps` fleet of
benchmarks/fleet_scale.py at `--instances` (about 2.2 workloads an instance, from
../shared/scenarios/random-1000.yaml), ticks 60 s apart whose rates wander within +-20 % of each
workload's rate. Rows written and deleted are counted by temporary triggers on the store's own
connection (TEMP: nothing is added to the file); sizes by SQLite's dbstat, after a WAL checkpoint.

A whole day (1,440 ticks) takes too long on a loaded 2-core machine, so `--ticks N` runs N ticks
with `state.history_s` set to `--history` (default 10 minutes): the tables it governs (ticks,
actions, lifecycle history, closed records) are shown to stop growing once the window is full;
the day's file is then extrapolated, and said to be: every table's bytes per row times the rows a
day leaves in it (rates are kept at least a day: one tick_rates row a tick, or, in a store before
loop/state/store_history.py, a rates row per workload a tick; layouts the newest LAYOUTS_KEPT;
the others, at the default history of 7 days, keep all of the day's ticks). A tick row's whole
summary is kept for the newest FULL_TICKS ticks only: those bytes are counted once, as measured,
and the rest of the table per row.

The store's own CPU a tick (`store_cpu_s_median`) is the CPU of the calling thread inside the
Store's public methods (each wrapped; a call made inside another is counted once), beside the
whole tick's CPU (`cpu_s_median`). Run from an exported older tree, the same script measures the
store before (the imports fall back).

    nice .venv/bin/python benchmarks/store_size.py [--instances 1000] [--ticks 90] [--history 1800] [--write]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import sys
import tempfile
import threading
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

try:
    from autoscaler.loop.state.store_history import FULL_TICKS, LAYOUTS_KEPT
except ImportError:  # a store before store_history.py: 500 whole layouts, every summary whole
    FULL_TICKS, LAYOUTS_KEPT = 0, 500

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


def time_store(store: Any) -> list[float]:
    """Wrap each public method of `store` (on the instance) to add the CPU seconds of the calling
    thread to the returned cell; a call made inside another counted once."""
    spent, inside, lock = [0.0], threading.local(), threading.Lock()

    def wrap(method: Any) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            if getattr(inside, "on", False):
                return method(*args, **kwargs)
            inside.on, start = True, time.thread_time()
            try:
                return method(*args, **kwargs)
            finally:
                inside.on = False
                with lock:
                    spent[0] += time.thread_time() - start

        return timed

    for name, attr in vars(type(store)).items():
        if not name.startswith("_") and callable(attr) and not isinstance(attr, (staticmethod, classmethod)):
            setattr(store, name, wrap(getattr(store, name)))
    return spent


def full_summaries(db: Any) -> list[int]:
    """[rows, bytes] of the whole summaries kept (none in a store before store_history.py)."""
    if "full_summary" not in {r[1] for r in db.execute("PRAGMA table_info(ticks)").fetchall()}:
        return [0, 0]
    row = db.execute("SELECT COUNT(full_summary), COALESCE(SUM(LENGTH(full_summary)), 0) FROM ticks").fetchone()
    return [int(row[0]), int(row[1])]


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
        spent = time_store(bench.store)
        rng, base = random.Random(seed), {w.name: w.rate_rps for w in bench.policy.workloads}
        samples, work, cpu, store_cpu = [], [], [], []
        for n in range(1, ticks + 1):
            bench.wander(rng, base)
            before = spent[0]
            _, fig = bench.tick()
            cpu.append(fig["cpu_s"])
            store_cpu.append(round(spent[0] - before, 4))
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
                            "full_summaries": full_summaries(db),
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
            "store_cpu_s": store_cpu,
            "store_cpu_s_median": sorted(store_cpu)[len(store_cpu) // 2],
        }


def day_estimate(last: dict[str, Any], workloads: int, history_ticks: int, per_tick: dict[str, Any]) -> dict[str, Any]:
    """The file after a day at the default history (7 days: nothing dropped within the day but
    rates older than a day): each table's bytes per row now times the rows a day leaves in it
    (the ticks' whole summaries, FULL_TICKS of them at most, counted once)."""
    out: dict[str, float] = {}
    tables = [t for t in last["rows"] if t in per_tick]
    for table in tables:
        rows, size = last["rows"][table], last["table_bytes"].get(table, 0)
        whole = 0.0
        if table == "ticks":  # [rows, bytes] of whole summaries; a day keeps FULL_TICKS of them
            kept, whole_bytes = last.get("full_summaries", [0, 0])
            size, whole = size - whole_bytes, whole_bytes * FULL_TICKS / kept if kept else 0.0
        per_row, added = (size / rows if rows else 0.0), per_tick[table]["insert"] - per_tick[table]["delete"]
        if table == "rates":  # before store_history.py: a row per workload a tick
            day_rows = workloads * DAY_TICKS
        elif table == "tick_rates":  # a row a tick
            day_rows = DAY_TICKS
        elif table in ("ticks", "actions", "instance_history"):  # every row the day writes stays
            day_rows = rows + per_tick[table]["insert"] * (DAY_TICKS - history_ticks)
        elif table == "layouts":  # the newest LAYOUTS_KEPT
            day_rows = min(LAYOUTS_KEPT, rows + per_tick[table]["insert"] * (DAY_TICKS - last["tick"]))
        else:  # instances, applied: the fleet's own size, and what it still adds
            day_rows = rows + max(0.0, added) * (DAY_TICKS - last["tick"])
        out[table] = per_row * day_rows + whole
    out["meta"] = last["table_bytes"].get("meta", 0)
    return {"table_bytes": {t: round(v) for t, v in out.items()}, "total_mb": sum(out.values()) / 1e6}


def derive(doc: dict[str, Any]) -> None:
    """The quoted figures and tables from a run's samples and per-tick writes (kept in the file,
    so `--again` can derive them anew without running the fleet again)."""
    history_ticks = round(doc["history_s"] / 60)
    full = doc["work"][history_ticks + 10 :] or doc["work"]  # the ticks after the window filled
    tables = list(doc["samples"][-1]["rows"])  # the store's own tables (those of its revision)
    per_tick = {t: {op: sum(w.get(t, {}).get(op, 0) for w in full) / len(full) for op in OPS} for t in tables}
    last = doc["samples"][-1]
    first_full = next((s for s in doc["samples"] if s["tick"] >= history_ticks + 10), last)
    day = day_estimate(last, doc["workloads"], history_ticks, per_tick)
    doc.pop("per_tick_median", None)
    doc.update(day_estimate=day, per_tick_mean=per_tick)
    fig = doc["figures"] = {}
    fig.update(instances=doc["instances"], workloads=doc["workloads"], ticks=doc["ticks"], history_s=doc["history_s"])
    fig["file_mb_end"] = round(last["file_bytes"] / 1e6, 6)
    fig["day_mb_estimate"] = round(day["total_mb"], 6)
    # at 2,000 instances: every table taken as growing in proportion to the fleet (rows a tick and
    # bytes a row: instances, workloads, servers); only the compact tick summaries do not, so it
    # errs high
    fig["day_mb_at_2000_instances"] = round(day["total_mb"] * 2000 / doc["instances"], 6)
    for table, size in day["table_bytes"].items():
        fig[f"day_mb_{table}"] = round(size / 1e6, 6)
    fig["rows_written_per_tick"] = round(sum(v["insert"] + v["update"] for v in per_tick.values()), 6)
    fig["rows_deleted_per_tick"] = round(sum(v["delete"] for v in per_tick.values()), 6)
    for table in tables:
        fig[f"{table}_inserted_per_tick"] = round(per_tick[table]["insert"], 6)
        fig[f"{table}_bytes_per_row"] = round(last["table_bytes"].get(table, 0) / max(1, last["rows"][table]), 1)
    for table in ("ticks", "actions", "instance_history"):
        fig[f"{table}_rows_window_full"] = first_full["rows"][table]
        fig[f"{table}_rows_end"] = last["rows"][table]
    fig["cpu_s_median"] = doc["cpu_s_median"]
    if "store_cpu_s_median" in doc:
        fig["store_cpu_s_median"] = doc["store_cpu_s_median"]
    rows = ["| tick | file MB | ticks | actions | lifecycle history | layouts | rate rows | load |"]
    rows.append("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for s in doc["samples"]:
        c = s["rows"]
        rows.append(
            f"| {s['tick']} | {s['file_bytes'] / 1e6:.1f} | {c['ticks']} | {c['actions']:,} | "
            f"{c['instance_history']} | {c['layouts']} | {c.get('tick_rates', c.get('rates', 0)):,} | "
            f"{s['load_average']} |"
        )
    doc["tables"] = {"samples": rows}
    if "before" in doc:
        doc["tables"]["by_table"] = by_table(doc["before"], doc)


def by_table(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """The day's MB per table, before (a run of an older store: `--before`) and after."""

    def day_mb(doc: dict[str, Any]) -> dict[str, float]:
        sizes = {t: b / 1e6 for t, b in doc["day_estimate"]["table_bytes"].items()}
        sizes["rates"] = sizes.pop("rates", 0.0) + sizes.pop("tick_rates", 0.0) + sizes.pop("rate_names", 0.0)
        return sizes

    old, new = day_mb(before), day_mb(after)
    rows = ["| table | before: MB a day | after: MB a day |", "| --- | --- | --- |"]
    for table in sorted(old, key=lambda t: -old[t]):
        rows.append(f"| {table} | {old[table]:,.1f} | {new.get(table, 0.0):,.1f} |")
    rows.append(f"| all | {sum(old.values()):,.1f} | {sum(new.values()):,.1f} |")
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--instances", type=int, default=1000)
    ap.add_argument("--ticks", type=int, default=30)
    ap.add_argument("--history", type=float, default=600.0)
    ap.add_argument("--every", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--again", action="store_true", help="derive the figures anew from the results file's samples")
    ap.add_argument("--before", type=Path, help="a results file of an older store's run, compared table by table")
    args = ap.parse_args()
    logging.disable(logging.CRITICAL)  # targets out of reach and slow ticks are expected here
    res = Results("store_size", "nice .venv/bin/python benchmarks/store_size.py " + " ".join(sys.argv[1:]))
    if args.again:
        res.doc = json.loads(res.path.read_text())
        res.doc["derived_again"] = "benchmarks/store_size.py --again --write"
    else:
        r = run(args.instances, args.ticks, args.history, args.seed, args.every)
        res.doc.update(r, history_s=args.history, ticks=args.ticks)
    if args.before:
        old = json.loads(args.before.read_text())
        keep = ("command", "commit", "date", "load_average_start", "load_average_end", "figures", "day_estimate")
        res.doc["before"] = {k: old[k] for k in keep if k in old}
    derive(res.doc)
    print("\n".join(res.doc["tables"]["samples"] + res.doc["tables"].get("by_table", [])))
    print(json.dumps(res.doc["figures"], indent=1))
    if args.write:
        if args.again:  # the run's own wall and CPU seconds and load stay
            res.path.write_text(json.dumps(res.doc, indent=1, sort_keys=True) + "\n")
        else:
            res.write()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
