"""Agent calls in a bounded pool, each under a deadline, answers in the order asked.

A tick asks every live agent for its status and applies every changed assignment. One at a time,
150 agents at 0.2 s each fill a 30 s interval, and one agent that does not answer holds the tick
for its whole timeout. Here at most `agents.max_concurrency` calls start at once; a call that has
not returned by its deadline counts as unreachable (TransportError, retried next tick, the agent
is marked silent as any other that does not answer), and the tick goes on without it. The results
come back in the order of the calls, so what the tick does with them does not depend on which
agent answered first.

The deadline is the transport's own (connect + command timeout): the transport is expected to
give up by then itself; the pool's wait is the backstop for a call stuck where no timeout reaches
(its thread is left to finish on its own; the pool does not wait for it, and it starts no call after).

A slow or dead agent must not starve the healthy ones (what HAProxy's and Envoy's users expect of a
pool of backends, and Karpenter's of a controller):
- a call that has run past its grace (`grace_s`: 0.5 s, or a quarter of a shorter deadline) gives
  its slot back: the next queued call starts in an extra thread while the slow one runs on to its
  own deadline. A hung agent then holds a slot for the grace, not for its deadline (20 hung agents
  among 2,000, each holding one of 32 slots for its 3 s deadline, added ~2 s to a ~3 s tick).
- `call_laned`: the agents that did not answer last time (suspects) are asked in a lane of their
  own, beside the main pool, so a node that is still hung holds none of the main pool's slots.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar, cast

from autoscaler.config.policy import AgentsConfig
from autoscaler.transport.base import TransportError

T = TypeVar("T")
R = TypeVar("R")

BACKSTOP_S = 2.0  # on top of the deadline: the transport's own timeout should fire first
GRACE_S = 0.5  # a call this old is slow: its slot goes to the next call (see grace_s)


def grace_s(deadline_s: float) -> float:
    """How long a call holds its slot before the next queued call may start beside it.

    Not a timeout: no call is cut short at it, it only says when a call stops counting against
    `max_concurrency`. A healthy agent call is one round trip on a pooled connection (50 ms in
    benchmarks/fleet_scale.py, tens to a few hundred ms over SSH); 0.5 s is well past that, and
    a sixth of the benchmark's 3 s deadline (an 80th of the default 40 s). Too short costs at
    most `max_concurrency` extra threads waiting on sockets; too long lets hung nodes hold slots.
    A quarter of a shorter deadline keeps it well inside the deadline (tests, local agents).
    Derived, not an `agents` setting: the callers pass only the pool's width and the deadline,
    and there is little for an operator to tune here."""
    return min(GRACE_S, deadline_s / 4)


def call_all(
    fn: Callable[[T], R],
    items: Sequence[T],
    max_concurrency: int,
    deadline_s: float,
    grace: float | None = None,
) -> list[R | TransportError]:
    """`fn(item)` for each item, at most `max_concurrency` started at once; each result or the
    TransportError it raised (a call past `deadline_s` is one), in the order of `items`.

    A call past its grace (default `grace_s(deadline_s)`) gives its slot to the next queued call,
    in an extra thread, and runs on to its deadline: at most `max_concurrency` calls younger than
    the grace and at most twice that in flight. The extra threads are bounded so that a sick
    fleet (every agent slow: a partition, a saturated bastion or NAT) does not open a connection
    to every node at once: past `max_concurrency` slow calls it is not a few bad nodes, more
    threads would only add load on the shared bottleneck, and the batch then costs at most
    ceil(n / 2 x max_concurrency) deadlines. `max_concurrency` 1 (one call at a time, asked for)
    runs the calls one after the other, in the caller's thread."""
    if len(items) <= 1 or max_concurrency <= 1:
        return [_one(fn, item) for item in items]
    hold = grace_s(deadline_s) if grace is None else grace
    return _Batch(fn, items, min(max_concurrency, len(items)), hold, deadline_s + BACKSTOP_S).run(deadline_s)


def call_laned(
    fn: Callable[[T], R], items: Sequence[T], suspect: Sequence[bool], max_concurrency: int, deadline_s: float
) -> list[R | TransportError]:
    """`call_all`, with the items flagged in `suspect` (an agent silent last time) asked in a lane
    of their own: started first, run beside the main pool, each call under the same deadline; the
    results in the order of `items` all the same.

    Without it, 20 hung agents among 2,000 (one in 100) each held one of the 32 slots for its whole
    3 s deadline: the healthy reads queued behind them, ~2 s on the tick. Here the main pool keeps
    all `max_concurrency` slots for the agents that answered last time (the grace alone would
    still give each hung suspect a slot for 0.5 s). The lane is a pool as wide as the main one,
    not narrower: k hung suspects in it cost ceil(k / 2c) deadlines in series (a suspect past the
    grace gives its slot to the next), and its threads only wait on a socket; it starts no more
    threads than there are suspects. So at most 2 x `max_concurrency` calls younger than the grace
    are in flight, and 4 x in all (plus the lane's own thread), the extra only while agents are
    slow or silent. `max_concurrency` 1 (one call at a time, asked for) stays one lane."""
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


