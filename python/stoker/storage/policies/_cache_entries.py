"""The node cache's entries: bytes by name in one LMDB environment, under one byte limit, oldest
stored out first, shared by every process that opens the folder.

LMDB, not SQLite (`diskcache`, before): a cold epoch through the node cache stores every sample
it reads, and storing was what made that epoch slower than reading with no cache at all.
Measured on 20 KB samples: 13 us of CPU a store in LMDB, 130-140 us through diskcache (its
Python, SQL and triggers), whose ranks also queued on SQLite's one write lock, whose busy
handler sleeps whole milliseconds. A read is a few microseconds either way.

Bound natively (`stoker._native.CacheEntries`, src/core/storage/cache_entries.rs), not through
py-lmdb: py-lmdb lets go of the GIL around every put, and the event loop's thread then waits out
a busy Python thread's switch interval (5 ms) to take it back, each time (32 puts of 20 KB took
153 ms beside a busy thread against 0.2 ms quiet). The native calls keep the GIL for a turn's
entries. The layout (four tables: entries, stamps, order, totals), eviction oldest stored first
and the charge of each entry (its pages, name and bookkeeping) are described there. Commits are
not flushed to disk: a cache that loses its last entries in a power cut fetches them again, and
one written before the machine last started is not trusted (see `open_environment`).
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Sequence
from pathlib import Path

from ... import _native
from ._cache_environment import close_environment, open_environment

__all__ = ["CacheEntries"]

_LONGEST_KEY = 400  # bytes of a name kept as it is; LMDB's keys end at 511


def _key(name: str) -> bytes:
    """``name`` as an LMDB key: a longer one (a URL and a byte range) by its digest."""
    encoded = name.encode()
    return encoded if len(encoded) <= _LONGEST_KEY else b"#" + hashlib.blake2b(encoded, digest_size=32).hexdigest().encode()


class CacheEntries:
    """Entries of the cache at ``folder``.

    Args:
        folder: The LMDB environment's folder (created).
        max_bytes: The byte limit (positive).

    Raises:
        StorageError: The folder cannot hold an LMDB environment.
    """

    def __init__(self, folder: Path, max_bytes: int) -> None:
        self.folder = folder
        self.max_bytes = max_bytes
        folder.mkdir(parents=True, exist_ok=True)
        self._map_bytes = 2 * max_bytes + (1 << 30)  # the file grows to the limit, and a little beyond where freed pages are scattered
        self._lock = threading.Lock()
        self._closed = False
        self._open()

    def _open(self) -> None:
        self._process = os.getpid()
        self._env = open_environment(self.folder, self._map_bytes)

    def _environment(self) -> _native.CacheEntries:
        """The environment, opened again in a forked child: LMDB's handles are one process's."""
        if self._process != os.getpid():
            with self._lock:
                if self._process != os.getpid():
                    self._open()
        return self._env

    def get_many(self, names: Sequence[str]) -> list[bytes | None]:
        """The bytes of each of ``names`` (None where missing), read in one transaction: a loop
        turn's lookups pay for one transaction, not one each.

        Raises:
            OSError: The cache cannot be read.
        """
        return self._environment().get_many([_key(name) for name in names])

    def put(self, name: str, data: bytes | memoryview) -> bool:
        """Keep ``data`` as ``name``, evicting the oldest entries to stay within the limit;
        False when it is larger than the whole limit (not kept).

        Raises:
            OSError: The cache cannot be written.
        """
        return self.put_many([(name, data)]) == 1

    def put_many(self, entries: Sequence[tuple[str, bytes | memoryview]], *, detach: bool = False) -> int:
        """Keep each ``(name, data)`` of ``entries`` in one write transaction (see `put`): one
        turn of the node's write lock for all of them. Returns how many were kept. ``detach``:
        let go of the GIL while storing (a thread no event loop waits on; otherwise only for a
        megabyte or more).

        Raises:
            OSError: The cache cannot be written.
        """
        return self._environment().put_many([(_key(name), data) for name, data in entries], self.max_bytes, detach)

    @property
    def size(self) -> int:
        """Bytes charged to the entries held now, for all processes."""
        return self._environment().size()

    def __len__(self) -> int:
        return len(self._environment())

    def close(self) -> None:
        """Let go of this process's handle (the entries stay)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self._process == os.getpid():
            close_environment(self.folder)
