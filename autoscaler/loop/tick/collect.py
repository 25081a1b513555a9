"""The cyclic garbage collector held off during a tick, and what survives it dealt with after.

A tick at fleet scale allocates a few hundred thousand containers (statuses, records, the
forecast state, the layout and the views built from them). Most die by reference counting as
soon as they are dropped, but each allocation counts towards the collector's thresholds: at
2,000 instances a steady tick triggered about 400 young, 35 middle and 2 full collections, which
re-scanned the same survivors over and over for 0.28 s of a 1.2 s tick (measured with
gc.callbacks). So the collector is off during the tick.

At its end, by default, the young generation is collected once (30-50 ms at 2,000 instances);
the older generations are collected as the interpreter's thresholds say.

**A process that is the controller's own** (`own_heap`: the `igniter` command, a `--compare`
worker) freezes the tick's survivors instead. What survives a tick is mostly what the next one
reads (the layout, the store's caches, the planner's memos), and hardly any of it is cyclic garbage
(reference counting frees the rest, frozen or not): in a replay of 1,000 workloads the collector
freed about 2,000 objects in 120 ticks (gc.callbacks). Collecting the young generation still
scanned every survivor once and promoted it, and the older generations' collections scanned them
all again, tick after tick: 9 % of that replay's CPU (`benchmarks/fleet_scale_sim.py --split`).
Frozen (`gc.freeze`: moved to the permanent generation, which no collection scans, in constant
time), they are scanned again only by a full collection (`gc.unfreeze`, `gc.collect`, `gc.freeze`),
which frees the cycles among them. The first comes FIRST_AFTER ticks in, the next once the process
has spent AMORTISE times the last one's CPU since it: the full collections cost a fixed share of
the CPU however large the heap (at 1,000 workloads one took about 1 s, and the next came some 75
ticks later). Not at the first tick: a fresh process's heap is imports' work, and its collection
once pushed a 1 s tick past its interval on a slow host. Counting the frozen objects to collect on
their growth instead walks them all, and the young generation's counts at the ticks' ends overstate
it (the objects a tick frees count only while its count is above zero): that rule collected every
fourth tick and cost more than it saved.

Why not in every process: whatever is alive at a tick's end is frozen, a caller's objects too,
and a cycle among them that dies later is freed only by the next full collection. A process
that runs other work beside its controllers (a test suite, a notebook) keeps the plain rule: a
controller and store dropped in a cycle there would hold their SQLite connections until then.

What it costs: garbage in reference cycles made during a tick is freed at its end (plain) or at
the next full collection (frozen) instead of during it. Nothing else changes: collection frees
memory only, and no object of the controller's has a finalizer that acts. A collector the
process turned off (gc.disable) stays off, and nothing is frozen then.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

FIRST_AFTER = 20  # ticks before the first full collection of a process that freezes
AMORTISE = 50  # CPU between full collections, in multiples of the last one's: 2 % of the CPU at most


@dataclass
class Book:
    """The collector's book across ticks (the collector is the process's, so is the book)."""

    freezing: bool = False  # `own_heap`: survivors are frozen
    clock: Callable[[], float] = field(default=time.process_time)
    ticks: int = 0  # ticks settled since the last full collection (or the process's start)
    full_at: float | None = None  # the clock at the end of the last full collection
    full_cost: float = 0.0  # what it took


_BOOK = Book()


def own_heap(book: Book | None = None) -> None:
    """This process is the controller's own: its ticks' survivors are frozen (module docstring)."""
    (book or _BOOK).freezing = True


@contextmanager
def held_off(book: Book | None = None) -> Iterator[None]:
    """The collector off for the block; once it ends (also by an exception), back on and the
    block's survivors collected young or frozen (`settle`)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        settle(book or _BOOK)


def settle(book: Book) -> bool:
    """The young generation collected, or (`book.freezing`) frozen, the whole heap collected first
    when one is due (module docstring). Returns whether the whole heap was collected."""
    if not book.freezing:
        gc.collect(0)
        return False
    book.ticks += 1
    if not _due(book):
        gc.freeze()
        return False
    began = book.clock()
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    book.full_at = book.clock()
    book.full_cost, book.ticks = book.full_at - began, 0
    return True


def _due(book: Book) -> bool:
    if book.full_at is None:
        return book.ticks > FIRST_AFTER
    return book.clock() - book.full_at >= AMORTISE * book.full_cost
