"""Agent calls in a bounded pool, each under a deadline, answers in the order asked.

A tick asks every live agent for its status and applies every changed assignment. One at a time,
150 agents at 0.2 s each fill a 30 s interval, and one agent that does not answer holds the tick
for its whole timeout. Here at most `agents.max_concurrency` calls are in flight; a call that has
not returned by its deadline counts as unreachable (TransportError, retried next tick, the agent
is marked silent as any other that does not answer), and the tick goes on without it. The results
come back in the order of the calls, so what the tick does with them does not depend on which
agent answered first.

The deadline is the transport's own (connect + command timeout): the transport is expected to
give up by then itself; the pool's wait is the backstop for a call stuck where no timeout reaches
(its thread is left to finish on its own; the pool does not wait for it).

`call_laned` keeps a dead backend from starving the healthy ones, as Karpenter's and HAProxy's
users expect of a controller: the agents that did not answer last time (suspects) are asked in a
lane of their own, beside the main pool, so a hung node holds a lane slot for its deadline, never
one of the `max_concurrency` that the answering agents share.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ALL_COMPLETED, Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_all
from typing import TypeVar

from autoscaler.config.policy import AgentsConfig
from autoscaler.transport.base import TransportError

T = TypeVar("T")
R = TypeVar("R")

BACKSTOP_S = 2.0  # on top of the deadline: the transport's own timeout should fire first


def call_all(
    fn: Callable[[T], R], items: Sequence[T], max_concurrency: int, deadline_s: float
) -> list[R | TransportError]:
    """`fn(item)` for each item, at most `max_concurrency` at once; each result or the
    TransportError it raised (a call past `deadline_s` is one), in the order of `items`."""
    if len(items) <= 1 or max_concurrency <= 1:
        return [_one(fn, item) for item in items]
    workers = min(max_concurrency, len(items))
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="igniter-agent")
    started: dict[int, float] = {}  # item index -> when its call began

    def run(n: int, item: T) -> R | TransportError:
        started[n] = time.monotonic()
        return _one(fn, item)

    try:
        futures = [pool.submit(run, n, item) for n, item in enumerate(items)]
        _wait(futures, started, deadline_s + BACKSTOP_S, workers)
        return [_result(f, deadline_s) for f in futures]
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def call_laned(
    fn: Callable[[T], R], items: Sequence[T], suspect: Sequence[bool], max_concurrency: int, deadline_s: float
) -> list[R | TransportError]:
    """`call_all`, with the items flagged in `suspect` (an agent silent last time) asked in a lane
    of their own: started first, run beside the main pool, each call under the same deadline; the
    results in the order of `items` all the same.

    Without it, 20 hung agents among 2,000 (one in 100) each held one of the 32 slots for its whole
    3 s deadline: the healthy reads queued behind them, ~2 s on the tick. Here the main pool keeps
    all `max_concurrency` slots for the agents that answered last time. The lane is as wide as the
    main pool, not narrower: k hung suspects in a lane of c cost ceil(k/c) deadlines in series, and
    its threads only wait on a socket; it starts no more threads than there are suspects. So at
    most 2 x `max_concurrency` calls are in flight (plus the lane's own thread), twice only while
    agents are silent. `max_concurrency` 1 (one call at a time, asked for) stays one lane."""
    if len(suspect) != len(items):
        raise ValueError(f"{len(suspect)} suspect flags for {len(items)} calls")
    lane = [n for n, flagged in enumerate(suspect) if flagged]
    if not lane or len(lane) == len(items) or max_concurrency <= 1:
        return call_all(fn, items, max_concurrency, deadline_s)
    main = [n for n, flagged in enumerate(suspect) if not flagged]
    side: list[list[R | TransportError]] = []
    failure: list[BaseException] = []

    def ask_suspects() -> None:
        try:
            side.append(call_all(fn, [items[n] for n in lane], max_concurrency, deadline_s))
        except BaseException as exc:  # raised again in the caller's thread, as call_all would raise it
            failure.append(exc)

    lane_thread = threading.Thread(target=ask_suspects, name="igniter-agent-suspects", daemon=True)
    lane_thread.start()
    answers = dict(zip(main, call_all(fn, [items[n] for n in main], max_concurrency, deadline_s), strict=True))
    lane_thread.join()  # call_all returns by its last call's deadline plus the backstop
    if failure:
        raise failure[0]
    answers.update(zip(lane, side[0], strict=True))
    return [answers[n] for n in range(len(items))]


def _one(fn: Callable[[T], R], item: T) -> R | TransportError:
    try:
        return fn(item)
    except TransportError as exc:
        return exc


def _wait(futures: list[Future[R | TransportError]], started: dict[int, float], limit_s: float, workers: int) -> None:
    """Until every call has answered or is past its own limit (counted from when it began); calls
    still queued behind overdue ones that hold every worker are given up with them.

    Only the first `workers` calls not done (`window`) are looked at: the pool starts calls in the
    order submitted, so a later one cannot have begun while these hold every worker. Each wake-up
    then costs the pool's width, not the batch's length (a rescan of 2,000 futures per answer was
    quadratic: 800,000 `done()` calls a tick at 1,000 agents). It wakes once the window's calls
    that are not overdue have all answered, or at the first one's limit, not at every answer:
    nothing but the end of the wait is decided here (the pool starts queued calls on its own), and
    that end needs every call in the window answered or overdue (a wake-up an answer cost 0.1 ms
    of CPU, 0.2 s a tick at 2,000 agents)."""
    window: list[int] = []
    following = 0  # the next call not yet in the window
    while True:
        window = [n for n in window if not futures[n].done()]
        while len(window) < workers and following < len(futures):
            if not futures[following].done():
                window.append(following)
            following += 1
        if not window:
            return
        now = time.monotonic()
        running = [n for n in window if n in started]
        queued = len(running) < len(window) or following < len(futures)
        overdue = [n for n in running if now - started[n] >= limit_s]
        if len(overdue) == len(running) and (not queued or len(overdue) >= workers):
            return
        late = set(overdue)
        due = [started[n] + limit_s - now for n in running if n not in late]
        waiting = [futures[n] for n in window if n not in late]
        wait_all(waiting, timeout=min(due, default=limit_s), return_when=ALL_COMPLETED)


def _result(future: Future[R | TransportError], deadline_s: float) -> R | TransportError:
    if not future.done():
        future.cancel()
        return TransportError(f"no answer within the deadline ({deadline_s:g} s)")
    return future.result()


def agent_deadline_s(cfg: AgentsConfig) -> float:
    """One agent call's deadline: reaching the node (connect) plus the command itself."""
    return cfg.connect_timeout_s + cfg.command_timeout_s
