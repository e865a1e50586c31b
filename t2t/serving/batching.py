"""Dynamic batching for t2t-serve: requests that arrive close together run as one batch.

    batcher = Batcher(run, BatchingOptions(max_batch_size=32, batch_timeout_micros=2000),
                      executor)
    outputs = await batcher.predict({"inputs": np.array([b"1 0 1"], object)}, 1)

`run` maps {input name: array [B, ...]} to {output name: array [B, ...]} and is called in
`executor`'s threads (TensorFlow releases the GIL while it computes). A batch starts when
a batch thread is free; it then waits until `max_batch_size` examples are queued or
`batch_timeout_micros` have passed since its first request arrived, whichever is first,
so a busy server forms full batches and an idle one answers after at most the timeout.
Only requests whose inputs agree in dtype and in every dimension but the batch go into
one batch. An input of shape [] (a scalar: one value for the whole request, e.g. a language
model's generate "temperature") is not batched: requests share a batch only when their
scalars are equal too (requests with the same settings still batch; each batch runs with
its own settings), except that a negative "seed" (draw one at random) never shares a batch,
so that each such request draws its own. A request with no batched input runs alone. A batch is padded (by repeating its last example) to the next of a few
`allowed_batch_sizes`, so a model compiled per shape (XLA, TFLite) sees few shapes.
If a batch fails on bad input (RequestError 400, e.g. an undecodable image), each of its
requests is run alone so that only the bad one fails.

At most `max_enqueued_batches * max_batch_size` examples wait; beyond that a request is
refused with QueueFullError (HTTP 429), and after `close()` with ShuttingDownError (503).
An `observer` (t2t-serve's metrics) is told the size of each batch run and the examples
waiting whenever that number changes.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any, Protocol

import numpy as np

from t2t.serving.rest_api import RequestError

RunFn = Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]


class BatchObserver(Protocol):
    """Told of each batch run and of each change of the queue (t2t-serve's metrics)."""

    def batch_run(self, size: int) -> None:
        """A batch of `size` examples (before padding) is run."""

    def queue_changed(self, examples: int) -> None:
        """`examples` are now waiting."""


class QueueFullError(RequestError):
    """Too many examples are waiting; the client should retry later (HTTP 429)."""

    def __init__(self, message: str):
        super().__init__(message, 429)


class ShuttingDownError(RequestError):
    """The server (or this model version) no longer takes requests (HTTP 503)."""

    def __init__(self, message: str):
        super().__init__(message, 503)


@dataclasses.dataclass(frozen=True)
class BatchingOptions:
    """TF Serving's batching parameters (t2t-serve flags of the same names)."""

    enable_batching: bool = True
    max_batch_size: int = 32
    batch_timeout_micros: int = 2000
    num_batch_threads: int = 2
    max_enqueued_batches: int = 16
    allowed_batch_sizes: tuple[int, ...] = ()  # () -> powers of 2 up to max_batch_size

    def check(self) -> None:
        """Raises ValueError naming the bad flag."""
        if self.max_batch_size < 1:
            raise ValueError(f"--max_batch_size={self.max_batch_size}: must be >= 1")
        if self.batch_timeout_micros < 0:
            raise ValueError(f"--batch_timeout_micros={self.batch_timeout_micros}: must be >= 0")
        if self.num_batch_threads < 1:
            raise ValueError(f"--num_batch_threads={self.num_batch_threads}: must be >= 1")
        if self.max_enqueued_batches < 1:
            raise ValueError(f"--max_enqueued_batches={self.max_enqueued_batches}: must be >= 1")
        sizes = list(self.allowed_batch_sizes)
        if sizes and (sizes != sorted(set(sizes)) or sizes[0] < 1
                      or sizes[-1] != self.max_batch_size):
            raise ValueError(f"--allowed_batch_sizes={','.join(map(str, sizes))}: must be "
                             f"increasing, >= 1 and end with --max_batch_size="
                             f"{self.max_batch_size}")

    @property
    def buckets(self) -> tuple[int, ...]:
        """The batch sizes a batch is padded to, ascending; the last is max_batch_size."""
        if self.allowed_batch_sizes:
            return tuple(self.allowed_batch_sizes)
        sizes, size = [], 1
        while size < self.max_batch_size:
            sizes.append(size)
            size *= 2
        return (*sizes, self.max_batch_size)

    @property
    def max_enqueued_examples(self) -> int:
        return self.max_enqueued_batches * self.max_batch_size


@dataclasses.dataclass
class BatchStats:
    """Counters of one Batcher (shown by GET /v1/models/NAME?stats)."""

    requests: int = 0
    batches: int = 0
    examples: int = 0
    padding: int = 0  # examples added to reach a bucket size
    refused: int = 0

    def as_dict(self) -> dict[str, Any]:
        mean = self.examples / self.batches if self.batches else 0.0
        return {**dataclasses.asdict(self), "mean_batch_size": round(mean, 2)}


@dataclasses.dataclass(eq=False)
class _Task:
    inputs: dict[str, np.ndarray]
    size: int
    key: tuple
    future: asyncio.Future
    arrival: float


RANDOM_SEED_INPUT = "seed"  # a scalar input where < 0 draws a random seed (lm_serving's)


def batch_key(inputs: dict[str, np.ndarray]) -> tuple:
    """What requests that share a batch agree on: each input's dtype and its shape but the
    batch, and the value of each scalar input (a negative `seed` matches no other)."""
    key = []
    for name, array in sorted(inputs.items()):
        if array.ndim:
            key.append((name, array.dtype.str, array.shape[1:]))
        elif name == RANDOM_SEED_INPUT and array.dtype.kind in "iu" and array < 0:
            key.append((name, object()))  # equal to no other key
        else:
            value = array.item() if array.dtype == object else array.tobytes()
            key.append((name, array.dtype.str, value))
    return tuple(key)


def pad_to(inputs: dict[str, np.ndarray], size: int) -> dict[str, np.ndarray]:
    """Each array [B, ...] grown to [size, ...] by repeating its last row; scalars as
    they are."""
    out = {}
    for name, array in inputs.items():
        extra = size - len(array) if array.ndim else 0
        out[name] = array if extra <= 0 else np.concatenate(
            [array, np.repeat(array[-1:], extra, axis=0)])
    return out


class Batcher:
    """Batches the predict calls of one signature of one model version."""

    def __init__(self, run: RunFn, options: BatchingOptions, executor: Executor,
                 observer: BatchObserver | None = None):
        options.check()
        self._run = run
        self.options = options
        self._executor = executor
        self._observer = observer
        self._queue: deque[_Task] = deque()
        self._queued_examples = 0
        self._wake = asyncio.Event()
        self._slots = asyncio.Semaphore(options.num_batch_threads)
        self._worker: asyncio.Task | None = None
        self._running: set[asyncio.Task] = set()
        self._closing = False
        self._urgent = False  # run queued requests without waiting for fuller batches
        self.stats = BatchStats()

    @property
    def _queued(self) -> int:
        """Examples waiting in the queue (or, without batching, for a batch thread)."""
        return self._queued_examples

    @_queued.setter
    def _queued(self, examples: int) -> None:
        self._queued_examples = examples
        if self._observer is not None:
            self._observer.queue_changed(examples)

    async def predict(self, inputs: dict[str, np.ndarray], size: int) -> dict[str, np.ndarray]:
        """Outputs {name: [size, ...]} of `inputs` {name: [size, ...]}."""
        if self._closing:
            raise ShuttingDownError("this model version is being unloaded or the server is "
                                    "shutting down; retry (a newer version takes requests)")
        limit = self.options.max_enqueued_examples
        if self._queued + size > limit:
            self.stats.refused += 1
            raise QueueFullError(f"the batch queue is full ({self._queued} examples waiting, "
                                 f"limit {limit} = --max_enqueued_batches x --max_batch_size); "
                                 "retry later or raise --max_enqueued_batches")
        self.stats.requests += 1
        loop = asyncio.get_running_loop()
        if not self.options.enable_batching or not any(a.ndim for a in inputs.values()):
            self._queued += size  # waiting for a batch thread
            try:
                await self._slots.acquire()
            finally:
                self._queued -= size
            try:
                return await loop.run_in_executor(self._executor, self._run_counted,
                                                  inputs, size, None)
            finally:
                self._slots.release()
        task = _Task(inputs, size, batch_key(inputs), loop.create_future(), loop.time())
        self._queue.append(task)
        self._queued += size
        self._wake.set()
        if self._worker is None:
            self._worker = asyncio.create_task(self._work())
        return await task.future

    def _run_counted(self, inputs: dict[str, np.ndarray], size: int,
                     padded: int | None) -> dict[str, np.ndarray]:
        """`run(inputs)`, counted; `padded`: the batch size the outputs must have to be
        split among requests (None: one request, not split)."""
        self.stats.batches += 1
        self.stats.examples += size
        self.stats.padding += (padded or size) - size
        if self._observer is not None:
            self._observer.batch_run(size)
        outputs = self._run(inputs)
        if padded is None:
            return outputs
        for name, array in outputs.items():
            if np.ndim(array) == 0 or len(array) != padded:
                raise RequestError(f"output {name!r} has shape {list(np.shape(array))}, not "
                                   f"[{padded}, ...]: this signature cannot be batched; run "
                                   "t2t-serve with --enable_batching=false", 500)
        return outputs

    # ------------------------------------------------------------- the batch loop
    def _ready(self) -> int:
        """Examples queued that can join a batch with the first live request."""
        while self._queue and self._queue[0].future.done():  # its caller went away
            self._queued -= self._queue.popleft().size
        if not self._queue:
            return 0
        key = self._queue[0].key
        return sum(t.size for t in self._queue if t.key == key and not t.future.done())

    def _take(self) -> list[_Task]:
        """Removes and returns the next batch: same-shape requests, in arrival order."""
        batch, total, kept = [], 0, deque()
        key = self._queue[0].key if self._queue else None
        while self._queue:
            task = self._queue.popleft()
            if task.future.done():
                self._queued -= task.size
            elif task.key == key and total + task.size <= self.options.max_batch_size:
                batch.append(task)
                total += task.size
                self._queued -= task.size
            else:
                kept.append(task)
        self._queue = kept
        return batch

    async def _work(self) -> None:
        loop = asyncio.get_running_loop()
        timeout = self.options.batch_timeout_micros / 1e6
        while True:
            while not self._ready():
                if self._closing:
                    return
                self._wake.clear()
                await self._wake.wait()
            await self._slots.acquire()
            deadline = self._queue[0].arrival + timeout if self._queue else loop.time()
            while (not self._closing and not self._urgent
                   and self._ready() < self.options.max_batch_size):
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                self._wake.clear()
                try:
                    await asyncio.wait_for(self._wake.wait(), remaining)
                except asyncio.TimeoutError:
                    break
            batch = self._take() if self._ready() else []
            if not batch:
                self._slots.release()
                continue
            running = asyncio.create_task(self._run_batch(batch))
            self._running.add(running)
            running.add_done_callback(self._running.discard)

    async def _run_batch(self, batch: list[_Task]) -> None:
        try:
            error = await self._run_tasks(batch)
            if error is None:
                return
            if len(batch) > 1 and isinstance(error, RequestError) and error.status == 400:
                for task in batch:  # one bad input failed them all: run each alone
                    alone = await self._run_tasks([task])
                    if alone is not None:
                        _settle(task, exception=alone)
                return
            for task in batch:
                _settle(task, exception=error)
        finally:
            self._slots.release()
            self._wake.set()

    async def _run_tasks(self, tasks: list[_Task]) -> BaseException | None:
        """Runs `tasks` as one padded batch and hands each its rows; the error, if any."""
        loop = asyncio.get_running_loop()
        size = sum(t.size for t in tasks)
        padded = next((b for b in self.options.buckets if b >= size), size)
        inputs = {name: np.concatenate([t.inputs[name] for t in tasks]) if array.ndim
                  else array  # a scalar: equal in every task (batch_key)
                  for name, array in tasks[0].inputs.items()}
        try:
            outputs = await loop.run_in_executor(self._executor, self._run_counted,
                                                 pad_to(inputs, padded), size, padded)
        except Exception as e:  # noqa: BLE001 - handed to the callers
            return e
        offset = 0
        for task in tasks:
            _settle(task, result={n: a[offset:offset + task.size] for n, a in outputs.items()})
            offset += task.size
        return None

    def hurry(self) -> None:
        """From now on, batches start without waiting for more requests (shutdown)."""
        self._urgent = True
        self._wake.set()

    async def close(self) -> None:
        """Refuses new requests, runs those queued, and waits for running batches."""
        self._closing = True
        self._wake.set()
        if self._worker is not None:
            await self._worker
        while self._running:
            await asyncio.gather(*list(self._running), return_exceptions=True)


def _settle(task: _Task, result: Any = None, exception: BaseException | None = None) -> None:
    if task.future.done():  # the caller went away (client disconnected)
        return
    if exception is not None:
        task.future.set_exception(exception)
    else:
        task.future.set_result(result)