@dataclass(frozen=True)
class _Raised:
    """A call's error that is not the transport's (a bug): raised again in the caller's thread."""

    error: BaseException


_PENDING = object()  # no answer yet


class _Batch(Generic[T, R]):
    """One `call_all`: worker threads take the queued calls in order; the caller's thread ages
    the running calls (grace, limit), starts extra threads for slots that slow calls gave back,
    and decides when the batch is over.

    A worker that finishes a call takes the next one itself if the bounds allow (so a thread
    serves many calls, and an answer wakes no one), else it ends: the extra threads end with
    their slow calls, and no thread starts a call once `run` has returned. The caller wakes at
    the oldest young call's grace, at the oldest running call's limit, on the last answer, or
    when a worker ends: a few times a second, not at every answer (0.1 ms of CPU each, 0.2 s a
    tick at 2,000 agents)."""

    def __init__(self, fn: Callable[[T], R], items: Sequence[T], width: int, grace: float, limit_s: float) -> None:
        self.fn, self.items, self.width = fn, items, width
        self.grace, self.limit_s = min(grace, limit_s), limit_s
        self.cond = threading.Condition()
        self.queued = 0  # the next call to start
        self.young: dict[int, float] = {}  # running, not yet past the grace: index -> start, in start order
        self.slow: dict[int, float] = {}  # running past the grace, in start order
        self.out: list[object] = [_PENDING] * len(items)
        self.answered = 0
        self.over = False

    def run(self, deadline_s: float) -> list[R | TransportError]:
        """Every answer, or a TransportError for a call past its limit or never started."""
        with self.cond:
            try:
                while self._start_one():
                    pass
                while self.answered < len(self.items):
                    now = time.monotonic()
                    self._age(now)
                    while self._start_one():
                        pass
                    wake = self._next_wake(now)
                    if wake is None:  # every call still running is past its limit; none can start
                        break
                    self.cond.wait(wake - now)
            finally:
                self.over = True  # no call starts once the batch is over
            out = list(self.out)
        return [self._answer(o, deadline_s) for o in out]

    @staticmethod
    def _answer(out: object, deadline_s: float) -> R | TransportError:
        if out is _PENDING:
            return TransportError(f"no answer within the deadline ({deadline_s:g} s)")
        if isinstance(out, _Raised):
            raise out.error
        return cast("R | TransportError", out)

    def _take(self) -> int | None:
        """The next queued call, marked started, if the bounds allow one more (lock held)."""
        if self.over or self.queued == len(self.items):
            return None
        if len(self.young) >= self.width or len(self.young) + len(self.slow) >= 2 * self.width:
            return None
        n, self.queued = self.queued, self.queued + 1
        self.young[n] = time.monotonic()
        return n

    def _start_one(self) -> bool:
        n = self._take()
        if n is None:
            return False
        threading.Thread(target=self._work, args=(n,), name=f"igniter-agent-{n}", daemon=True).start()
        return True

    def _work(self, n: int | None) -> None:
        while n is not None:
            try:
                answer: object = _one(self.fn, self.items[n])
            except BaseException as exc:  # raised again in the caller's thread
                answer = _Raised(exc)
            with self.cond:
                if self.young.pop(n, None) is None:
                    del self.slow[n]
                self.out[n] = answer
                self.answered += 1
                n = self._take()
                if n is None or self.answered == len(self.items):
                    self.cond.notify()

    def _age(self, now: float) -> None:
        """Young calls past the grace become slow, giving their slots back (lock held)."""
        while self.young:
            n, began = next(iter(self.young.items()))
            if began + self.grace > now:
                return
            del self.young[n]
            self.slow[n] = began

    def _next_wake(self, now: float) -> float | None:
        """When the batch next needs a look: the oldest young call's grace, or the oldest slow
        call's limit that is still ahead; None when no call can still answer in time."""
        if self.young:
            return next(iter(self.young.values())) + self.grace
        ahead = (began + self.limit_s for began in self.slow.values() if began + self.limit_s > now)
        return next(ahead, None)


def agent_deadline_s(cfg: AgentsConfig) -> float:
    """One agent call's deadline: reaching the node (connect) plus the command itself."""
    return cfg.connect_timeout_s + cfg.command_timeout_s
