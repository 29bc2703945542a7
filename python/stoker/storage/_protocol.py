"""The storage protocol every backend implements: keys, labels, and reads of one or many samples.

Reads are thread-safe and release the GIL while waiting on I/O, so a pipeline stage may call
`read_many` from many threads at once. A backend reads every sample it is asked for and reports
each failure in its slot; the policy (raise, skip and record, or hand the errors back with
`try_read_indices`) is applied here, once, for every backend. A store that stays unreachable past
its retry deadline raises `StorageUnavailableError` whatever the policy: an outage is never a
skipped sample. `fetch` and `fetch_many` are the async forms, for async
stages; they run the same reads on the storage's own I/O threads, at most
``max_concurrent_reads`` at a time (LMDBIO's staggering: a bounded number of simultaneous
requests keeps a device's queue full without turning sequential reads into random ones).
"""

from __future__ import annotations

import asyncio
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from .._daemon_pool import DaemonThreadPool
from ..errors import ConfigurationError, StorageError, StorageUnavailableError, check_on_error
from ..failures import Failure, OnError, error_text, qualified_name

__all__ = ["Storage"]


class Storage(ABC):
    """Where a dataset's bytes live.

    A backend sets ``self._keys`` and ``self._labels`` when it opens and provides one read,
    `_read_indices` (bytes or the exception, per sample), and `close` where it holds files or
    connections; everything else (`read_many` and its failure policy, async fetches, sequential
    iteration, key lookup) derives from them. What a backend may do beyond that (blocks, members,
    samples that change per epoch, latency reports) is a protocol of its own
    (`BlockStorage`, `MemberStorage`, `EpochStorage`, `LatencyReporting`), which the Loader checks
    for explicitly.

    Attributes:
        classes: Class names, where labels are class indices (None otherwise).
        failures: Samples skipped by reads with ``on_error="skip"``, oldest first (capped).
    """

    classes: list[str] | None = None
    is_remote: bool = False
    """True for network storage: the Loader then fetches per sample, out of order (the Cassandra
    paper's incremental prefetch), with more batches in flight."""
    _FAILURES_KEPT = 1000

    def __init__(self, max_concurrent_reads: int = 16) -> None:
        if max_concurrent_reads < 1:
            raise ConfigurationError(f"max_concurrent_reads must be positive, got {max_concurrent_reads}")
        self.max_concurrent_reads = max_concurrent_reads
        self._read_slots = threading.BoundedSemaphore(max_concurrent_reads)
        self._index_of: dict[str, int] | None = None
        self._executor: DaemonThreadPool | None = None
        self._lock = threading.Lock()
        self.failures: list[Failure] = []
        self.failure_count = 0

    _keys: Sequence[str] = ()
    _labels: Sequence[int | float | None] = ()

    @property
    def keys(self) -> Sequence[str]:
        """Every sample's key, in storage order."""
        return self._keys

    @property
    def labels(self) -> Sequence[int | float | None]:
        """Every sample's label, aligned with `keys`: a class index (see `classes`), a float
        target, or None where a sample has none."""
        return self._labels

    # ---- what subclasses provide ----------------------------------------------------------

    @abstractmethod
    def _read_indices(self, indices: Sequence[int]) -> list[bytes | Exception]:
        """Read the samples at ``indices`` of `keys`: each sample's bytes, or the exception that
        sample failed with (naming it), so one bad sample never hides the others."""

    # ---- derived --------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.keys)

    def index_of(self, key: str) -> int:
        """Position of ``key`` in `keys`.

        Raises:
            KeyError: No such sample.
        """
        if self._index_of is None:
            with self._lock:
                if self._index_of is None:
                    self._index_of = {key: index for index, key in enumerate(self.keys)}
        try:
            return self._index_of[key]
        except KeyError:
            raise KeyError(f"{self.describe()}: no sample with key {key!r}") from None

    def indices_of(self, keys: Sequence[str]) -> tuple[np.ndarray, list[str]]:
        """Positions of ``keys`` (in their order), and the keys this storage does not hold.

        For a few keys of a large dataset (the samples of a loss spike) this does not build
        `index_of`'s table of every key (a gigabyte at 10^7 keys): it goes through `keys` once,
        holding only the keys asked for. A backend whose `index_of` needs no table, or whose
        table is built already, is asked key by key.
        """
        if type(self).index_of is not Storage.index_of or self._index_of is not None or len(keys) * 4 > len(self):
            found, unknown = [], []
            for key in keys:
                try:
                    found.append(self.index_of(key))
                except KeyError:
                    unknown.append(key)
            return np.asarray(found, dtype=np.int64), unknown
        slots: dict[str, list[int]] = {}
        for slot, key in enumerate(keys):
            slots.setdefault(key, []).append(slot)
        positions = np.full(len(keys), -1, dtype=np.int64)
        for index, key in enumerate(self.keys):
            if key in slots:
                positions[slots[key]] = index
        missing = positions < 0
        return positions[~missing], [keys[slot] for slot in np.flatnonzero(missing).tolist()]

    def label(self, key: str) -> int | float | None:
        """The label of one sample."""
        return self.labels[self.index_of(key)]

    def read(self, key: str) -> bytes:
        """Read one sample's bytes.

        Raises:
            KeyError: No such sample.
            StorageError: The sample's bytes cannot be read; the error names the file.
        """
        data = self.read_many([key])[0]
        if data is None:  # only under on_error="skip", which read_many was not given
            raise StorageError(f"{self.describe()}: sample {key!r} could not be read")
        return data

    def read_many(self, keys: Sequence[str], *, on_error: OnError = "raise") -> list[bytes | None]:
        """Read many samples at once, in the order asked (duplicates allowed).

        Backends that can, coalesce nearby requests into few large reads. At most
        ``max_concurrent_reads`` such calls run at once per storage.

        Args:
            keys: Samples to read.
            on_error: ``"raise"`` raises the first failure; ``"skip"`` returns None for a failed
                sample, counts it and records it in `failures`, and reads the rest.

        Raises:
            KeyError: A key that is not in the storage and ``on_error="raise"`` (under
                ``"skip"`` it is None and recorded, like any other failed sample).
            StorageUnavailableError: The store stayed unreachable past the retry deadline
                (whatever ``on_error``).
            StorageError: A read failed and ``on_error="raise"``.
        """
        if on_error != "skip":
            return self.read_indices([self.index_of(key) for key in keys], on_error=on_error)
        found: list[int] = []
        slots: list[int] = []
        out: list[bytes | None] = [None] * len(keys)
        for slot, key in enumerate(keys):
            try:
                found.append(self.index_of(key))
                slots.append(slot)
            except KeyError as error:
                self.record_failure(key, error)
        for slot, data in zip(slots, self.read_indices(found, on_error=on_error)):
            out[slot] = data
        return out

    def read_indices(self, indices: Sequence[int], *, on_error: OnError = "raise") -> list[bytes | None]:
        """`read_many` by position in `keys`: what a loader that already holds positions calls
        (no key lookup, so no key-to-position table for a million keys is ever built).

        Raises:
            IndexError: A position outside the storage.
        """
        check_on_error(on_error, ("raise", "skip"), why="a read has no slot to zero")
        return self.apply_on_error(indices, self.try_read_indices(indices), on_error)

    def apply_on_error(self, indices: Sequence[int], results: Sequence[bytes | Exception], on_error: OnError) -> list[bytes | None]:
        """``results`` of reading ``indices`` under ``on_error``: raise the first failure, or
        record each (in `failures`) and put None in its place. An unavailable store raises
        whatever ``on_error`` says."""
        out: list[bytes | None] = []
        for index, result in zip(indices, results):
            if isinstance(result, Exception):
                if on_error == "raise" or isinstance(result, StorageUnavailableError):
                    raise result
                self.record_failure(self._keys[index], result)
                out.append(None)
            else:
                out.append(result)
        return out

    def try_read_indices(self, indices: Sequence[int]) -> list[bytes | Exception]:
        """Read the samples at ``indices``, each as its bytes or as the exception it failed with
        (nothing is recorded in `failures`): for callers with their own failure policy, such as
        the Loader.

        Raises:
            IndexError: A position outside the storage.
        """
        size = len(self._keys)
        for index in indices:
            if not 0 <= index < size:
                raise IndexError(f"{self.describe()}: no sample at position {index} (it has {size})")
        with self._read_slots:
            results = self._read_indices(indices)
        if len(results) != len(indices):
            raise StorageError(f"{self.describe()}: read {len(results)} samples for {len(indices)} requested")
        return results

    async def fetch_index(self, index: int) -> bytes:
        """The bytes of the sample at position ``index``, for async code (the Loader's sample
        prefetch). Local storage reads on its I/O threads; network storage overrides this with
        its own concurrent, retried requests.

        Raises:
            StorageError: The sample cannot be read; the error names it.
        """
        loop = asyncio.get_running_loop()
        data = await loop.run_in_executor(self._io_threads(), lambda: self.read_indices([index])[0])
        assert data is not None  # read_indices raises rather than return None under "raise"
        return data

    def stats(self) -> dict[str, int]:
        """Counters of what the storage did (network storage: requests, bytes, retries...);
        empty where nothing is counted."""
        return {}

    def record_failure(self, key: str, error: BaseException) -> None:
        """Count a sample a read skipped and keep it in `failures` (the first thousand)."""
        with self._lock:
            self.failure_count += 1
            if len(self.failures) < self._FAILURES_KEPT:
                self.failures.append(
                    Failure(key, "read", error_text(error), "skipped", source=self.describe(), error_type=qualified_name(error))
                )

    async def fetch(self, key: str) -> bytes:
        """`read`, for async code: runs on the storage's I/O threads."""
        return (await self.fetch_many([key]))[0]  # type: ignore[return-value]

    async def fetch_many(self, keys: Sequence[str], *, on_error: OnError = "raise") -> list[bytes | None]:
        """`read_many`, for async code: many calls may be in flight at once."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._io_threads(), lambda: self.read_many(keys, on_error=on_error))

    def _io_threads(self) -> Any:
        if self._executor is None:
            with self._lock:
                if self._executor is None:
                    # Daemon threads: a read stuck on a hung mount or a silent server must not
                    # keep the interpreter from exiting (a ThreadPoolExecutor joins at exit).
                    self._executor = DaemonThreadPool(self.max_concurrent_reads, thread_name_prefix="stoker-io")
        return self._executor

    def iter_sequential(self, chunk: int = 256) -> Iterator[tuple[str, bytes]]:
        """Every sample in storage order, read in chunks (large sequential reads where possible)."""
        keys = self.keys
        for start in range(0, len(keys), chunk):
            positions = range(start, min(start + chunk, len(keys)))
            for position, data in zip(positions, self.read_indices(positions)):
                yield keys[position], data  # type: ignore[misc]

    def describe(self) -> str:
        """A short name for errors and logs."""
        return type(self).__name__

    def close(self) -> None:
        """Release files and threads. Idempotent."""
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)

    def __enter__(self) -> Storage:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()
