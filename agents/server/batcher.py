"""Dynamic batching: merge concurrent requests up to `max_batch` items, waiting at most `max_delay_s`.

A request larger than `max_batch` (a client may send up to the agent's max_request_items, whatever
the batch the planner gave this server) is queued as pieces of at most `max_batch` items, in
order; its answer is their outputs joined, or the first piece's error.

One thread owns the model, so the model never runs concurrently with itself (as with Triton's
dynamic batcher); the HTTP side only enqueues and awaits a future, so the event loop keeps serving
while a batch runs. The wait is measured from the oldest queued request's arrival, and whatever is
already queued when it expires still joins the batch.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field

import torch

RunFn = Callable[[list[torch.Tensor]], list[torch.Tensor]]
WAIT_SLICE_S = 0.05  # a long queue delay is waited in slices, so a flush or stop is seen at once
BatchHook = Callable[[int, float], None]


class BatchError(Exception):
    """The batch this request was in failed; `status` is the HTTP code to answer with."""

    def __init__(self, message: str, status: int = 500) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Pending:
    """One request waiting for its slice of a batch."""

    inputs: list[torch.Tensor]
    n: int
    arrived: float = field(default_factory=time.monotonic)
    result: Future[list[torch.Tensor]] = field(default_factory=Future)

    def signature(self) -> tuple:
        """Requests merge only when every input has the same per-item shape."""
        return tuple(tuple(t.shape[1:]) for t in self.inputs)

    def finish(self, outputs: list[torch.Tensor] | None, error: BatchError | None = None) -> None:
        """Hand over the result; a request whose waiter gave up (timeout, cancelled) just drops it."""
        try:
            if error is not None:
                self.result.set_exception(error)
            else:
                self.result.set_result(outputs or [])
        except InvalidStateError:
            pass


class Batcher:
    """The batching thread plus the queue the HTTP handlers feed."""

    def __init__(self, run: RunFn, max_batch: int, max_delay_s: float, on_batch: BatchHook | None = None) -> None:
        self._run = run
        self._max_batch = max_batch
        self._max_delay_s = max_delay_s
        self._on_batch = on_batch or (lambda size, seconds: None)
        self._queue: queue.Queue[Pending] = queue.Queue()
        self._carry: Pending | None = None
        self._collecting = 0  # requests taken into the batch being filled (still waiting, for depth())
        self._stopping = threading.Event()
        self._flushing = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="batcher", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def flush(self) -> None:
        """Stop waiting for more requests: a draining server gets no new ones, so run what is queued now."""
        self._flushing.set()

    def stop(self, timeout: float = 5.0) -> None:
        """Finish the batch in flight, then fail whatever is still queued with 503."""
        self._stopping.set()
        if self._thread.ident is not None:  # never started when the model failed to load
            self._thread.join(timeout)
        for item in self._drain():
            item.finish(None, BatchError("server is shutting down", 503))

    def depth(self) -> int:
        """Requests waiting for a batch (the queue-depth gauge), the one being filled included."""
        return self._queue.qsize() + (self._carry is not None) + self._collecting

    def enqueue(self, inputs: list[torch.Tensor], n: int) -> Future[list[torch.Tensor]]:
        """Queue one request; its future gets the request's rows of the batch (or a BatchError)."""
        if self._stopping.is_set():
            raise BatchError("server is shutting down", 503)
        item = Pending(inputs, n)
        self._queue.put(item)
        return item.result

    def submit(self, inputs: list[torch.Tensor], n: int, timeout: float = 60.0) -> list[torch.Tensor]:
        """Enqueue one request and block until its outputs (sliced from the batch) are ready."""
        deadline = time.monotonic() + timeout
        try:
            parts = [f.result(max(0.0, deadline - time.monotonic())) for f in self._enqueue_pieces(inputs, n)]
        except FutureTimeout:
            raise BatchError(f"no result within {timeout:.0f} s", 504) from None
        return _join(parts)

    async def infer(self, inputs: list[torch.Tensor], n: int, timeout: float = 60.0) -> list[torch.Tensor]:
        """`submit` for the event loop: awaits the batch instead of blocking a thread."""
        try:
            async with asyncio.timeout(timeout):
                futures = [asyncio.wrap_future(f) for f in self._enqueue_pieces(inputs, n)]
                if len(futures) == 1:  # the common case, without gather's bookkeeping
                    return await futures[0]
                return _join(list(await asyncio.gather(*futures)))
        except TimeoutError:
            raise BatchError(f"no result within {timeout:.0f} s", 504) from None

    def _enqueue_pieces(self, inputs: list[torch.Tensor], n: int) -> list[Future[list[torch.Tensor]]]:
        """One request as pieces of at most max_batch items (one piece when it fits)."""
        if n <= self._max_batch:
            return [self.enqueue(inputs, n)]
        starts = range(0, n, self._max_batch)
        return [self.enqueue([t[i : i + self._max_batch] for t in inputs], min(self._max_batch, n - i)) for i in starts]

    def _loop(self) -> None:
        while not self._stopping.is_set():
            group = self._collect()
            if group and self._stopping.is_set():  # stopped while the batch filled: it will not run
                for item in group:
                    item.finish(None, BatchError("server is shutting down", 503))
            elif group:
                self._execute(group)
            self._collecting = 0

    def _take(self, timeout: float | None) -> Pending | None:
        """Next request: the one held back from the last batch first."""
        if self._carry is not None:
            item, self._carry = self._carry, None
            return item
        try:
            return self._queue.get(timeout=timeout) if timeout is None or timeout > 0 else self._queue.get_nowait()
        except queue.Empty:
            return None

    def _collect(self) -> list[Pending]:
        """Gather one batch: block briefly for the first request, then fill until full or due."""
        first = self._take(0.1)
        if first is None:
            return []
        group, total = [first], first.n
        self._collecting = 1
        deadline = first.arrived + self._max_delay_s
        while total < self._max_batch:
            remaining = deadline - time.monotonic()
            urgent = self._flushing.is_set() or self._stopping.is_set()
            item = self._take(0.0 if urgent or remaining <= 0 else min(remaining, WAIT_SLICE_S))
            if item is None:
                if urgent or remaining <= 0:
                    break
                continue
            if total + item.n > self._max_batch or item.signature() != first.signature():
                self._carry = item
                break
            group.append(item)
            total += item.n
            self._collecting = len(group)
        return group

    def _execute(self, group: list[Pending]) -> None:
        """Run the merged batch once and hand each request its rows."""
        sizes = [item.n for item in group]
        started = time.perf_counter()
        try:
            merged = [torch.cat(parts) for parts in zip(*(item.inputs for item in group))]
            outputs = self._run(merged)
            pieces = _split(outputs, sizes)
        except Exception as exc:  # the model's own failure goes to the clients, never kills the thread
            error = BatchError(f"model failed: {type(exc).__name__}: {exc}")
            for item in group:
                item.finish(None, error)
            return
        self._on_batch(sum(sizes), time.perf_counter() - started)
        for item, piece in zip(group, pieces):
            item.finish(piece)

    def _drain(self) -> list[Pending]:
        items = [self._carry] if self._carry is not None else []
        self._carry = None
        while True:
            try:
                items.append(self._queue.get_nowait())
            except queue.Empty:
                return items


def _join(parts: list[list[torch.Tensor]]) -> list[torch.Tensor]:
    """A request's outputs from its pieces' (each output joined along the batch dimension)."""
    return parts[0] if len(parts) == 1 else [torch.cat(pieces) for pieces in zip(*parts)]


def _split(outputs: list[torch.Tensor], sizes: list[int]) -> list[list[torch.Tensor]]:
    """Cut every output along the batch dimension into one slice per request."""
    total = sum(sizes)
    for i, out in enumerate(outputs):
        if out.dim() == 0 or out.shape[0] != total:
            raise ValueError(f"output {i} has shape {list(out.shape)}; expected batch dimension {total}")
    per_output = [torch.split(out, sizes) for out in outputs]
    return [list(parts) for parts in zip(*per_output)]
