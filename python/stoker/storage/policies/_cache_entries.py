"""The node cache's entries: bytes by name in one LMDB environment, under one byte limit, oldest
stored out first, shared by every process that opens the folder.

LMDB, not SQLite (`diskcache`, before): a cold epoch through the node cache stores every sample
it reads, and storing was what made that epoch slower than reading with no cache at all.
Measured on 20 KB samples: 13 us of CPU a store in LMDB, 130-140 us through diskcache (its
Python, SQL and triggers), whose ranks also queued on SQLite's one write lock, whose busy
handler sleeps whole milliseconds. A read is a few microseconds either way.

Three tables: ``entries`` (name -> bytes), ``stamps`` (name -> the order it was stored in) and
``order`` (that order -> name), so eviction takes the oldest entry without a scan; a ``totals``
table holds the bytes charged and the next stamp. Every store is one write transaction: a reader
in any process sees an entry whole or not at all, and a process killed mid-write leaves the
cache as its last committed transaction left it (LMDB's write lock is a robust mutex: the next
writer takes it over). Commits are not flushed to disk: a cache that loses its last entries in
a power cut fetches them again, and one written before the machine last started is not trusted
(see `open_environment`).

An entry is charged the pages it takes (LMDB keeps a large value in whole pages) plus its name
and bookkeeping, so the limit bounds what the cache holds on disk; the file itself can grow a
little beyond it where freed pages are not contiguous, and never beyond the memory map (twice the
limit and a gigabyte), at which point more of the oldest entries go.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...errors import StorageError
from ._cache_environment import close_environment, open_environment

__all__ = ["CacheEntries"]

_STAMP = 8  # bytes of a stamp: big-endian, so the order table sorts oldest first
_BOOKKEEPING = 96  # bytes charged per entry besides its value and name: node headers, its stamp rows
_LONGEST_KEY = 400  # bytes of a name kept as it is; LMDB's keys end at 511


def _key(name: str) -> bytes:
    """``name`` as an LMDB key: a longer one (a URL and a byte range) by its digest."""
    encoded = name.encode()
    return encoded if len(encoded) <= _LONGEST_KEY else b"#" + hashlib.blake2b(encoded, digest_size=32).hexdigest().encode()


def _stamp(number: int) -> bytes:
    return number.to_bytes(_STAMP, "big")


class CacheEntries:
    """Entries of the cache at ``folder``.

    Args:
        folder: The LMDB environment's folder (created).
        max_bytes: The byte limit (positive).

    Raises:
        StorageError: ``lmdb`` is not installed (it comes with the ``s3`` extra), or the folder
            cannot hold an LMDB environment.
    """

    def __init__(self, folder: Path, max_bytes: int) -> None:
        try:
            import lmdb
        except ImportError as error:
            raise StorageError("a local sample cache needs lmdb: pip install 'stoker[s3]' (or lmdb)") from error
        self._lmdb = lmdb
        self.folder = folder
        self.max_bytes = max_bytes
        folder.mkdir(parents=True, exist_ok=True)
        self._map_bytes = 2 * max_bytes + (1 << 30)
        self._lock = threading.Lock()
        self._closed = False
        self._open()

    def _open(self) -> None:
        self._process = os.getpid()
        self._env: Any = open_environment(self._lmdb, self.folder, self._map_bytes)
        self._entries = self._env.open_db(b"entries")
        self._stamps = self._env.open_db(b"stamps")
        self._order = self._env.open_db(b"order")
        self._totals = self._env.open_db(b"totals")
        self._page = int(self._env.stat()["psize"])

    def _environment(self) -> Any:
        """The environment, opened again in a forked child: LMDB's handles are one process's."""
        if self._process != os.getpid():
            with self._lock:
                if self._process != os.getpid():
                    self._open()
        return self._env

    def cost(self, name: bytes, length: int) -> int:
        """Bytes an entry is charged: its value in whole pages when LMDB keeps it on pages of its
        own (over half a page), else as is; its name; its bookkeeping."""
        value = -(-(length + 16) // self._page) * self._page if length > self._page // 2 else length
        return value + len(name) + _BOOKKEEPING

    def get_many(self, names: Sequence[str]) -> list[bytes | None]:
        """The bytes of each of ``names`` (None where missing), read in one transaction: a loop
        turn's lookups pay for one transaction, not one each.

        Raises:
            lmdb.Error: The cache cannot be read.
        """
        with self._environment().begin(db=self._entries) as transaction:
            return [transaction.get(_key(name)) for name in names]

    def put(self, name: str, data: bytes | memoryview) -> bool:
        """Keep ``data`` as ``name``, evicting the oldest entries to stay within the limit;
        False when it is larger than the whole limit (not kept).

        Raises:
            lmdb.Error: The cache cannot be written.
        """
        return self.put_many([(name, data)]) == 1

    def put_many(self, entries: Sequence[tuple[str, bytes | memoryview]]) -> int:
        """Keep each ``(name, data)`` of ``entries`` in one write transaction (see `put`): one
        turn of the node's write lock for all of them. Returns how many were kept.

        Raises:
            lmdb.Error: The cache cannot be written.
        """
        encoded = [(_key(name), data) for name, data in entries]
        sized = [(key, data, charged) for key, data in encoded if (charged := self.cost(key, len(data))) <= self.max_bytes]
        if not sized:
            return 0
        environment = self._environment()
        for room in (0, self.max_bytes // 8):
            try:
                with environment.begin(write=True, buffers=True) as transaction:
                    total, next_stamp = self._read_totals(transaction)
                    for key, data, charged in sized:
                        total = self._store(transaction, key, data, charged, room, total, next_stamp)
                        next_stamp += 1
                    transaction.put(b"bytes", _stamp(total), db=self._totals)
                    transaction.put(b"next", _stamp(next_stamp), db=self._totals)
                return len(sized)
            except self._lmdb.MapFullError:  # freed pages too scattered for these values: free more
                continue
        return 0

    def _store(self, transaction: Any, key: bytes, data: bytes | memoryview, charged: int, room: int, total: int, stamp_number: int) -> int:
        """In a write transaction whose entries are charged ``total`` bytes: drop ``key``'s old
        entry, evict until ``charged`` (and ``room`` more) fits, store it with stamp
        ``stamp_number``. Returns the bytes charged after."""
        old = transaction.get(key, db=self._stamps)
        if old is not None:
            total -= self._drop(transaction, key, bytes(old))
        if total + charged + room > self.max_bytes:
            cursor = transaction.cursor(db=self._order)
            while total + charged + room > self.max_bytes and cursor.first():
                victim = bytes(cursor.value())
                total -= self._drop(transaction, victim, bytes(cursor.key()))
        stamp = _stamp(stamp_number)
        transaction.put(key, data, db=self._entries)
        transaction.put(key, stamp, db=self._stamps)
        transaction.put(stamp, key, db=self._order)
        return total + charged

    def _drop(self, transaction: Any, key: bytes, stamp: bytes) -> int:
        """Remove the entry ``key`` (stored with ``stamp``); the bytes it was charged."""
        value = transaction.get(key, db=self._entries)
        charged = self.cost(key, len(value)) if value is not None else 0
        transaction.delete(key, db=self._entries)
        transaction.delete(key, db=self._stamps)
        transaction.delete(stamp, db=self._order)
        return charged

    def _read_totals(self, transaction: Any) -> tuple[int, int]:
        total = transaction.get(b"bytes", db=self._totals)
        next_stamp = transaction.get(b"next", db=self._totals)
        return (
            int.from_bytes(total, "big") if total is not None else 0,
            int.from_bytes(next_stamp, "big") if next_stamp is not None else 0,
        )

    @property
    def size(self) -> int:
        """Bytes charged to the entries held now, for all processes."""
        with self._environment().begin(buffers=True) as transaction:
            return self._read_totals(transaction)[0]

    def __len__(self) -> int:
        with self._environment().begin() as transaction:
            return int(transaction.stat(self._entries)["entries"])

    def close(self) -> None:
        """Let go of this process's handle (the entries stay)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self._process == os.getpid():
            close_environment(self.folder)
