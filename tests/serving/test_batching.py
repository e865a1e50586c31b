"""Dynamic batching: requests merged into padded batches, each caller gets its own rows,
bad inputs isolated, a bounded queue, batching off, and draining on close."""

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from t2t.serving.batching import (
    Batcher,
    BatchingOptions,
    QueueFullError,
    ShuttingDownError,
    pad_to,
)
from t2t.serving.rest_api import RequestError


class Recorder:
    """A model: y = 10 * x (x int [B, 2]); records each batch size; "-1" is a bad input."""

    def __init__(self, gate: threading.Event | None = None):
        self.sizes: list[int] = []
        self.gate = gate

    def __call__(self, inputs):
        if self.gate is not None:
            self.gate.wait(10)
        x = inputs["x"]
        self.sizes.append(len(x))
        if (x < 0).any():
            raise RequestError("negative input")
        return {"y": x * 10, "first": x[:, 0].copy()}


def _x(*values):
    return {"x": np.array([[v, v + 1] for v in values], np.int64)}


def _run(coro):
    return asyncio.run(coro)


def test_buckets_and_option_errors():
    assert BatchingOptions(max_batch_size=12).buckets == (1, 2, 4, 8, 12)
    assert BatchingOptions(max_batch_size=8, allowed_batch_sizes=(2, 8)).buckets == (2, 8)
    for bad, flag in [(dict(max_batch_size=0), "--max_batch_size=0"),
                      (dict(allowed_batch_sizes=(4, 2, 32)), "--allowed_batch_sizes=4,2,32"),
                      (dict(allowed_batch_sizes=(2, 4)), "end with --max_batch_size=32"),
                      (dict(num_batch_threads=0), "--num_batch_threads=0")]:
        with pytest.raises(ValueError, match=flag.replace("(", r"\(")):
            BatchingOptions(**bad).check()


def test_pad_repeats_the_last_row():
    padded = pad_to(_x(1, 2), 4)
    assert padded["x"][:, 0].tolist() == [1, 2, 2, 2]


def test_concurrent_requests_become_one_padded_batch_and_get_their_own_rows():
    model = Recorder()

    async def main():
        with ThreadPoolExecutor(1) as pool:
            batcher = Batcher(model, BatchingOptions(max_batch_size=8,
                                                     batch_timeout_micros=200_000), pool)
            results = await asyncio.gather(*[batcher.predict(_x(i, 100 + i), 2)
                                             for i in range(3)])
            await batcher.close()
            return results, batcher.stats

    results, stats = _run(main())
    for i, out in enumerate(results):
        assert out["first"].tolist() == [i, 100 + i]
        assert out["y"].tolist() == [[10 * i, 10 * i + 10], [1000 + 10 * i, 1010 + 10 * i]]
    assert model.sizes == [8]  # 6 examples padded to the bucket of 8
    assert stats.batches == 1 and stats.examples == 6 and stats.padding == 2
    assert stats.requests == 3


def test_full_batch_runs_before_the_timeout():
    model = Recorder()

    async def main():
        with ThreadPoolExecutor(1) as pool:
            batcher = Batcher(model, BatchingOptions(max_batch_size=4,
                                                     batch_timeout_micros=30_000_000), pool)
            loop = asyncio.get_running_loop()
            start = loop.time()
            await asyncio.gather(*[batcher.predict(_x(i), 1) for i in range(4)])
            await batcher.close()
            return loop.time() - start

    assert _run(main()) < 10  # did not wait the 30 s timeout
    assert model.sizes == [4]


def test_a_bad_input_fails_only_its_own_request():
    model = Recorder()

    async def main():
        with ThreadPoolExecutor(1) as pool:
            batcher = Batcher(model, BatchingOptions(max_batch_size=8,
                                                     batch_timeout_micros=200_000), pool)
            results = await asyncio.gather(batcher.predict(_x(1), 1), batcher.predict(_x(-5), 1),
                                           batcher.predict(_x(3), 1), return_exceptions=True)
            await batcher.close()
            return results

    good, bad, good2 = _run(main())
    assert good["first"].tolist() == [1] and good2["first"].tolist() == [3]
    assert isinstance(bad, RequestError) and "negative" in str(bad)
    assert model.sizes[0] == 4  # tried together first (3 padded to 4), then one by one


def test_different_shapes_are_not_mixed():
    seen = []

    def model(inputs):
        seen.append(inputs["x"].shape)
        return {"y": inputs["x"].sum(axis=1)}

    async def main():
        with ThreadPoolExecutor(1) as pool:
            batcher = Batcher(model, BatchingOptions(max_batch_size=8,
                                                     batch_timeout_micros=100_000), pool)
            a, b = await asyncio.gather(batcher.predict({"x": np.ones((1, 3))}, 1),
                                        batcher.predict({"x": np.ones((1, 5))}, 1))
            await batcher.close()
            return a, b

    a, b = _run(main())
    assert a["y"].tolist() == [3.0] and b["y"].tolist() == [5.0]
    assert sorted(s[1] for s in seen) == [3, 5]


def test_queue_bound_refuses_with_429_and_close_drains():
    gate = threading.Event()
    model = Recorder(gate)

    async def main():
        with ThreadPoolExecutor(1) as pool:
            options = BatchingOptions(max_batch_size=2, batch_timeout_micros=0,
                                      num_batch_threads=1, max_enqueued_batches=1)
            batcher = Batcher(model, options, pool)
            first = asyncio.ensure_future(batcher.predict(_x(1, 2), 2))  # runs, blocked on gate
            await asyncio.sleep(0.2)
            queued = asyncio.ensure_future(batcher.predict(_x(3, 4), 2))  # fills the queue
            await asyncio.sleep(0.05)
            with pytest.raises(QueueFullError, match="--max_enqueued_batches") as refused:
                await batcher.predict(_x(5), 1)
            closing = asyncio.ensure_future(batcher.close())
            await asyncio.sleep(0.05)
            with pytest.raises(ShuttingDownError):
                await batcher.predict(_x(6), 1)
            gate.set()
            await closing
            return refused.value.status, await first, await queued, batcher.stats

    status, first, queued, stats = _run(main())
    assert status == 429 and stats.refused == 1
    assert first["first"].tolist() == [1, 2] and queued["first"].tolist() == [3, 4]


def test_batching_off_runs_each_request_alone():
    model = Recorder()

    async def main():
        with ThreadPoolExecutor(2) as pool:
            batcher = Batcher(model, BatchingOptions(enable_batching=False), pool)
            results = await asyncio.gather(*[batcher.predict(_x(i), 1) for i in range(5)])
            return [r["first"].tolist() for r in results]

    assert _run(main()) == [[i] for i in range(5)]
    assert model.sizes == [1] * 5


def test_a_cancelled_caller_does_not_break_the_batch():
    model = Recorder()

    async def main():
        with ThreadPoolExecutor(1) as pool:
            batcher = Batcher(model, BatchingOptions(max_batch_size=8,
                                                     batch_timeout_micros=200_000), pool)
            gone = asyncio.ensure_future(batcher.predict(_x(1), 1))
            kept = asyncio.ensure_future(batcher.predict(_x(2), 1))
            await asyncio.sleep(0.01)
            gone.cancel()
            out = await kept
            await batcher.close()
            return out

    assert _run(main())["first"].tolist() == [2]
    assert model.sizes == [1]
