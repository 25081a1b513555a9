"""`--compare`'s replays side by side, one worker process per CPU (at most one per replay).

Each replay is independent (its own controller, store, clock and provider), so they run in
parallel as they are. What they read and none changes is sent to each worker once, not with each
replay: the policy, the trace, the fitted performance models (so no worker fits a profile again)
and the plans the parent already made (the static peak's). A worker runs its replays one after
another with one plan memo, so a question one strategy asked is answered from memory for the
next (memo.PlanMemo: the keys hold everything a plan depends on, so no number changes).

Workers are started by `forkserver` where the platform has it (the heavy imports are done once,
in the server, and each worker is forked from it) and else by `spawn`; never by a bare `fork`
of the parent, which may hold threads (a progress bar's). Everything a worker is given is
pickled, which keeps the design correct under either. Where no pool can be started (no
semaphores, a plan function that cannot be pickled), the replays run one after another in this
process; the numbers are the same either way.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import pickle
import queue
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from multiprocessing.context import BaseContext
from pathlib import Path
from typing import Any

from autoscaler.config.policy import Policy
from autoscaler.loop.tick import collect
from autoscaler.loop.tick.records import PlanFn
from autoscaler.model.perfmodel import PerfModel, fitted_perf_models, prime_perf_models
from autoscaler.planner.types import Plan
from autoscaler.sim.engine import SimOptions, simulate
from autoscaler.sim.memo import PlanMemo
from autoscaler.sim.result import SimResult
from autoscaler.sim.traces import Trace
from autoscaler.sim.watch import Watcher

log = logging.getLogger(__name__)

PLAN_MEMO_SIZE = 4096  # plans a worker remembers across its replays (and PlanMemo's weight)
STEP = 0.01  # a worker reports a replay's progress at most once per 1 % of the trace
PRELOAD = ["autoscaler.sim.parallel"]  # imported once by the fork server, inherited by every worker


@dataclass(frozen=True)
class Run:
    """One replay of a compare: its place in the table, its label and its options."""

    index: int
    label: str
    opts: SimOptions


@dataclass(frozen=True)
class Shared:
    """What every replay reads and none changes, sent to each worker once."""

    policy: Policy
    trace: Trace
    plan_fn: PlanFn | None
    models: dict[tuple[Path, int], PerfModel]
    plans: dict[tuple[Any, ...], Plan]


def cpus() -> int:
    """The CPUs this process may run on (its affinity mask where the platform tells it)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def workers_for(runs: int, asked: int | None = None) -> int:
    """`asked` workers, else one per CPU; never more than there are replays, never fewer than 1."""
    return max(1, min(runs, asked if asked is not None else cpus()))


def shared(policy: Policy, trace: Trace, plan_fn: PlanFn | None, plans: PlanMemo) -> Shared:
    return Shared(policy, trace, plan_fn, fitted_perf_models(), dict(plans.plans.items()))


def picklable(value: object) -> bool:
    """Whether `value` can be sent to a worker (a test's closure cannot)."""
    try:
        pickle.dumps(value)
    except (pickle.PicklingError, AttributeError, TypeError):
        return False
    return True


def longest_first(runs: Sequence[Run]) -> list[Run]:
    """The order the pool takes the runs in: the longest first, so that no long replay starts last
    while the other workers idle (greedy scheduling's makespan is best with the longest jobs
    first). Every replay ticks through the same trace; the static peak replays nothing (one
    plan), so it goes last."""
    return sorted(runs, key=lambda run: run.opts.strategy == "static-peak")  # stable among equals


def run_parallel(data: Shared, runs: Sequence[Run], workers: int, watch: Watcher | None) -> list[SimResult] | None:
    """Every run in `workers` processes, results in the runs' order; None if no pool could be
    started (the caller then runs them here). A replay that fails raises here, as it would in
    this process."""
    ctx = _context()
    try:
        events = ctx.Queue()
        pool = ProcessPoolExecutor(workers, mp_context=ctx, initializer=_init, initargs=(data, events))
    except (OSError, ImportError, NotImplementedError) as exc:
        log.warning("compare: no worker processes (%s); running the strategies one after another", exc)
        return None
    with pool:
        futures = {pool.submit(_replay, run): run for run in longest_first(runs)}
        out = _collect(futures, events, watch)
    _drain(events, watch)  # what the workers said last (they flush their queue as they exit)
    for r in out.values():
        r.trace = data.trace  # one trace object for every result, as in one process
    return [out[run.index] for run in runs]


def _collect(futures: dict[Future[SimResult], Run], events: Any, watch: Watcher | None) -> dict[int, SimResult]:
    """Wait for every replay, passing the workers' progress events on as they come."""
    out: dict[int, SimResult] = {}
    pending = set(futures)
    while pending:
        done, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
        _drain(events, watch)
        for f in done:
            run = futures[f]
            out[run.index] = f.result()
            if watch is not None:
                watch.finished(run.index)
    return out


def _drain(events: Any, watch: Watcher | None) -> None:
    while True:
        try:
            kind, index, value = events.get_nowait()
        except queue.Empty:
            return
        if watch is None:
            continue
        if kind == "start":
            watch.started(index, value)
        else:
            watch.advanced(index, value)


def _context() -> BaseContext:
    if "forkserver" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(PRELOAD)
        return ctx
    return multiprocessing.get_context("spawn")


# -- in the worker -------------------------------------------------------------------------------
_data: Shared | None = None
_events: Any = None
_plans = PlanMemo(PLAN_MEMO_SIZE)


def _init(data: Shared, events: Any) -> None:
    """A worker's start: the shared inputs, the parent's fitted models and plans. The process
    runs replays only: its heap is the controllers' own (loop/tick/collect.py)."""
    global _data, _events
    collect.own_heap()
    _data, _events = data, events
    prime_perf_models(data.models)
    _plans.update(data.plans)


def _replay(run: Run) -> SimResult:
    assert _data is not None
    _events.put(("start", run.index, run.label))
    last = [0.0]

    def progress(fraction: float) -> None:
        if fraction - last[0] >= STEP or fraction >= 1.0:
            last[0] = fraction
            _events.put(("progress", run.index, fraction))

    return simulate(_data.policy, _data.trace, run.opts, _data.plan_fn, progress, _plans)
