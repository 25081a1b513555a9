"""planner/kept.py: answers kept by question, bounded in count and in weight, oldest out first."""

from __future__ import annotations

import threading

import pytest

from autoscaler.planner.kept import Kept

pytestmark = pytest.mark.unit


def by_len(key: tuple[int, ...]) -> int:
    return len(key)


def test_the_count_bound_forgets_the_oldest_first() -> None:
    kept: Kept[tuple[int, ...], str] = Kept(2, 100, by_len)
    for i in range(3):
        kept.put((i,), f"plan {i}")
    assert len(kept) == 2 and kept.get((0,)) is None and kept.get((2,)) == "plan 2"


def test_the_weight_bound_keeps_few_heavy_answers_and_many_light_ones() -> None:
    kept: Kept[tuple[int, ...], str] = Kept(1000, 10, by_len)
    for i in range(5):
        kept.put(tuple(range(i * 4, i * 4 + 4)), f"heavy {i}")  # weight 4 each: two fit in 10
    assert [v for _, v in kept.items()] == ["heavy 3", "heavy 4"] and kept.total() == 8
    for i in range(10):
        kept.put((100 + i,), f"light {i}")
    assert len(kept) == 10 and kept.total() == 10 and kept.get((109,)) == "light 9"


def test_an_answer_heavier_than_the_bound_is_not_kept_and_evicts_nothing() -> None:
    kept: Kept[tuple[int, ...], str] = Kept(10, 3, by_len)
    kept.put((1,), "small")
    kept.put((1, 2, 3, 4), "too heavy")
    assert kept.get((1, 2, 3, 4)) is None and kept.get((1,)) == "small" and kept.total() == 1


def test_putting_a_key_again_replaces_its_answer_and_weight() -> None:
    kept: Kept[tuple[int, ...], str] = Kept(10, 10, by_len)
    kept.put((1, 2), "a")
    kept.put((1, 2), "b")
    assert len(kept) == 1 and kept.total() == 2 and kept.get((1, 2)) == "b"
    kept.clear()
    assert len(kept) == 0 and kept.total() == 0


def test_threads_putting_at_once_keep_the_bounds_and_the_count() -> None:
    kept: Kept[tuple[int, ...], int] = Kept(50, 120, by_len)

    def fill(start: int) -> None:
        for i in range(start, start + 2000):
            kept.put((i, i), i)

    threads = [threading.Thread(target=fill, args=(k * 10000,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(kept) <= 50 and kept.total() == 2 * len(kept) <= 120


def test_bad_bounds_are_refused() -> None:
    with pytest.raises(ValueError):
        Kept(0, 10, by_len)
