"""Real concurrency per stage, and the backpressure bound on live items."""

from __future__ import annotations

import asyncio
import gc
import threading
import time
import weakref

import pytest

from stoker.pipeline import PipelineBuilder


@pytest.mark.parametrize("concurrency", [1, 4, 16])
def test_sync_stage_runs_exactly_its_concurrency_at_once(concurrency: int) -> None:
    """A barrier of `concurrency` parties only opens if that many ops run at the same time."""
    barrier = threading.Barrier(concurrency, timeout=20)
    lock = threading.Lock()
    running = 0
    peak = 0

    def op(item: int) -> int:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        barrier.wait()
        time.sleep(0.001)
        with lock:
            running -= 1
        return item

    items = concurrency * 5
    pipeline = PipelineBuilder().add_source(range(items)).pipe(op, concurrency=concurrency).add_sink(2).build()
    assert sorted(pipeline) == list(range(items))
    assert peak == concurrency


def test_concurrency_raised_before_the_start_gets_its_threads() -> None:
    """Once: the worker pool was sized at the start from the built concurrency only, so a stage
    raised from 1 to 6 before it started ran 2 tasks at once. A barrier of 6 opens only with 6."""
    barrier = threading.Barrier(6, timeout=10)

    def op(item: int) -> int:
        barrier.wait()
        return item

    pipeline = PipelineBuilder().add_source(range(30)).pipe(op, concurrency=1, name="op").add_sink(2).build()
    pipeline.set_concurrency("op", 6)
    with pipeline.auto_stop():
        assert sorted(pipeline) == list(range(30))


def test_async_stage_runs_its_concurrency_on_the_loop() -> None:
    concurrency = 32
    running = 0
    peak = 0
    release: asyncio.Event | None = None

    async def op(item: int) -> int:
        nonlocal running, peak, release
        if release is None:
            release = asyncio.Event()
        running += 1
        peak = max(peak, running)
        if running == concurrency:
            release.set()
        await asyncio.wait_for(release.wait(), timeout=20)
        running -= 1
        return item

    pipeline = PipelineBuilder().add_source(range(concurrency)).pipe(op, concurrency=concurrency).add_sink(2).build()
    assert sorted(pipeline) == list(range(concurrency))
    assert peak == concurrency


def test_async_ops_do_not_use_worker_threads() -> None:
    threads: set[str] = set()

    async def op(item: int) -> int:
        threads.add(threading.current_thread().name)
        await asyncio.sleep(0)
        return item

    pipeline = PipelineBuilder().add_source(range(20)).pipe(op, concurrency=4).add_sink(2).build(name="asynconly")
    assert sorted(pipeline) == list(range(20))
    assert threads == {"stoker-asynconly-scheduler"}


def test_sync_ops_run_in_the_worker_pool_not_the_consumer() -> None:
    threads: set[str] = set()

    def op(item: int) -> int:
        threads.add(threading.current_thread().name)
        return item

    pipeline = PipelineBuilder().add_source(range(50)).pipe(op, concurrency=2).add_sink(2).build(name="where")
    assert sorted(pipeline) == list(range(50))
    assert threads and all(name.startswith("stoker-where-worker") for name in threads)


class _Tracked:
    live = 0
    lock = threading.Lock()

    def __init__(self, value: int) -> None:
        self.value = value
        with _Tracked.lock:
            _Tracked.live += 1
        weakref.finalize(self, _Tracked._release)

    @staticmethod
    def _release() -> None:
        with _Tracked.lock:
            _Tracked.live -= 1


def test_slow_consumer_bounds_live_items() -> None:
    """A fast, endless source and a slow consumer: items alive never exceed what queues allow."""

    def endless():
        value = 0
        while True:
            yield _Tracked(value)
            value += 1

    def passthrough(item: _Tracked) -> _Tracked:
        return item

    stage_buffer, sink_size, concurrency = 4, 3, 4
    pipeline = (
        PipelineBuilder()
        .add_source(endless(), buffer_size=2)
        .pipe(passthrough, concurrency=concurrency, buffer_size=stage_buffer)
        .pipe(passthrough, concurrency=concurrency, buffer_size=stage_buffer)
        .add_sink(sink_size)
        .build()
    )
    # Source queue 2 (+1 reserved), two stages of (buffer + concurrency), the sink, one in hand.
    bound = 3 + (stage_buffer + concurrency) + (sink_size + concurrency) + 1
    peak = 0
    with pipeline.auto_stop():
        for _index in range(300):
            item = pipeline.get()
            time.sleep(0.001)
            del item
            with _Tracked.lock:
                live = _Tracked.live
            if live > bound:
                # Free-threaded CPython frees an object dropped by a thread other than the one
                # that made it only once that thread merges its queue of such objects (biased
                # reference counting, PEP 703): 21 counted alive here on 3.14t. A collection
                # merges every thread's queue; what is still alive after it is really held.
                gc.collect()
                with _Tracked.lock:
                    live = _Tracked.live
            peak = max(peak, live)
    assert 0 < peak <= bound, f"{peak} items alive, queues allow {bound}"
