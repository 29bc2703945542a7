"""Out-of-order incremental prefetch for high-latency storage (the Cassandra paper, section 3.4).

Every sample of a batch is requested at once, and up to ``max_batches`` batches of requests are
in flight. Out of order, a batch is filled by whichever requested samples arrive first, each
keeping what it was requested by, its context and its epoch position, so one slow connection delays one sample instead of
a whole batch. In order, batch i holds exactly the samples requested for it (the slowest one
sets its time). Slow start: one batch is requested first; each consumed batch is replaced, and
every ``ramp_every`` consumed batches one extra is requested until ``max_batches`` are in flight
(the paper: every 4), so filling the buffers never bursts far above the steady request rate.
A batch that had to be waited for (longer than half the stall patience) adds one more at once:
where the store's round trip starves the consumer (150 ms against a 40 ms step), the ramp
reaches the depth that hides it in a few batches instead of a dozen.

Stalls. A batch that waits longer than the patience (twice the median sample latency seen
recently, at least ``stall_patience``) gets help: out of order, one more batch is requested if
fewer than ``max_batches`` are in flight (its samples can take the stalled ones' places; this
also keeps slow start from stalling on its first batch); otherwise (in order, at the cap, or at
the end of the epoch where nothing is left to request) the stalled requests are hedged: sent
once more, and whichever copy answers first is delivered, the other cancelled (Dean and Barroso,
"The Tail at Scale"). Each sample is delivered exactly once either way, and the prefetcher
records which positions it delivered, for the sampler's exact resume.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import statistics
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigurationError
from ..storage import hedged_copy

__all__ = ["FetchedSample", "OutOfOrderPrefetcher"]


@dataclass(frozen=True)
class FetchedSample:
    """One sample as delivered: where it is in the epoch, what it was fetched by, what rode along
    with it, and its bytes (None if the fetch failed, with the error).

    Attributes:
        position: Its position in the epoch's order.
        request: What ``fetch`` was awaited with: a key, or a storage index (the Loader's).
        context: What the caller attached to the sample, handed back untouched (a label; the
            Loader's `PlannedSample`).
        data: The bytes, or None.
        error: Why the fetch failed, or None.
    """

    position: int
    request: Any
    context: Any
    data: bytes | None
    error: BaseException | None = None

    @property
    def key(self) -> Any:
        """`request`, by the name the Cassandra paper's prefetcher gives it."""
        return self.request

    @property
    def label(self) -> Any:
        """`context`, by the name the Cassandra paper's prefetcher gives it."""
        return self.context


class _Request:
    """One sample's request: its result (set once, by the first copy to answer) and its copies."""

    __slots__ = ("sample", "result", "copies", "started")

    def __init__(self, sample: tuple[int, Any, Any], result: asyncio.Future[FetchedSample]) -> None:
        self.sample = sample
        self.result = result
        self.copies: list[asyncio.Task[None]] = []
        self.started = time.monotonic()


class OutOfOrderPrefetcher:
    """Batches from an async per-sample ``fetch``, with out-of-order assembly and slow start.

    Out of order, requests outstanding past the patience are also hedged as batches are
    delivered (they are bypassed, not waited for, so otherwise they would all be waited for at
    the end of the epoch). Copies are budgeted at one per ten requests.

    Args:
        fetch: ``await fetch(request)`` returns the sample's bytes.
        samples: ``(position, request, context)`` in the order to request them (any sequence; slices
            are taken a batch at a time).
        batch_size: Samples per batch.
        max_batches: Batches of requests in flight at most (K).
        ramp_every: Consumed batches per extra batch requested while ramping up (m).
        in_order: Assemble batches exactly as requested instead of by arrival.
        stall_patience: Least seconds a batch waits before its stalled requests get help.
        start_batches: Batches in flight at the start (1: the paper's slow start; a later epoch
            of the same job may start where the last one's ramp ended).
        hedge: Send stalled requests again when no batch can be requested instead (False: wait,
            as the paper's in-order baseline does).
        on_all_requested: Called once, on the event loop, when the last sample has been
            requested (the Loader then requests the next epoch's first samples, so an epoch
            boundary does not wait a round trip).
        latencies: Seconds of recent requests to the same store (an earlier epoch's, or the
            storage's own while opening), so the first patience fits the store from the start.
    """

    HEDGE_BUDGET = 0.1

    def __init__(
        self,
        fetch: Callable[[Any], Awaitable[bytes]],
        samples: Sequence[tuple[int, Any, Any]],
        *,
        batch_size: int,
        max_batches: int = 8,
        ramp_every: int = 4,
        in_order: bool = False,
        stall_patience: float = 0.05,
        start_batches: int = 1,
        hedge: bool = True,
        on_all_requested: Callable[[], None] | None = None,
        latencies: Iterable[float] = (),
    ) -> None:
        if batch_size < 1 or max_batches < 1 or ramp_every < 1 or stall_patience <= 0 or start_batches < 1:
            raise ConfigurationError("batch_size, max_batches, ramp_every, stall_patience and start_batches must be positive")
        self.fetch = fetch
        self.samples = samples
        self.batch_size = batch_size
        self.max_batches = max_batches
        self.ramp_every = ramp_every
        self.in_order = in_order
        self.stall_patience = stall_patience
        self.start_batches = min(start_batches, max_batches)
        self.hedge = hedge
        self.on_all_requested = on_all_requested
        self.ramp_level = self.start_batches  # batches in flight the ramp has reached
        self.delivered: list[int] = []
        self.requested_batches = 0
        self.in_flight_history: list[int] = []  # batches in flight after each delivery
        self.stall_escapes = 0  # batches requested early because one was stalled
        self.hedged = 0  # requests sent a second time
        # Owned by the event loop's thread: only this prefetcher's tasks append and read it (the
        # Loader hands over a copy of the store's own latencies, `RemoteStorage.request_latencies`).
        self._latencies: deque[float] = deque(latencies, maxlen=256)

    def __aiter__(self) -> AsyncIterator[list[FetchedSample]]:
        return self._batches()

    @property
    def latencies(self) -> list[float]:
        """Seconds of the recent requests."""
        return list(self._latencies)

    def patience(self) -> float:
        """Seconds a batch may wait before its stalled requests get help."""
        if not self._latencies:
            return max(self.stall_patience, 1.0)
        return max(self.stall_patience, 2 * statistics.median(self._latencies))

    async def _copy(self, request: _Request, number: int) -> None:
        position, what, context = request.sample
        started = time.monotonic()
        try:
            # A second copy is marked, so that it does not wait on what the first holds (the
            # node cache's claim on the sample).
            with hedged_copy() if number else contextlib.nullcontext():
                data = await self.fetch(what)
            outcome = FetchedSample(position, what, context, data)
            self._latencies.append(time.monotonic() - started)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # the sample is delivered as failed; the batch goes on
            outcome = FetchedSample(position, what, context, None, error)
        if not request.result.done():
            request.result.set_result(outcome)
            if len(request.copies) > 1:  # hedged: the other copy is cancelled
                current = asyncio.current_task()
                for copy in request.copies:
                    if copy is not current:
                        copy.cancel()

    def _send(self, request: _Request) -> None:
        request.copies.append(asyncio.ensure_future(self._copy(request, len(request.copies))))

    def _hedge(self, requests: Sequence[_Request]) -> None:
        """Send once more every request that has waited past the patience (once each), within a
        budget of one copy per ten requests, so a server that is slow for everyone is not sent
        twice the load."""
        deadline = time.monotonic() - self.patience()
        for request in requests:
            if self.hedged >= self.HEDGE_BUDGET * self.requested_batches * self.batch_size:
                return
            if not request.result.done() and len(request.copies) == 1 and request.started < deadline:
                self._send(request)
                self.hedged += 1

    async def _batches(self) -> AsyncIterator[list[FetchedSample]]:
        loop = asyncio.get_running_loop()
        requested: list[list[_Request]] = []  # in order: per batch requested, not yet consumed
        outstanding: dict[int, _Request] = {}  # requests not answered yet, oldest first
        arrived: asyncio.Queue[FetchedSample] = asyncio.Queue()
        next_sample = 0
        consumed = 0
        starved = 0  # batches that were waited for (longer than half the stall patience)
        total_batches = -(-len(self.samples) // self.batch_size)

        def request_batch() -> None:
            nonlocal next_sample
            chunk = self.samples[next_sample : next_sample + self.batch_size]
            next_sample += len(chunk)
            batch = []
            for sample in chunk:
                request = _Request(sample, loop.create_future())
                outstanding[id(request)] = request
                request.result.add_done_callback(functools.partial(_forget, outstanding, id(request)))
                if not self.in_order:
                    request.result.add_done_callback(lambda done: arrived.put_nowait(done.result()))
                self._send(request)
                batch.append(request)
            if self.in_order:
                requested.append(batch)
            self.requested_batches += 1
            if next_sample >= len(self.samples) and self.on_all_requested is not None:
                callback, self.on_all_requested = self.on_all_requested, None
                callback()

        def unstick(waiting_for: Sequence[_Request]) -> None:
            can_request = next_sample < len(self.samples) and self.requested_batches - consumed < self.max_batches
            if not self.in_order and can_request:
                request_batch()
                self.stall_escapes += 1
            elif self.hedge:
                self._hedge(waiting_for if self.in_order else list(outstanding.values()))

        for _ in range(self.start_batches):
            if next_sample < len(self.samples):
                request_batch()
        try:
            for _ in range(total_batches):
                asked = loop.time()
                if self.in_order:
                    batch_requests = requested.pop(0)
                    results = [request.result for request in batch_requests]
                    while True:
                        _, pending = await asyncio.wait(results, timeout=self.patience())
                        if not pending:
                            break
                        unstick(batch_requests)  # then as long again before more help
                    batch = [request.result.result() for request in batch_requests]
                else:
                    size = min(self.batch_size, len(self.samples) - len(self.delivered))
                    batch = []
                    # Patience counts from when the batch began to wait, not from the last
                    # arrival: stragglers trickling in must not keep postponing help.
                    deadline = loop.time() + self.patience()
                    while len(batch) < size:
                        if not arrived.empty():  # already here: no timed wait to set up
                            batch.append(arrived.get_nowait())
                            continue
                        try:
                            batch.append(await asyncio.wait_for(arrived.get(), timeout=max(0.0, deadline - loop.time())))
                        except asyncio.TimeoutError:
                            unstick(())
                            deadline = loop.time() + self.patience()
                consumed += 1
                if loop.time() - asked > self.stall_patience / 2:
                    starved += 1
                self.delivered.extend(sample.position for sample in batch)
                if self.hedge and not self.in_order:
                    # Out of order, stragglers are bypassed, not waited for: without this they
                    # would pile up and all be waited for at the end of the epoch.
                    self._hedge(list(outstanding.values()))
                # Replace the consumed batch; every ramp_every consumed, one more, and one more
                # for each batch that had to be waited for, up to the cap.
                target = min(self.max_batches, self.start_batches + consumed // self.ramp_every + starved)
                self.ramp_level = max(self.ramp_level, target)
                while self.requested_batches - consumed < target and next_sample < len(self.samples):
                    request_batch()
                self.in_flight_history.append(self.requested_batches - consumed)
                yield batch
        finally:
            for request in list(outstanding.values()):
                for copy in request.copies:
                    copy.cancel()


def _forget(outstanding: dict[int, Any], key: int, _done: object) -> None:
    """Drop a finished request from the outstanding table (a future's done callback)."""
    outstanding.pop(key, None)
