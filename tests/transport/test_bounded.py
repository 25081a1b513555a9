"""transport/bounded.py: agent calls in a bounded pool, answers in the order asked, each under a deadline."""

from __future__ import annotations

import threading
import time

import pytest

from autoscaler.transport import bounded
from autoscaler.transport.base import TransportError
from autoscaler.transport.bounded import call_all

pytestmark = pytest.mark.unit


def test_answers_come_in_the_order_asked_whoever_answers_first() -> None:
    def slow_first(n: int) -> int:
        time.sleep(0.05 if n == 0 else 0.0)
        return n * 10

    assert call_all(slow_first, list(range(20)), 8, 5.0) == [n * 10 for n in range(20)]


def test_at_most_max_concurrency_calls_are_in_flight() -> None:
    lock, now, peak = threading.Lock(), [0], [0]

    def call(_: int) -> None:
        with lock:
            now[0] += 1
            peak[0] = max(peak[0], now[0])
        time.sleep(0.02)
        with lock:
            now[0] -= 1

    call_all(call, list(range(40)), 4, 5.0)
    assert 2 <= peak[0] <= 4


def test_a_transport_error_is_that_call_s_answer_only() -> None:
    def call(n: int) -> int:
        if n == 3:
            raise TransportError("node 3 refused")
        return n

    out = call_all(call, list(range(6)), 3, 5.0)
    assert [o for o in out if not isinstance(o, TransportError)] == [0, 1, 2, 4, 5]
    assert isinstance(out[3], TransportError) and out[3].retryable


def test_a_call_stuck_past_its_deadline_costs_the_deadline_not_the_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    """One call that never returns (its transport's timeout did not fire): the others answer, it
    counts as unreachable, and call_all returns after the deadline plus the backstop (0.2 s here,
    2 s in the service)."""
    monkeypatch.setattr(bounded, "BACKSTOP_S", 0.2)
    release = threading.Event()

    def call(n: int) -> int:
        if n == 0:
            release.wait(30)
        return n

    start = time.monotonic()
    out = call_all(call, list(range(10)), 4, 0.5)
    took = time.monotonic() - start
    release.set()
    assert out[1:] == list(range(1, 10))
    assert isinstance(out[0], TransportError) and out[0].retryable and "deadline" in str(out[0])
    assert 0.5 <= took < 0.5 + bounded.BACKSTOP_S + 1.0


