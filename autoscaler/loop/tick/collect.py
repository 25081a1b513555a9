"""The cyclic garbage collector held off during a tick; the tick's survivors frozen after it.

A tick at fleet scale allocates a few hundred thousand containers (statuses, records, the
forecast state, the layout and the views built from them). Most die by reference counting as
soon as they are dropped, but each allocation counts towards the collector's thresholds: at
2,000 instances a steady tick triggered about 400 young, 35 middle and 2 full collections, which
re-scanned the same survivors over and over for 0.28 s of a 1.2 s tick (measured with
gc.callbacks). So the collector is off during the tick.

What survives a tick is mostly what the next one reads (the layout, the store's caches, the
planner's memos), and hardly any of it is cyclic garbage: in a replay of 1,000 workloads, 120
ticks left about 1,000 objects for the collector to free in all. Collecting the young generation
at each tick's end still scanned every survivor once and promoted it, and the older generations'
collections scanned them all again: 5.6 s of the 88 s that replay took (gc.callbacks). Instead
each tick's survivors are frozen (`gc.freeze`: moved to the permanent generation, which no
collection scans, in constant time), and the whole heap is collected (`gc.unfreeze`, then
`gc.collect`) every EVERY ticks: 0.1 to 0.5 s at 1,000 workloads, once in 100 ticks. (Counting
the frozen objects to collect on their growth instead costs a walk of them all, 10 to 20 ms a
tick there.) That replay (`benchmarks/fleet_scale_sim.py --workloads 1000 --rows 30 --plan-on
interval`, this code and the code before, alternating, two runs each) took 76.7 and 79.5 s of
CPU against 103.3 and 106.1 s, the same cost and attainment; 12 rows peaked at 304 MB against 301.

What it costs: garbage in reference cycles made during a tick is freed up to EVERY ticks later
instead of at the tick's end. Nothing else changes: collection frees memory only, and no object
of the controller's has a finalizer that acts. A collector the process turned off (gc.disable)
stays off, and nothing is frozen then.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

EVERY = 100  # ticks between full collections (50 min at the default interval_s of 30 s)


@dataclass
class Frozen:
    """The collector's book across ticks (the collector is the process's, so is the book)."""

    since_full: int | None = None  # ticks since the last full collection (None: none yet)


_BOOK = Frozen()


@contextmanager
def held_off(book: Frozen = _BOOK) -> Iterator[None]:
    """The collector off for the block; once it ends (also by an exception), back on and the
    block's survivors frozen (`settle`)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        settle(book)


def settle(book: Frozen) -> bool:
    """Freeze what survived; every EVERY ticks (and the first time) collect the whole heap
    first. Returns whether it collected."""
    if book.since_full is not None and book.since_full + 1 < EVERY:
        gc.freeze()
        book.since_full += 1
        return False
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    book.since_full = 0
    return True
