"""A local cache of fetched samples with one byte limit, shared by every process on the node.

For remote storage read for many epochs: the second epoch reads from local disk (or from
``/dev/shm``) instead of the network. All ranks of a node open the same folder and see one cache:
a sample fetched by one rank is a hit for the others (the LMDBIO paper's "one reader per node",
applied to remote storage), under one size limit for all of them.

The entries are in LMDB (`CacheEntries`): a store is one write transaction, so a reader in any
process never sees a partial entry, and a rank killed mid-write never breaks the cache. Claims
(`NodeClaims`) keep two ranks from fetching one object at once: locks the kernel drops when a
rank dies. Eviction is oldest-stored first: an epoch reads each sample once, so that is the
order least recently used would give, without the write that recording each read would cost on
the hot path. A miss costs a read, a claim and a store on top of the fetch, about 30 us of CPU
for a 20 KB sample here (it was ten times that on SQLite): a cold epoch through the cache runs
close to one without it (docs/benchmarks.md, "Several hosts").
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from pathlib import Path

from ...errors import ConfigurationError
from ._cache_entries import CacheEntries
from ._node_claims import NodeClaims

__all__ = ["SampleCache"]

# How long a request waits for another's claim on an entry before fetching it itself (the
# holder's fetch may be stuck in an outage, retrying to its deadline).
CLAIM_SECONDS = 60.0
# Entries up to this size are stored on the calling event loop (see `SampleCache.store`).
_STORE_IN_PLACE = 1 << 20

_logger = logging.getLogger("stoker.storage")


class SampleCache:
    """Samples on local disk, about ``max_bytes`` of them at most (within one entry; the index's
    own pages count too), shared by the processes that open the same folder.

    Args:
        folder: Where the cache lives (created).
        max_bytes: The byte limit; the oldest entries go first.

    Raises:
        ValueError: A limit that is not positive.
        StorageError: ``lmdb`` is not installed (it comes with the ``s3`` extra), or the folder
            cannot hold the cache.
    """

    def __init__(self, folder: str | os.PathLike[str], max_bytes: int) -> None:
        if max_bytes <= 0:
            raise ConfigurationError(f"max_bytes must be positive, got {max_bytes}")
        self.folder = Path(folder)
        self.max_bytes = max_bytes
        self._entries = CacheEntries(self.folder / "entries", max_bytes)
        self.hits = 0  # this process's
        self.misses = 0
        self._lock = threading.Lock()
        self._warned: set[str] = set()
        self._pending: list[tuple[str, bytes | memoryview, str | None]] = []
        self._flush_scheduled = False
        self._claims: NodeClaims | None = None
        try:
            self._claims = NodeClaims(self.folder)
        except OSError as error:  # a read-only cache: its ranks fetch what they miss
            self._warn_once("write", error)

    @property
    def size(self) -> int:
        """Bytes the cache holds on disk now, for all processes sharing it."""
        return self._entries.size

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, name: str) -> bytes | None:
        """The cached bytes of ``name``, or None (also when the cache cannot be read: said once
        in a warning; the sample is then fetched)."""
        try:
            data = self._entries.get(name)
        except Exception as error:  # a damaged file, a vanished folder
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
        rank or this one), this waits for its entry rather than fetching the same object again.
        A rank that dies lets go of its claims at once (see `NodeClaims`); after ``CLAIM_SECONDS``
        of waiting, this request fetches the entry itself.
        ``in_thread``: read off the calling event loop (entries of megabytes).
        """
        claims = self._claims
        read = self.get
        lapses = time.monotonic() + CLAIM_SECONDS
        while True:
            data = await asyncio.to_thread(read, name) if in_thread else read(name)
            read = self._quiet_get  # one miss counted however long the wait
            if data is not None:
                return data, None
            if claims is None:
                return None, None
            claim = claims.new_claim()
            try:
                claimed = claims.take(name, claim)
            except OSError as error:
                self._warn_once("write", error)
                return None, None
            if claimed:
                # Claimed: unless the last holder stored it between our read and our claim.
                data = await asyncio.to_thread(read, name) if in_thread else read(name)
                if data is not None:
                    self.release(name, claim)
                    return data, None
                return None, claim
            left = lapses - time.monotonic()
            if left <= 0:  # its holder's fetch is stuck (an outage): fetch it too
                return None, None
            released = claims.released(name)
            if released is None:  # held by another process (or let go just now): look again soon
                await asyncio.sleep(poll)
                continue
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(released, left)

    def put(self, name: str, data: bytes | memoryview, claim: str | None = None) -> None:
        """Keep ``data`` as ``name`` (larger than the whole limit: not kept), and let go of
        ``claim`` (from `get_or_claim`)."""
        try:
            self._entries.put(name, data)
        except Exception as error:  # a full disk must not fail a sample that was read fine
            self._warn_once("write", error)
        if claim is not None:
            self.release(name, claim)

    async def store(self, name: str, data: bytes | memoryview, claim: str | None = None) -> None:
        """`put`, from an event loop. A larger entry (a block of megabytes) is stored off the
        loop. Samples are stored together once the loop's callbacks of this turn have run: the
        responses that arrived together, in one write transaction, one turn of the node's
        write lock instead of one each (its holder's rank waits for it; ``claim`` is let go of
        once the entry is stored, so nothing on the node fetches it meanwhile)."""
        if len(data) > _STORE_IN_PLACE:
            await asyncio.to_thread(self.put, name, data, claim)
            return
        with self._lock:
            self._pending.append((name, data, claim))
            schedule, self._flush_scheduled = not self._flush_scheduled, True
        if schedule:
            asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        """Store what `store` holds back now (also called by `close`)."""
        with self._lock:
            pending, self._pending = self._pending, []
            self._flush_scheduled = False
        if not pending:
            return
        try:
            self._entries.put_many([(name, data) for name, data, _ in pending])
        except Exception as error:  # a full disk must not fail a sample that was read fine
            self._warn_once("write", error)
        for name, _, claim in pending:
            self.release(name, claim)

    def release(self, name: str, claim: str | None) -> None:
        """Let go of ``claim`` on ``name`` (its fetch failed): another request may fetch it."""
        if claim is None or self._claims is None:
            return
        try:
            self._claims.release(name, claim)
        except OSError as error:
            self._warn_once("write", error)

    def _quiet_get(self, name: str) -> bytes | None:
        try:
            return self._entries.get(name)
        except Exception:
            return None

    def _warn_once(self, what: str, error: Exception) -> None:
        with self._lock:
            if what in self._warned:
                return
            self._warned.add(what)
        outcome = "samples are fetched instead" if what == "read" else "samples are not kept in it"
        _logger.warning("sample cache %s: cannot %s it (%s: %s); %s", self.folder, what, type(error).__name__, error, outcome)

    def close(self) -> None:
        """Release this process's handle (the entries stay)."""
        self.flush()
        self._entries.close()
