"""The fleet benchmarks measure what they say (benchmarks/store_size.py, benchmarks/_fleet_fakes.py):
a tick's rows written and deleted are counted per table by TEMP triggers that leave the state file
as it was, and a batched termination costs one EC2 call per 1,000 ids."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from autoscaler.loop.state.store import Store

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

import _fleet_fakes as fakes  # noqa: E402
import store_size  # noqa: E402

pytestmark = pytest.mark.unit


def test_writes_are_counted_by_table_and_operation(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite")
    store_size.count_writes(store._db)
    store.add_rates(0.0, {"a": 1.0, "b": 2.0}, {"a": 1.5})  # one row a tick, and its workloads' names
    assert store_size.take_writes(store._db) == {"tick_rates": {"insert": 1}, "rate_names": {"insert": 1}}
    store.add_rates(60.0, {"a": 1.1, "b": 2.1}, {})  # the same workloads: the same names row
    assert store_size.take_writes(store._db) == {"tick_rates": {"insert": 1}}
    store.add_rates(90_000.0, {"a": 1.0, "b": 2.0, "c": 3.0}, {}, keep_s=86_400.0)  # a day later: the first go
    assert store_size.take_writes(store._db) == {
        "tick_rates": {"insert": 1, "delete": 2},
        "rate_names": {"insert": 1},
    }
    sizes = store_size.table_bytes(store._db)
    assert sizes["tick_rates"] > 0 and "writes" not in sizes  # the counters are TEMP: not in the file
    store.close()
    again = Store(tmp_path / "s.sqlite")  # the file opens as a state file, triggers gone with the connection
    again.add_rates(90_060.0, {"a": 1.0}, {})
    assert again.row_counts()["tick_rates"] == 2
    again.close()


def test_a_batched_termination_is_one_call_per_thousand_ids() -> None:
    calls = fakes.Calls()
    provider = fakes.SlowProvider("f")
    provider.calls_by_kind = calls
    ids = [provider.launch(f"s{k}", "p3.2xlarge", 1).id for k in range(1001)]
    calls.take()
    assert provider.terminate_many(ids) == {}
    assert calls.take() == {"ec2.terminate_batch": 2} and provider.list_instances() == []
