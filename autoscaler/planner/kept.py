"""Answers kept by question, bounded both in count and in weight. Pure.

A plan is remembered so that the same question costs a lookup (planner/api.py `_fresh`, the
replay's sim/memo.py PlanMemo). A count alone bounds that memory only for small fleets: a plan
of 1,000 workloads holds some 0.4 MB, so the 1,024 fresh plans a long run came to keep held
430 MB (and a `--compare` memo of 4,096 would have held gigabytes). A question's weight (its
number of workloads) bounds the sum as well, so a large fleet keeps a few dozen recent plans,
which is all it asks again (at 1,000 workloads every fresh plan asked again was one of the 4
made before it), while a small fleet keeps as many as its count allows.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Mapping
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Kept(Generic[K, V]):
    """At most `size` answers whose keys weigh at most `weight` in all (`weight_of`), the
    oldest forgotten first (the next questions are mostly the last ones again). Safe to share
    between threads: the API's plan previews run beside the tick."""

    def __init__(self, size: int, weight: int, weight_of: Callable[[K], int]) -> None:
        if size < 1 or weight < 1:
            raise ValueError("size and weight must be at least 1")
        self.size, self.weight, self.weight_of = size, weight, weight_of
        self._kept: dict[K, tuple[V, int]] = {}
        self._total = 0
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        found = self._kept.get(key)
        return None if found is None else found[0]

    def put(self, key: K, value: V) -> None:
        """Keep `value` for `key`; one heavier than `weight` alone is not kept."""
        w = max(1, self.weight_of(key))
        if w > self.weight:
            return
        with self._lock:
            old = self._kept.pop(key, None)
            if old is not None:
                self._total -= old[1]
            self._kept[key] = (value, w)
            self._total += w
            while len(self._kept) > self.size or self._total > self.weight:
                self._total -= self._kept.pop(next(iter(self._kept)))[1]

    def update(self, other: Mapping[K, V]) -> None:
        for key, value in other.items():
            self.put(key, value)

    def items(self) -> list[tuple[K, V]]:
        """The answers kept, oldest first (a copy)."""
        with self._lock:
            return [(k, v) for k, (v, _) in self._kept.items()]

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()
            self._total = 0

    def total(self) -> int:
        """The weight kept now."""
        return self._total

    def __len__(self) -> int:
        return len(self._kept)
