"""No stall at an epoch boundary: the next epoch's first samples are requested while this epoch's
last requests are still in flight.

Without this, the first batch of an epoch waits a full round trip (and slow start) after the
last batch of the previous one: 227-539 ms per boundary measured at 50 ms round trip. The
requests run on the storage's own event loop, which outlives the epoch's pipeline, and the next
epoch's prefetcher takes their results before asking the storage. Nothing here is ever marked
delivered: a warmed sample counts only once the next epoch delivers it, so a run stopped at the
boundary resumes exactly. Warmed results for another epoch (the user chose a different one) are
cancelled and dropped.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

__all__ = ["EpochWarmup"]


class EpochWarmup:
    """Requests of the next epoch's first samples, kept until that epoch asks for them.

    Warm-ups are kept per epoch: the next epoch's warm-up starts once every sample of this epoch
    has been requested, which for a short epoch is before this epoch's own fetches have taken
    their warmed requests (they are tasks not yet run). Starting it must not cancel those: each
    would be fetched a second time (seen as two GETs of one object in a store's log).

    Args:
        fetch: ``await fetch(index)``: one sample's bytes (the storage's, with its retries).
        loop: The event loop that runs the requests (the storage's own).
    """

    def __init__(self, fetch: Callable[[int], Coroutine[Any, Any, bytes]], loop: Callable[[], asyncio.AbstractEventLoop]) -> None:
        self._fetch = fetch
        self._loop = loop
        self._lock = threading.Lock()
        self._pending: dict[int, dict[int, concurrent.futures.Future[bytes]]] = {}  # epoch -> index -> request
        self.epoch: int | None = None  # the latest epoch warmed
        self.requested = 0
        self.used = 0

    def start(self, epoch: int, indices: Sequence[int]) -> None:
        """Request ``indices`` (storage indices) for ``epoch``. The warm-up of the epoch before
        it (being taken now) is kept, any other dropped; requests for ``epoch`` already out are
        kept, and those no longer wanted dropped."""
        loop = self._loop()
        wanted = dict.fromkeys(int(index) for index in indices)
        with self._lock:
            dropped = [future for other, pending in self._pending.items() if other not in (epoch, epoch - 1) for future in pending.values()]
            self._pending = {other: pending for other, pending in self._pending.items() if other in (epoch, epoch - 1)}
            mine = self._pending.setdefault(epoch, {})
            dropped += [mine.pop(index) for index in list(mine) if index not in wanted]
            for index in wanted:
                if index not in mine:
                    mine[index] = asyncio.run_coroutine_threadsafe(self._fetch(index), loop)
                    self.requested += 1
            self.epoch = epoch
        for future in dropped:
            future.cancel()

    def fetcher(self, epoch: int) -> Callable[[int], Awaitable[bytes]]:
        """The fetch for ``epoch``'s prefetcher: a warmed request's result where there is one,
        else the storage's fetch. Warm-ups for other epochs are dropped."""
        with self._lock:
            dropped = [future for other, pending in self._pending.items() if other != epoch for future in pending.values()]
            self._pending = {other: pending for other, pending in self._pending.items() if other == epoch}
            warmed = epoch in self._pending
        for future in dropped:
            future.cancel()
        if not warmed:
            return self._fetch

        async def fetch(index: int) -> bytes:
            with self._lock:
                future = self._pending.get(epoch, {}).pop(index, None)
            if future is None:
                return await self._fetch(index)
            self.used += 1
            # Shielded: a hedged copy that lost is cancelled; the warmed request is not its own.
            return await asyncio.shield(asyncio.wrap_future(future))

        return fetch

    def discard(self) -> None:
        """Cancel and forget every warmed request not taken."""
        with self._lock:
            pending, self._pending, self.epoch = self._pending, {}, None
        for requests in pending.values():
            for future in requests.values():
                future.cancel()
