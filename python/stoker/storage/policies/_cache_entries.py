"""The node cache's entries: bytes by name in one store, under one byte limit, oldest stored out
first, shared by every process that opens the folder.

Stored natively (`stoker._native.CacheEntries`, src/core/storage/cache_entries.rs) in files read
with explicit, bounds-checked I/O, every entry checked whole (its CRC-32) before use: a damaged
file is a miss or a store made anew, never a crash. LMDB held them before, and trusted its file: 1
MB of random bytes in ``data.mdb`` killed the reading rank with SIGSEGV in 2 of 8 trials (every
rank of the node that opened it). SQLite (`diskcache`) before that: a cold epoch through the node
cache stores every sample it reads, and its stores (130-140 us of CPU for 20 KB, its ranks queued
on one write lock) made that epoch slower than reading with no cache at all.

Native, not Python: the calls keep the GIL for a turn's entries (letting go of it around every
call, as py-lmdb did, cost the event loop's thread a busy Python thread's switch interval, 5 ms,
each time: 32 puts of 20 KB took 153 ms beside a busy thread against 0.2 ms quiet). Stores are not
flushed to disk: a cache that loses its last entries in a power cut fetches them again, and one
written before the machine last started is emptied (see `open_environment`). The folder is the
one `stoker._bounded.private_folder` checked, opened by descriptor: no file of it is reached
through a link.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Sequence

from ... import _native
from ..._bounded import ManagedFolder
from ._cache_environment import close_environment, open_environment, report

__all__ = ["CacheEntries"]

_LONGEST_KEY = 400  # bytes of a name kept as it is (the store takes up to 1,024)


def _key(name: str) -> bytes:
    """``name`` as a key of the store: a longer one (a URL and a byte range) by its digest."""
    encoded = name.encode()
    return encoded if len(encoded) <= _LONGEST_KEY else b"#" + hashlib.blake2b(encoded, digest_size=32).hexdigest().encode()


class CacheEntries:
    """Entries of the cache at ``folder``.

    Args:
        folder: The entries' folder (open, checked: `stoker._bounded.ManagedFolder`).
        max_bytes: The byte limit (positive).

    Raises:
        StorageError: The folder cannot hold the entries.
    """

    def __init__(self, folder: ManagedFolder, max_bytes: int) -> None:
        self.folder = folder
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._closed = False
        self._open()

    def _open(self) -> None:
        self._process = os.getpid()
        self._env = open_environment(self.folder)

    def _environment(self) -> _native.CacheEntries:
        """The native handle, opened again in a forked child (its writer lock is one process's)."""
        if self._process != os.getpid():
            with self._lock:
                if self._process != os.getpid():
                    self._open()
        return self._env

    def get_many(self, names: Sequence[str]) -> list[bytes | None]:
        """The bytes of each of ``names`` (None where missing, or failing its checks), in one
        native call, one read of the store's state: a loop turn's lookups pay for one, not one each.

        Raises:
            OSError: The cache cannot be read.
        """
        environment = self._environment()
        found = environment.get_many([_key(name) for name in names])
        if None in found:  # a miss may be an entry that failed its checks: said once, here
            report(self.folder, environment)
        return found

    def put(self, name: str, data: bytes | memoryview) -> bool:
        """Keep ``data`` as ``name``, evicting the oldest entries to stay within the limit;
        False when it is larger than the whole limit (not kept).

        Raises:
            OSError: The cache cannot be written.
        """
        return self.put_many([(name, data)]) == 1

    def put_many(self, entries: Sequence[tuple[str, bytes | memoryview]], *, detach: bool = False) -> int:
        """Keep each ``(name, data)`` of ``entries`` in one store (see `put`): one turn of the
        node's write lock for all of them. Returns how many were kept. ``detach``:
        let go of the GIL while storing (a thread no event loop waits on; otherwise only for a
        megabyte or more).

        Raises:
            OSError: The cache cannot be written.
        """
        environment = self._environment()
        kept = environment.put_many([(_key(name), data) for name, data in entries], self.max_bytes, detach)
        report(self.folder, environment)
        return kept

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
