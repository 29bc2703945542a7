"""The next epoch's warm-up: warmed requests are used by their epoch, each sample requested once,
even when the epoch after is warmed before this epoch's fetches have taken theirs (a short
epoch requests all its samples at once); warm-ups for an epoch that does not come are dropped."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Iterator

import pytest

from stoker.sampling import EpochWarmup


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """An event loop on a thread of its own, as a storage's is."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield loop
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    loop.close()


def test_warming_the_next_epoch_keeps_this_epochs_warmed_requests(loop: asyncio.AbstractEventLoop) -> None:
    requests: Counter[int] = Counter()

    async def fetch(index: int) -> bytes:
        requests[index] += 1
        await asyncio.sleep(0.01)
        return bytes([index])

    warmup = EpochWarmup(fetch, lambda: loop)
    warmup.start(1, [3, 4, 5])  # during epoch 0
    epoch_1 = warmup.fetcher(1)

    async def epoch_1_reads_after_epoch_2_is_warmed() -> list[bytes]:
        warmup.start(2, [7, 8])  # epoch 1 requested everything at once: epoch 2's warm-up starts first
        return list(await asyncio.gather(*(epoch_1(index) for index in (3, 4, 5, 6))))

    data = asyncio.run_coroutine_threadsafe(epoch_1_reads_after_epoch_2_is_warmed(), loop).result(10)
    assert data == [bytes([3]), bytes([4]), bytes([5]), bytes([6])]
    assert warmup.used == 3
    epoch_2 = warmup.fetcher(2)
    assert asyncio.run_coroutine_threadsafe(epoch_2(7), loop).result(10) == bytes([7])
    assert requests == Counter({3: 1, 4: 1, 5: 1, 6: 1, 7: 1, 8: 1}), "each sample requested once"


def test_a_warm_up_for_an_epoch_that_does_not_come_is_dropped(loop: asyncio.AbstractEventLoop) -> None:
    started = threading.Event()
    cancelled: list[int] = []

    async def fetch(index: int) -> bytes:
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(index)
            raise
        return b""

    warmup = EpochWarmup(fetch, lambda: loop)
    warmup.start(1, [1, 2])
    assert started.wait(5)
    warmup.fetcher(5)  # the user jumped to another epoch: epoch 1's requests are not wanted
    deadline = time.monotonic() + 5
    while len(cancelled) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sorted(cancelled) == [1, 2]
