"""A local cache of fetched samples with one byte limit, shared by every process on the node.

For remote storage read for many epochs: the second epoch reads from local disk (or from
``/dev/shm``) instead of the network. All ranks of a node open the same folder and see one cache:
a sample fetched by one rank is a hit for the others (the LMDBIO paper's "one reader per node",
applied to remote storage), under one size limit for all of them.

Built on `diskcache` (SQLite for the index, one file per large value): writes are transactions,
so a reader in any process never sees a partial entry, and a rank killed mid-write leaves at
most an orphan file, never a broken cache. Eviction is oldest-stored first: an epoch reads each
sample once, so that is the order least recently used would give, without the write that
recording each read would cost on the hot path (measured: 14-54 us a hit instead of 99-135 us).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import threading
from pathlib import Path
from typing import Any

from ...errors import ConfigurationError, StorageError

__all__ = ["SampleCache"]

_logger = logging.getLogger("stoker.storage")

# A claim: "this process is fetching it", so the node's other ranks wait for its entry instead of
# fetching the same object. It lapses after this long (a fetch stuck in an outage: a waiter then
# fetches it itself).
CLAIM_SECONDS = 60.0
_CLAIM = "\x00claim:"


def _alive(process: int) -> bool:
    """Whether process ``process`` (on this machine) still runs."""
    try:
        os.kill(process, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's: it exists
        return True
    return True


class SampleCache:
    """Samples on local disk, about ``max_bytes`` of them at most (within one entry; the index's
    own pages count too), shared by the processes that open the same folder.

    Args:
        folder: Where the cache lives (created).
        max_bytes: The byte limit; the oldest entries go first.

    Raises:
        ValueError: A limit that is not positive.
        StorageError: ``diskcache`` is not installed (it comes with the ``s3`` and ``cassandra``
            extras).
    """

    def __init__(self, folder: str | os.PathLike[str], max_bytes: int) -> None:
        if max_bytes <= 0:
            raise ConfigurationError(f"max_bytes must be positive, got {max_bytes}")
        try:
            import diskcache
        except ImportError as error:
            raise StorageError("a local sample cache needs diskcache: pip install 'stoker[s3]' (or diskcache)") from error
        self.folder = Path(folder)
        self.max_bytes = max_bytes
        # cull_limit=1: each write while over the limit first evicts the oldest entry, so the
        # cache stays within about one entry of the limit (diskcache's default evicts ten at once).
        self._cache: Any = diskcache.Cache(str(self.folder), size_limit=max_bytes, eviction_policy="least-recently-stored", cull_limit=1)
        self.hits = 0  # this process's
        self.misses = 0
        self._lock = threading.Lock()
        self._warned: set[str] = set()
        self._claims = itertools.count()

    @property
    def size(self) -> int:
        """Bytes the cache holds on disk now, for all processes sharing it."""
        return int(self._cache.volume())

    def __len__(self) -> int:
        return len(self._cache)

    def get(self, name: str) -> bytes | None:
        """The cached bytes of ``name``, or None (also when the cache cannot be read: said once
        in a warning; the sample is then fetched)."""
        try:
            data = self._cache.get(name)
        except Exception as error:  # a locked or damaged index, a vanished folder
            self._warn_once("read", error)
            data = None
        with self._lock:
            if data is None:
                self.misses += 1
            else:
                self.hits += 1
        return data

    async def get_or_claim(self, name: str, *, in_thread: bool = False, poll: float = 0.005) -> tuple[bytes | None, str | None]:
        """``(bytes, None)`` for a cached ``name``; else ``(None, claim)``: this request now holds
        the claim to fetch it, and must `put` it with the claim (or `release` the claim if the
        fetch fails). ``claim`` is None where claims cannot be recorded (then just fetch).

        While another request on the node holds the claim (its fetch is on its way, in another
        rank or this one), this waits for its entry rather than fetching the same object again;
        a claim whose process has died, or older than ``CLAIM_SECONDS``, is taken over.
        ``in_thread``: read off the calling event loop (entries of megabytes).
        """
        claim = f"{os.getpid()}:{next(self._claims)}"
        read = self.get
        while True:
            data = await asyncio.to_thread(read, name) if in_thread else read(name)
            read = self._quiet_get  # one miss counted however long the wait
            if data is not None:
                return data, None
            holder = self._claim(name, claim)
            if holder == claim:
                # Claimed: unless the last holder stored it between our read and our claim.
                data = await asyncio.to_thread(read, name) if in_thread else read(name)
                if data is not None:
                    self.release(name, claim)
                    return data, None
                return None, claim
            if holder is None:
                return None, None
            if not _alive(int(holder.split(":")[0])):
                self.release(name, holder)
                continue
            await asyncio.sleep(poll)

    def put(self, name: str, data: bytes | memoryview, claim: str | None = None) -> None:
        """Keep ``data`` as ``name`` (larger than the whole limit: not kept), and let go of
        ``claim`` (from `get_or_claim`)."""
        try:
            if len(data) <= self.max_bytes:
                self._cache.set(name, bytes(data))
        except Exception as error:  # a full disk must not fail a sample that was read fine
            self._warn_once("write", error)
        if claim is not None:
            self.release(name, claim)

    def release(self, name: str, claim: str | None) -> None:
        """Let go of ``claim`` on ``name`` (its fetch failed): another request may fetch it."""
        if claim is None:
            return
        key = _CLAIM + name
        try:
            if self._cache.get(key) == claim:
                self._cache.delete(key)
        except Exception as error:
            self._warn_once("write", error)

    def _quiet_get(self, name: str) -> bytes | None:
        try:
            return self._cache.get(name)
        except Exception:
            return None

    def _claim(self, name: str, claim: str) -> str | None:
        """Who holds the claim on ``name`` now: ``claim`` if this request got it; None if claims
        cannot be recorded."""
        key = _CLAIM + name
        try:
            if self._cache.add(key, claim, expire=CLAIM_SECONDS):
                return claim
            holder = self._cache.get(key)
        except Exception as error:
            self._warn_once("write", error)
            return None
        return claim if holder is None and self._cache.add(key, claim, expire=CLAIM_SECONDS) else holder

    def _warn_once(self, what: str, error: Exception) -> None:
        with self._lock:
            if what in self._warned:
                return
            self._warned.add(what)
        outcome = "samples are fetched instead" if what == "read" else "samples are not kept in it"
        _logger.warning("sample cache %s: cannot %s it (%s: %s); %s", self.folder, what, type(error).__name__, error, outcome)

    def close(self) -> None:
        """Release this process's handle (the entries stay)."""
        self._cache.close()