def test_calls_queued_behind_stuck_ones_that_hold_every_thread_are_given_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two slots, five calls that never return (their transport's timeout did not fire): the
    first two give their slots back at the grace, the next two start in extra threads and get
    stuck too; then the batch holds its bound, twice the slots (4 in flight, the fifth never
    starts), and the calls queued behind are given up at the stuck calls' limit. Calls that
    answered before keep their answers; nothing starts once call_all has returned, and the extra
    threads end with their calls."""
    monkeypatch.setattr(bounded, "BACKSTOP_S", 0.0)
    release, lock = threading.Event(), threading.Lock()
    started: list[int] = []
    threads: list[threading.Thread] = []
    now, peak = [0], [0]

    def call(n: int) -> int:
        with lock:
            started.append(n)
            threads.append(threading.current_thread())
            now[0] += 1
            peak[0] = max(peak[0], now[0])
        if 3 <= n < 8:
            release.wait(30)
        with lock:
            now[0] -= 1
        return n

    start = time.monotonic()
    out = call_all(call, list(range(12)), 2, 0.2, grace=0.01)
    took = time.monotonic() - start
    release.set()
    for thread in threads:
        thread.join(5)
    assert out[:3] == [0, 1, 2]
    assert all(isinstance(o, TransportError) and "deadline" in str(o) for o in out[3:])
    assert sorted(started) == [0, 1, 2, 3, 4, 5, 6] and peak[0] == 4
    assert not any(thread.is_alive() for thread in threads)
    assert took < 0.2 + 1.0


def test_a_hung_call_gives_its_slot_back_at_the_grace() -> None:
    """Two slots, one call that hangs (until every other call has answered, or 5 s, which the
    test would see): the healthy calls queued behind it all start and answer while it is still in
    flight, two at a time (each pair meets at a barrier that only two calls in flight at once can
    pass), so the hung call holds no slot past its grace. Without the grace the healthy calls
    would go one at a time in the other slot and the first barrier would break."""
    healthy = 10
    pair, lock, answered = threading.Barrier(2, timeout=5), threading.Lock(), [0]
    all_answered = threading.Event()
    hung_until_healthy_answered: list[bool] = []

    def call(n: int) -> int:
        if n == 0:
            hung_until_healthy_answered.append(all_answered.wait(5))
            raise TransportError("node 0: no answer within the deadline")
        pair.wait()
        with lock:
            answered[0] += 1
            if answered[0] == healthy:
                all_answered.set()
        return n * 10

    out = call_all(call, list(range(healthy + 1)), 2, 30.0, grace=0.01)
    assert hung_until_healthy_answered == [True]
    assert isinstance(out[0], TransportError)
    assert out[1:] == [n * 10 for n in range(1, healthy + 1)]  # in the order asked, the hung one first


def test_hung_calls_that_hold_every_slot_do_not_hold_the_queue() -> None:
    """Both slots hang (until the others have answered): every queued call still answers."""
    all_answered, lock, answered = threading.Event(), threading.Lock(), [0]
    waited: list[bool] = []

    def call(n: int) -> int:
        if n < 2:
            waited.append(all_answered.wait(5))
            raise TransportError(f"node {n}: no answer within the deadline")
        with lock:
            answered[0] += 1
            if answered[0] == 20:
                all_answered.set()
        return n

    out = call_all(call, list(range(22)), 2, 30.0, grace=0.01)
    assert waited == [True, True] and out[2:] == list(range(2, 22))


def test_the_grace_is_well_inside_the_deadline() -> None:
    """0.5 s: ten healthy round trips of the benchmark's 50 ms; a quarter of a shorter deadline."""
    assert bounded.grace_s(40.0) == bounded.grace_s(3.0) == bounded.GRACE_S == 0.5
    assert bounded.grace_s(1.0) == 0.25


def test_many_more_calls_than_workers_all_answer_in_order() -> None:
    """The wait looks at a window as wide as the pool, moving along the calls as they answer."""
    out = call_all(lambda n: n * 2, list(range(2000)), 8, 5.0)
    assert out == [n * 2 for n in range(2000)]


def test_hung_suspects_hold_none_of_the_pool_s_slots() -> None:
    """Three suspects that hang and a pool of two: every healthy read starts and answers while the
    suspects still hang (they give up only once the last healthy read has answered, or at their
    30 s deadline, which the test would see). Asked in one pool, the suspects (asked first) would
    hold both slots until their deadline and no healthy read could start before."""
    healthy, suspects = 10, 3
    all_answered, lock, done = threading.Event(), threading.Lock(), [0]
    hung_until_healthy_answered: list[bool] = []

    def call(n: int) -> int:
        if n < suspects:
            hung_until_healthy_answered.append(all_answered.wait(30))
            raise TransportError(f"node {n}: no answer within the deadline")
        with lock:
            done[0] += 1
            if done[0] == healthy:
                all_answered.set()
        return n

    items = list(range(suspects + healthy))
    out = bounded.call_laned(call, items, [n < suspects for n in items], 2, 30.0)
    assert hung_until_healthy_answered == [True] * suspects
    assert all(isinstance(o, TransportError) for o in out[:suspects])
    assert out[suspects:] == items[suspects:]


def test_laned_answers_come_in_the_order_asked_and_each_lane_keeps_its_bound() -> None:
    """Suspects interleaved with the others; a suspect that answers is an answer like any other.
    Each lane has at most max_concurrency in flight, so both together at most twice that."""
    lock, now, peak = threading.Lock(), {True: 0, False: 0}, {True: 0, False: 0}
    flagged = [n % 3 == 0 for n in range(30)]

    def call(n: int) -> int:
        with lock:
            now[flagged[n]] += 1
            peak[flagged[n]] = max(peak[flagged[n]], now[flagged[n]])
        time.sleep(0.01 if n % 2 else 0.0)
        with lock:
            now[flagged[n]] -= 1
        if n == 9:
            raise TransportError("node 9 refused")
        return n * 10

    out = bounded.call_laned(call, list(range(30)), flagged, 3, 5.0)
    assert [o for n, o in enumerate(out) if n != 9] == [n * 10 for n in range(30) if n != 9]
    assert isinstance(out[9], TransportError)
    assert 1 <= peak[True] <= 3 and 1 <= peak[False] <= 3


def test_laned_without_suspects_or_with_one_call_at_a_time_is_call_all() -> None:
    """No suspects, only suspects, or max_concurrency 1 (one call at a time, as asked): one lane."""
    threads: set[str] = set()

    def call(n: int) -> int:
        threads.add(threading.current_thread().name)
        return n

    assert bounded.call_laned(call, [0, 1, 2], [True, False, True], 1, 5.0) == [0, 1, 2]
    assert threads == {threading.current_thread().name}
    assert bounded.call_laned(call, [0, 1], [False, False], 4, 5.0) == [0, 1]
    assert bounded.call_laned(call, [0, 1], [True, True], 4, 5.0) == [0, 1]
    with pytest.raises(ValueError, match="2 suspect flags for 3 calls"):
        bounded.call_laned(call, [0, 1, 2], [True, False], 4, 5.0)


def test_an_error_that_is_not_the_transport_s_comes_back_from_the_suspects_lane() -> None:
    def call(n: int) -> int:
        if n == 0:
            raise RuntimeError("a bug, not a node")
        return n

    with pytest.raises(RuntimeError, match="a bug"):
        bounded.call_laned(call, [0, 1, 2], [True, False, False], 4, 5.0)
