"""Dynamic batching with a real (tiny) torch function: merging, limits, delays, failures."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from agents.server.batcher import Batcher, BatchError

pytestmark = pytest.mark.unit


class Recorder:
    """The run function: doubles its input and records every batch size it was given."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.sizes: list[int] = []
        self.delay_s = delay_s

    def __call__(self, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        self.sizes.append(inputs[0].shape[0])
        time.sleep(self.delay_s)
        return [inputs[0] * 2]


def _run_batcher(recorder: Recorder, max_batch: int, delay_s: float) -> Batcher:
    batcher = Batcher(recorder, max_batch, delay_s)
    batcher.start()
    return batcher


def test_concurrent_requests_merge_up_to_max_batch_and_get_their_own_rows() -> None:
    recorder = Recorder(delay_s=0.01)
    batcher = _run_batcher(recorder, max_batch=8, delay_s=0.05)
    try:
        with ThreadPoolExecutor(32) as pool:
            results = list(pool.map(lambda i: batcher.submit([torch.full((1, 3), float(i))], 1), range(32)))
    finally:
        batcher.stop()
    assert [r[0].tolist() for r in results] == [[[2.0 * i] * 3] for i in range(32)]
    assert max(recorder.sizes) == 8 and sum(recorder.sizes) == 32 and len(recorder.sizes) < 32


def test_a_lone_request_waits_about_the_queue_delay() -> None:
    recorder = Recorder()
    batcher = _run_batcher(recorder, max_batch=8, delay_s=0.15)
    try:
        started = time.perf_counter()
        batcher.submit([torch.ones(1, 2)], 1)
        waited = time.perf_counter() - started
    finally:
        batcher.stop()
    assert 0.14 <= waited < 1.0 and recorder.sizes == [1]


def test_a_full_request_runs_without_waiting() -> None:
    batcher = _run_batcher(Recorder(), max_batch=4, delay_s=5.0)
    try:
        started = time.perf_counter()
        batcher.submit([torch.ones(4, 2)], 4)
        assert time.perf_counter() - started < 1.0
    finally:
        batcher.stop()


def test_requests_with_other_item_shapes_are_not_merged() -> None:
    recorder = Recorder(delay_s=0.05)
    batcher = _run_batcher(recorder, max_batch=8, delay_s=0.1)
    shapes = [(1, 2), (1, 3), (1, 2), (1, 3)]
    try:
        with ThreadPoolExecutor(4) as pool:
            outs = list(pool.map(lambda s: batcher.submit([torch.ones(s)], 1), shapes))
    finally:
        batcher.stop()
    assert [tuple(o[0].shape) for o in outs] == shapes


def _refuses_negatives(inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    if inputs[0].sum() < 0:
        raise RuntimeError("negative input")
    return [inputs[0]]


@pytest.mark.parametrize(
    ("max_batch", "bad"),
    [(4, -torch.ones(1, 1)), (2, torch.tensor([[1.0], [1.0], [-5.0]]))],
    ids=["one batch", "the second of two pieces"],
)
def test_a_model_failure_fails_the_request_and_the_thread_survives(max_batch: int, bad: torch.Tensor) -> None:
    batcher = Batcher(_refuses_negatives, max_batch, 0.0)
    batcher.start()
    try:
        with pytest.raises(BatchError, match="model failed: RuntimeError: negative input"):
            batcher.submit([bad], bad.shape[0])
        good = torch.ones(3, 1)
        assert torch.equal(batcher.submit([good], 3)[0], good)
    finally:
        batcher.stop()


@pytest.mark.parametrize("way", ["submit", "infer"])
def test_a_request_larger_than_max_batch_runs_in_pieces_and_is_answered_whole(way: str) -> None:
    """11 items, max batch 4: batches of at most 4 (4 + 4 + 3 alone), the rows back in order."""
    recorder = Recorder()
    batcher = _run_batcher(recorder, max_batch=4, delay_s=0.0)
    x = torch.arange(11 * 2, dtype=torch.float32).reshape(11, 2)
    try:
        if way == "submit":
            (out,) = batcher.submit([x], 11)
        else:
            (out,) = asyncio.run(batcher.infer([x], 11))
    finally:
        batcher.stop()
    assert torch.equal(out, x * 2) and recorder.sizes == [4, 4, 3]


def test_stop_fails_queued_requests_with_503() -> None:
    gate = threading.Event()

    def blocked(inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        gate.wait(5)
        return [inputs[0]]

    batcher = Batcher(blocked, 1, 0.0)
    batcher.start()
    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(batcher.submit, [torch.ones(1, 1)], 1) for _ in range(2)]
        time.sleep(0.1)
        stopper = threading.Thread(target=batcher.stop)
        stopper.start()
        gate.set()
        stopper.join(5)
        errors = [f.exception(5) for f in futures]
    assert sum(isinstance(e, BatchError) and e.status == 503 for e in errors) == 1
