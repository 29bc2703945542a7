"""Block streaming: a sample is read by fetching the whole block it lies in, once, and serving
every other sample of that block from memory.

One request per sample is request-bound for small samples on an object store (4-16 KB at 50 ms
round trip); MosaicML Streaming, LitData and WebDataset read whole shards or chunks instead. With
the block shuffle (`stoker.sampling.block_order`) a rank reads a few blocks at a time, so each
block is fetched about once per epoch. Fetches run on the storage's own event loop (whatever loop
the sample was asked from), one per block however many samples wait on it. A block leaves memory
once each of its samples has been served from it (the usual case: a sample is read once an
epoch), or, past ``capacity`` bytes, least recently used first.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Awaitable, Callable

from ._block_cache import BlockCache

__all__ = ["BlockReader"]


class BlockReader:
    """Whole blocks, fetched once each and shared by the samples in them: an async front to a
    `BlockCache` (which holds them and lets them go).

    Args:
        fetch: One block's bytes (a view), with its own retries (a coroutine function of the
            block number).
        loop: The event loop fetches run on (the storage's own).
        capacity: Bytes of blocks kept in memory.
        samples: How many samples block ``number`` holds.
    """

    def __init__(
        self,
        fetch: Callable[[int], Awaitable[memoryview]],
        loop: Callable[[], asyncio.AbstractEventLoop],
        capacity: int,
        samples: Callable[[int], int],
    ) -> None:
        self._fetch = fetch
        self._samples = samples
        self._loop = loop
        self._cache = BlockCache(capacity)
        self._pending: dict[int, concurrent.futures.Future[memoryview]] = {}
        self._lock = threading.Lock()

    async def block(self, number: int) -> memoryview:
        """Block ``number``'s bytes, from memory or fetched (joined to a fetch in flight).

        Raises:
            Exception: The fetch's error (after its retries); the next call fetches again.
        """
        with self._lock:
            data = self._cache.lookup(number)
            if data is not None:
                return data
            future = self._start(number)
        # Shielded: a sample whose wait is cancelled (a hedged request that lost) must not
        # cancel the fetch the block's other samples wait on. Its error still reaches every
        # waiter; one cancelled meanwhile leaves it unread, which asyncio would log at exit as
        # "never retrieved" (the error is the one the other waiters raise).
        waited = asyncio.wrap_future(future)
        waited.add_done_callback(_mark_error_seen)
        return await asyncio.shield(waited)

    def prefetch(self, number: int) -> None:
        """Start fetching block ``number`` unless it is in memory or on its way; no waiting. A
        failed fetch is forgotten: the block's first sample fetches it again and gets the error."""
        with self._lock:
            if not self._cache.contains(number):
                self._start(number)

    def _start(self, number: int) -> concurrent.futures.Future[memoryview]:
        """The fetch in flight for block ``number``, started if there is none (under the lock)."""
        future = self._pending.get(number)
        if future is None:
            loop = self._loop()  # first: it raises for a closed storage, before a coroutine exists
            future = asyncio.run_coroutine_threadsafe(self._fetch_and_keep(number), loop)
            self._pending[number] = future
        return future

    async def _fetch_and_keep(self, number: int) -> memoryview:
        try:
            data = await self._fetch(number)
        except BaseException:
            with self._lock:
                self._pending.pop(number, None)
            raise
        with self._lock:
            self._pending.pop(number, None)
            self._cache.put(number, data, self._samples(number))
        return data

    @property
    def fetches(self) -> int:
        """Blocks fetched so far."""
        return self._cache.reads

    @property
    def bytes_held(self) -> int:
        """Bytes of blocks in memory now."""
        return self._cache.bytes_held

    def served(self, number: int) -> None:
        """One sample of block ``number`` was served; the last one lets the block go."""
        self._cache.served(number)


def _mark_error_seen(waited: asyncio.Future[memoryview]) -> None:
    if not waited.cancelled():
        waited.exception()
