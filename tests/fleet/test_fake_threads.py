"""FakeProvider under the actuator's launch threads (loop/steps/launches.py sends a run of launches
from a pool where a provider declares `launch_concurrency`, as the fleet benchmark's does)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from autoscaler.fleet.fake import FakeProvider

pytestmark = pytest.mark.unit


@pytest.fixture
def often_switching() -> Iterator[None]:
    """Threads switch far more often than by default, so a race shows within a short test."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


def test_concurrent_launches_get_distinct_ids_and_are_all_listed(often_switching: None) -> None:
    provider = FakeProvider()
    slots = [f"s{k:04d}" for k in range(400)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        launched = list(pool.map(lambda s: provider.launch(s, "p3.2xlarge", 1), slots))
    assert len({i.id for i in launched}) == len(slots)
    assert sorted(i.slot for i in provider.list_instances()) == slots


def test_a_relaunch_of_the_same_slot_and_attempt_returns_one_instance(often_switching: None) -> None:
    provider = FakeProvider()
    with ThreadPoolExecutor(max_workers=8) as pool:
        launched = list(pool.map(lambda _: provider.launch("s0", "p3.2xlarge", 1), range(64)))
    assert len({i.id for i in launched}) == 1
    assert len(provider.list_instances()) == 1
