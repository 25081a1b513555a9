"""A tick's reads of instance records as the closed ones pile up (issue 50 item 3).

Every slot's newest attempt is kept after it closes (a new attempt numbers above it: its launch
token is derived from it; loop/state/store.py PRUNE_CLOSED), so a fleet that has run for months
holds far more closed records than open ones. A tick used to read them all: the layout input read
every record for the slot names taken, sync and adoption read every closed key, and the open
records were found by scanning the table (`before`). Then (`scan`, 7764b40) a tick read the open
records through an index on their state, the slot names from `max_attempts` (one covering-index
scan of every slot ever used, no records built), and looked up only the keys of listed instances
that no open record names (`Store.closed_among`). Now (`after`) the slot names come from the
highest number per stem the store keeps (`Store.slot_tops`, loop/state/store_slots.py: a few
rows), and the newest attempts only of the slots a tick may launch (the open ones here).

A new slot's number is one above the highest of its type's names, every name ever used counted
(none is used again). That was a pass over all the names for each new slot (`before`);
`SlotNames` then made one pass per prefix and kept it up (`scan`, 3177f14); now it starts from the
stems' highest numbers the store keeps (`after`). The second table times 100 new slots named
among K names.

Measured on an SQLite state file (what `igniter run` keeps: it remembers no read, store_reads.py)
holding 2,000 open records (READY) and K closed ones, each on a slot of its own. `before` runs the
reads the controller made before, on the schema before (no index on state); `after` the reads it
makes now. Median of --runs, milliseconds a tick.

    nice .venv/bin/python benchmarks/closed_records.py [--closed 0 10000 100000] [--runs 9] [--write]
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _results import Results

from autoscaler.core.fleet.lifecycle import Reason, State, new_record, transition, unclaimed
from autoscaler.core.layout.slots import SlotNames, _ordinal, top_numbers
from autoscaler.fleet.base import Instance
from autoscaler.loop.state.store import Store

OPEN = 2000
NEW_SLOTS = 100


def fill(store: Store, closed: int) -> list[Instance]:
    """`closed` terminated records and OPEN ready ones; returns the instances a listing shows."""
    changes = []
    for i in range(closed):
        rec = transition(new_record(f"f-p3-{i}", 0, "p3", float(i)), Reason.REQUEST, float(i)).record
        changes.append(transition(rec, Reason.SCALE_IN, float(i) + 1))
    listed = []
    for i in range(closed, closed + OPEN):
        rec = new_record(f"f-p3-{i}", 0, "p3", float(i))
        for reason in (Reason.REQUEST, Reason.LAUNCHED, Reason.BOOTED, Reason.AGENT_READY):
            ch = transition(rec, reason, float(i), instance_id=f"i-{i}" if reason is Reason.LAUNCHED else None)
            changes.append(ch)
            rec = ch.record
        listed.append(Instance(id=f"i-{i}", instance_type="p3", slot=rec.slot, state="running", launched_at=float(i)))
    store.apply(changes)
    return listed


def before(store: Store, listed: list[Instance]) -> None:
    """The reads of a tick before: every record (layout input), the open ones (sync, the view),
    every closed key (sync, adoption), the newest attempts (the view)."""
    store.all_records()
    records = store.open_records()
    rows = store._db.execute("SELECT slot, attempt FROM instances WHERE state=?", (State.TERMINATED.value,))
    frozenset((r[0], r[1]) for r in rows.fetchall())
    store.max_attempts()
    assert len(records) == OPEN and listed


def scan(store: Store, listed: list[Instance]) -> None:
    """The reads of a tick at 7764b40: the open records, every slot's newest attempt (the names
    taken), the unclaimed keys looked up."""
    records = store.open_records()
    store.max_attempts()
    store.closed_among(unclaimed(listed, records))
    assert len(records) == OPEN


def after(store: Store, listed: list[Instance]) -> None:
    """The reads of a tick now: the open records, the stems' highest numbers, the newest attempts
    of the slots it may launch, the unclaimed keys looked up."""
    records = store.open_records()
    store.slot_tops()
    store.max_attempts({r.slot for r in records})
    store.closed_among(unclaimed(listed, records))
    assert len(records) == OPEN


def name_before(taken: set[str], prefix: str) -> str:
    """How new_slot named a slot before SlotNames: a pass over every name taken."""
    n = 1 + max((_ordinal(s) for s in taken if s.startswith(prefix)), default=-1)
    taken.add(prefix + str(n))
    return prefix + str(n)


def names_ms(closed: int, runs: int) -> tuple[float, float, float]:
    """100 new slots named among `closed` names: before, scan and after, median ms."""
    names = [f"f-p3-{i}" for i in range(closed)]
    tops = top_numbers(names)  # what the store keeps of them

    def old() -> None:
        taken = set(names)
        for _ in range(NEW_SLOTS):
            name_before(taken, "f-p3-")

    def scanned() -> None:
        taken = SlotNames(names)
        for _ in range(NEW_SLOTS):
            taken.take("f-p3-")

    def new() -> None:
        taken = SlotNames(tops=tops)
        for _ in range(NEW_SLOTS):
            taken.take("f-p3-")

    return median_ms(old, runs), median_ms(scanned, runs), median_ms(new, runs)


def median_ms(fn: Callable[[], None], runs: int) -> float:
    samples = []
    for _ in range(runs):
        start = time.process_time()
        fn()
        samples.append(time.process_time() - start)
    return 1000 * statistics.median(samples)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--closed", type=int, nargs="+", default=[0, 10_000, 100_000])
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--write", action="store_true", help="write benchmarks/results/closed_records.json")
    args = ap.parse_args()
    res = Results("closed_records", "nice .venv/bin/python benchmarks/closed_records.py " + " ".join(sys.argv[1:]))
    res.line("reads", "| closed records | before: ms a tick | scan: ms a tick | after: ms a tick |")
    res.line("reads", "| --- | --- | --- | --- |")
    for k in args.closed:
        with tempfile.TemporaryDirectory(prefix="closed-records-") as tmp:
            old, new = Store(Path(tmp) / "before.sqlite"), Store(Path(tmp) / "after.sqlite")
            old._db.execute("DROP INDEX instances_by_state")  # the schema before
            listed = fill(old, k)
            fill(new, k)
            b = median_ms(functools.partial(before, old, listed), args.runs)
            s = median_ms(functools.partial(scan, new, listed), args.runs)
            a = median_ms(functools.partial(after, new, listed), args.runs)
            old.close()
            new.close()
        res.figure(f"before_ms_{k}", round(b, 1))
        res.figure(f"scan_ms_{k}", round(s, 1))
        res.figure(f"after_ms_{k}", round(a, 1))
        res.line("reads", f"| {k:,} | {b:.1f} | {s:.1f} | {a:.1f} |")
    res.line("names", "")
    res.line("names", f"| names taken | ms for {NEW_SLOTS} new slots: before | scan | after |")
    res.line("names", "| --- | --- | --- | --- |")
    for k in args.closed:
        b, s, a = names_ms(k, args.runs)
        res.figure(f"names_before_ms_{k}", round(b, 1))
        res.figure(f"names_scan_ms_{k}", round(s, 1))
        res.figure(f"names_after_ms_{k}", round(a, 1))
        res.line("names", f"| {k:,} | {b:.1f} | {s:.1f} | {a:.1f} |")
    res.figure("new_slots", NEW_SLOTS)
    res.figure("open_records", OPEN)
    res.figure("runs", args.runs)
    if args.write:
        res.write()


if __name__ == "__main__":
    main()
