"""What every network backend shares: many requests in flight, retries, an optional local cache,
and both a blocking and an async face.

A backend provides `_request` (one attempt at one sample's bytes, a coroutine) and `_classify`
(which of its errors are worth a retry). Everything above that is here:

- `fetch_index` / `fetch`: one sample, async, on whatever event loop calls it, at most
  ``max_in_flight`` requests at once per loop, retried by the `RetryPolicy`, through the cache.
- `read_indices` (blocking, for pipeline threads and plain code): every sample of the call is
  requested at once (within-batch concurrency, never one after another) on the storage's own
  event-loop thread.
- `OutOfOrderPrefetcher` uses `fetch` per sample, so one slow request delays one sample.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import time
import weakref
from abc import abstractmethod
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ...errors import ConfigurationError, StorageClosedError, StorageError
from ...failures import OnError
from .._protocol import Storage
from ..policies import ErrorKind, RetryCounters, RetryPolicy, SampleCache, StoreTraffic, call_with_retries, failure_line

__all__ = ["RemoteStorage"]


class RemoteStorage(Storage):
    """A `Storage` whose samples are fetched over the network.

    Args:
        max_in_flight: Requests outstanding at once per event loop (the connection pool's load).
        retry: How failed requests are retried.
        cache: A local `SampleCache` of fetched samples (None: none).
        max_concurrent_reads: See `Storage` (blocking batch calls at once).
    """

    is_remote = True

    def __init__(
        self,
        *,
        max_in_flight: int = 256,
        retry: RetryPolicy | None = None,
        cache: SampleCache | None = None,
        max_concurrent_reads: int = 64,
    ) -> None:
        super().__init__(max_concurrent_reads)
        if max_in_flight < 1:
            raise ConfigurationError(f"max_in_flight must be positive, got {max_in_flight}")
        self.max_in_flight = max_in_flight
        self.retry = retry or RetryPolicy()
        self.cache = cache
        self._counters: RetryCounters | None = None
        self.requests = 0
        self.bytes_fetched = 0
        self.traffic = StoreTraffic()  # requests by kind, bytes, cache bytes: what reading costs
        self._latencies: deque[float] = deque(maxlen=64)
        self._limits: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = weakref.WeakKeyDictionary()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False
        self._loop_thread: threading.Thread | None = None
        self._loop_finalizer: weakref.finalize[Any, Any] | None = None
        # Closes what lives on the storage's own loop (a client's connections), run there once
        # its requests are cancelled and before it stops. Appended to on the loop's thread or
        # before it starts; read when the loop stops.
        self._loop_closers: list[Callable[[], Awaitable[None]]] = []

    # ---- what backends provide ------------------------------------------------------------

    @abstractmethod
    async def _request(self, index: int) -> bytes:
        """One attempt at the bytes of the sample at ``index`` (no retry, no cache)."""

    @abstractmethod
    def _classify(self, error: BaseException) -> ErrorKind:
        """Whether ``error`` is worth a retry, is the server asking us to slow down, or is final."""

    @abstractmethod
    def sample_name(self, index: int) -> str:
        """Where the sample lives, for errors (a URL; never credentials)."""

    @property
    def counters(self) -> RetryCounters:
        """Retries and outages of this store (made on first use, when `describe` can name it).
        Made under the storage's lock: two loops' first retries at once once made two, and the
        retries counted in the one dropped were lost."""
        counters = self._counters
        if counters is None:
            with self._lock:
                if self._counters is None:
                    self._counters = RetryCounters(self.describe())
                counters = self._counters
        return counters

    def _count_fetched(self, data: bytes | memoryview) -> None:
        """One request's bytes in `requests` and `bytes_fetched`, under the storage's lock:
        `fetch_index` runs on whatever loop calls it (the storage's own, a pipeline's), so
        these counters are read-modify-writes from several threads at once."""
        with self._lock:
            self.requests += 1
            self.bytes_fetched += len(data)

    # ---- async reads ----------------------------------------------------------------------

    def _limit(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        limit = self._limits.get(loop)
        if limit is None:
            with self._lock:
                limit = self._limits.setdefault(loop, asyncio.Semaphore(self.max_in_flight))
        return limit

    async def fetch_index(self, index: int) -> bytes:
        """The bytes of the sample at ``index``, from the cache or the server (with retries).

        Raises:
            StorageUnavailableError: The server kept failing past the retry deadline.
            StorageError: A final error (missing sample, bad checksum); names the sample.
        """
        name = self.sample_name(index)
        cache = self._sample_cache()
        # The node's cache: a hit, or a wait for another rank fetching it now, or ours to fetch.
        claim = None
        if cache is not None:
            cached, claim = await cache.get_or_claim(name)
            if cached is not None:
                self.traffic.served("node cache", len(cached))
                return cached
        try:
            async with self._limit():
                try:
                    data = await call_with_retries(
                        lambda: self._request(index), policy=self.retry, classify=self._classify, name=name, counters=self.counters
                    )
                except StorageError:  # unavailable past the deadline, or a verdict such as a bad checksum
                    raise
                except Exception as error:  # a final error (missing object, refused): name the sample
                    raise StorageError(failure_line(name, error)) from error
        except BaseException:  # failed or cancelled: another request may fetch it
            if cache is not None:
                cache.release(name, claim)
            raise
        self._count_fetched(data)
        if cache is not None:
            await cache.store(name, data, claim)
        return data

    def request_latencies(self) -> Sequence[float]:
        # One call of the deque's own (`copy`, whole under its lock on a free-threaded build):
        # `tuple()` would iterate it while the storage's loop appends ("deque mutated").
        return tuple(self._latencies.copy())

    def _sample_cache(self) -> SampleCache | None:
        """The cache samples go through: ``cache``, unless a backend caches larger units
        (S3 block streaming keeps whole blocks there instead)."""
        return self.cache

    async def fetch(self, key: str) -> bytes:
        return await self.fetch_index(self.index_of(key))

    async def fetch_indices(self, indices: Sequence[int], *, on_error: OnError = "raise") -> list[bytes | None]:
        """Every sample at ``indices``, all requested at once, in the order asked.

        Raises:
            StorageUnavailableError: The store stayed unreachable past the deadline (whatever
                ``on_error``).
            StorageError: A sample failed and ``on_error="raise"``.
        """
        return self.apply_on_error(indices, await self._gather(indices), on_error)

    async def _gather(self, indices: Sequence[int]) -> list[bytes | Exception]:
        results = await asyncio.gather(*(self.fetch_index(index) for index in indices), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, Exception):
                raise result  # cancellation, Ctrl-C: never a per-sample failure
        return results  # type: ignore[return-value]

    async def fetch_many(self, keys: Sequence[str], *, on_error: OnError = "raise") -> list[bytes | None]:
        return await self.fetch_indices([self.index_of(key) for key in keys], on_error=on_error)

    # ---- blocking reads -------------------------------------------------------------------

    def run(self, coroutine: Any) -> Any:
        """Run ``coroutine`` on the storage's own event-loop thread and wait for its result.

        Raises:
            StorageClosedError: The storage was (or is being) closed.
        """
        try:
            loop = self._own_loop()
        except StorageClosedError:
            coroutine.close()
            raise
        try:
            return asyncio.run_coroutine_threadsafe(coroutine, loop).result()
        except (asyncio.CancelledError, concurrent.futures.CancelledError) as error:
            if self._closed:  # close() cancelled the requests in flight
                raise StorageClosedError(f"{self.describe()}: the storage was closed while this read was in flight") from error
            raise

    def event_loop(self) -> asyncio.AbstractEventLoop:
        """The storage's own event loop (a thread, started on first use): it outlives any one
        pipeline, so requests made ahead of an epoch boundary run on it."""
        return self._own_loop()

    def _own_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            with self._lock:
                if self._closed:
                    # A new loop now would be a thread that nothing stops (a Loader still
                    # running over a storage closed under it).
                    raise StorageClosedError(
                        f"{self.describe()}: the storage was closed while it was still being read (a Loader over it is running); "
                        "close it after the loop that reads it ends, or open it with `with` around that loop"
                    )
                if self._loop is None:
                    loop = asyncio.new_event_loop()
                    thread = threading.Thread(target=loop.run_forever, name=f"stoker-net-{type(self).__name__}", daemon=True)
                    thread.start()
                    self._loop, self._loop_thread = loop, thread
                    # A storage never closed still stops its loop at interpreter exit: requests
                    # in flight in native code while Python finalizes can crash the process.
                    self._loop_finalizer = weakref.finalize(self, _stop_loop, loop, thread, closers=self._loop_closers)
        return self._loop

    def _read_indices(self, indices: Sequence[int]) -> list[bytes | Exception]:
        return self.run(self._gather(indices))

    def close(self) -> None:
        """Stop the event-loop thread and release connections. Idempotent."""
        with self._lock:
            self._closed = True
        loop, thread = self._loop, self._loop_thread
        if loop is not None and thread is not None:
            # Requests still running (made ahead of an epoch that never came) end first. The
            # loop stays this storage's until then: a request being cancelled that asks for it
            # (a block fetch) must not start a new one that nothing would stop.
            cancelled = _cancel_tasks(loop)
            with self._lock:
                self._loop = self._loop_thread = None
            if self._loop_finalizer is not None:
                self._loop_finalizer.detach()
            _stop_loop(loop, thread, cancelled=cancelled, closers=self._loop_closers)
        if self.cache is not None:
            self.cache.close()
        super().close()

    def traffic_report(self) -> dict[str, Any]:
        """`StoreTraffic.snapshot` with the retries: what a Loader reports per epoch."""
        return {**self.traffic.snapshot(), "retries": self.counters.retries}

    def stats(self) -> dict[str, int]:
        """Requests, bytes, retries, server-busy waits, samples given up on, cache hits."""
        with self._lock:  # the two read together: never a request counted without its bytes
            requests, fetched = self.requests, self.bytes_fetched
        return {
            "requests": requests,
            "bytes": fetched,
            "retries": self.counters.retries,
            "overloads": self.counters.overloads,
            "given_up": self.counters.given_up,
            "cache_hits": self.cache.hits if self.cache is not None else 0,
        }


# How long closing a storage waits for the work its event loop handed to threads.
_EXECUTOR_SECONDS = 10.0
# How long closing a storage lets the client's own threads see that requests were cancelled.
# obstore's requests run on tokio threads that take the GIL once more after a request is
# cancelled; a process that begins to exit meanwhile has such a thread take the GIL of a
# finalizing interpreter, which ends the thread by unwinding Rust frames: the process aborts
# (SIGABRT, nothing printed) after its work ended well. Seen at the end of the hosts tests' ranks.
_CANCELLED_GRACE_SECONDS = 0.2


def _cancel_tasks(loop: asyncio.AbstractEventLoop) -> bool:
    """Cancel every task of ``loop`` (running in another thread) and wait for them to end.
    Returns whether there were any."""
    with contextlib.suppress(Exception):
        return asyncio.run_coroutine_threadsafe(_cancel_other_tasks(), loop).result(timeout=5)
    return False


def _stop_loop(
    loop: asyncio.AbstractEventLoop,
    thread: threading.Thread,
    *,
    cancelled: bool = False,
    closers: Sequence[Callable[[], Awaitable[None]]] = (),
) -> None:
    """Stop ``loop``, running in ``thread``, once its tasks are cancelled and ``closers`` ran on
    it; then close it. ``cancelled``: tasks were cancelled already (see
    `_CANCELLED_GRACE_SECONDS`)."""
    if loop.is_closed():
        return
    cancelled = _cancel_tasks(loop) or cancelled
    if closers:
        with contextlib.suppress(Exception):  # a client that fails to close leaves its sockets to the loop's close
            asyncio.run_coroutine_threadsafe(_run_closers(list(closers)), loop).result(timeout=_EXECUTOR_SECONDS)
    with contextlib.suppress(Exception):
        # Work a cancelled task handed to a thread (a cache read, a large store) runs on: it ends
        # before the cache it uses is closed. Bounded: a thread stuck in a call is left behind.
        asyncio.run_coroutine_threadsafe(loop.shutdown_default_executor(), loop).result(timeout=_EXECUTOR_SECONDS)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()
    if cancelled:
        time.sleep(_CANCELLED_GRACE_SECONDS)  # the GIL is free: the client's threads finish


async def _run_closers(closers: list[Callable[[], Awaitable[None]]]) -> None:
    for close in closers:
        with contextlib.suppress(Exception):
            await close()


async def _cancel_other_tasks() -> bool:
    """Cancel every task of the running loop but this one, and wait for them to end (again for
    tasks that cancelled ones started on their way out). Returns whether there were any."""
    cancelled = False
    for _ in range(10):
        others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        if not others:
            return cancelled
        for task in others:
            cancelled = task.cancel() or cancelled
        await asyncio.gather(*others, return_exceptions=True)
    return cancelled
