"""Out-of-order incremental prefetch for high-latency storage (the Cassandra paper, section 3.4).

Every sample of a batch is requested at once, and up to ``max_batches`` batches of requests are
in flight. Out of order, a batch is filled by whichever requested samples arrive first, each
keeping its key, label and epoch position, so one slow connection delays one sample instead of
a whole batch. In order, batch i holds exactly the samples requested for it (the slowest one
sets its time). Slow start: one batch is requested first; each consumed batch is replaced, and
every ``ramp_every`` consumed batches one extra is requested until ``max_batches`` are in flight
(the paper: every 4), so filling the buffers never bursts far above the steady request rate.
A stall escape keeps slow start from stalling with its first batch: out of order, when a batch
waits longer than ``patience`` (three times the usual time to fill a batch) for its last
samples, one more batch is requested (still at most ``max_batches``), whose samples can take
the place of the stalled ones. The prefetcher records which positions it delivered, for the
sampler's exact resume.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["FetchedSample", "OutOfOrderPrefetcher"]


@dataclass(frozen=True)
class FetchedSample:
    """One sample as delivered: where it is in the epoch, its key and label, its bytes (None if
    the fetch failed, with the error)."""

    position: int
    key: str
    label: Any
    data: bytes | None
    error: BaseException | None = None


class OutOfOrderPrefetcher:
    """Batches from an async per-sample ``fetch``, with out-of-order assembly and slow start.

    Args:
        fetch: ``await fetch(key)`` returns the sample's bytes.
        samples: ``(position, key, label)`` in the order to request them.
        batch_size: Samples per batch.
        max_batches: Batches of requests in flight at most (K).
        ramp_every: Consumed batches per extra batch requested while ramping up (m).
        in_order: Assemble batches exactly as requested instead of by arrival.
        initial_patience: Seconds a batch may wait before a stall escape, until batch times
            have been seen (then three times their running mean, and never under a quarter of
            this).
    """

    def __init__(
        self,
        fetch: Callable[[str], Awaitable[bytes]],
        samples: Sequence[tuple[int, str, Any]],
        *,
        batch_size: int,
        max_batches: int = 8,
        ramp_every: int = 4,
        in_order: bool = False,
        initial_patience: float = 1.0,
    ) -> None:
        if batch_size < 1 or max_batches < 1 or ramp_every < 1:
            raise ValueError("batch_size, max_batches and ramp_every must be positive")
        self.fetch = fetch
        self.samples = samples
        self.batch_size = batch_size
        self.max_batches = max_batches
        self.ramp_every = ramp_every
        self.in_order = in_order
        self.delivered: list[int] = []
        self.requested_batches = 0
        self.in_flight_history: list[int] = []  # batches in flight after each delivery
        self.stall_escapes = 0  # batches requested early because one was waiting too long
        self._batch_seconds = initial_patience / 3
        self._least_patience = initial_patience / 4  # a hiccup of the machine is not a stall

    def _patience(self) -> float:
        return max(self._least_patience, 3 * self._batch_seconds)

    async def _one(self, sample: tuple[int, str, Any]) -> FetchedSample:
        position, key, label = sample
        try:
            return FetchedSample(position, key, label, await self.fetch(key))
        except Exception as error:  # the sample is delivered as failed; the batch goes on
            return FetchedSample(position, key, label, None, error)

    def __aiter__(self) -> AsyncIterator[list[FetchedSample]]:
        return self._batches()

    async def _batches(self) -> AsyncIterator[list[FetchedSample]]:
        pending_batches: list[list[asyncio.Task[FetchedSample]]] = []
        arrived: asyncio.Queue[FetchedSample] = asyncio.Queue()
        next_sample = 0
        consumed = 0
        total_batches = -(-len(self.samples) // self.batch_size)

        def request_batch() -> None:
            nonlocal next_sample
            if next_sample >= len(self.samples):
                return
            chunk = self.samples[next_sample : next_sample + self.batch_size]
            next_sample += len(chunk)
            tasks = [asyncio.ensure_future(self._one(sample)) for sample in chunk]
            if not self.in_order:
                for task in tasks:
                    task.add_done_callback(lambda done: done.cancelled() or arrived.put_nowait(done.result()))
            pending_batches.append(tasks)
            self.requested_batches += 1

        request_batch()
        try:
            for _ in range(total_batches):
                if self.in_order:
                    tasks = pending_batches.pop(0)
                    batch = list(await asyncio.gather(*tasks))
                else:
                    size = min(self.batch_size, len(self.samples) - len(self.delivered))
                    batch = []
                    started = time.monotonic()
                    while len(batch) < size:
                        try:
                            batch.append(await asyncio.wait_for(arrived.get(), timeout=self._patience()))
                        except asyncio.TimeoutError:
                            if self.requested_batches - consumed < self.max_batches and next_sample < len(self.samples):
                                request_batch()
                                self.stall_escapes += 1
                    self._batch_seconds += 0.2 * (time.monotonic() - started - self._batch_seconds)
                    # Out of order, "in flight" counts requests still outstanding, in batches.
                    pending_batches = [[task for task in tasks if not task.done()] for tasks in pending_batches]
                    pending_batches = [tasks for tasks in pending_batches if tasks]
                consumed += 1
                self.delivered.extend(sample.position for sample in batch)
                # Replace the consumed batch; every ramp_every consumed, one more, up to the cap.
                target = min(self.max_batches, 1 + consumed // self.ramp_every)
                outstanding = self.requested_batches - consumed
                for _ in range(max(0, target - outstanding)):
                    request_batch()
                self.in_flight_history.append(self.requested_batches - consumed)
                yield batch
        finally:
            for tasks in pending_batches:
                for task in tasks:
                    task.cancel()
