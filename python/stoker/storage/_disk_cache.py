"""A local cache of fetched samples with a byte limit, evicting the least recently used.

For remote storage read for many epochs: the second epoch reads from local disk (or from
``/dev/shm``) instead of the network. Entries are files named by a hash of the sample's name;
each is written to a private temporary file and renamed into place, so a reader in this process
or another never sees a partial entry, and two writers of the same entry leave one whole copy.
The byte limit is kept by this process for the entries it knows (found at open, oldest
modification first, or written or read since; a read touches the file); other processes sharing
the folder keep their own count.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from pathlib import Path

__all__ = ["SampleCache"]


class SampleCache:
    """Samples on local disk, at most ``max_bytes`` of them.

    Args:
        folder: Where the entries live (created).
        max_bytes: The byte limit; the least recently used entries go first.

    Raises:
        ValueError: A limit that is not positive.
    """

    def __init__(self, folder: str | os.PathLike[str], max_bytes: int) -> None:
        if max_bytes <= 0:
            raise ValueError(f"max_bytes must be positive, got {max_bytes}")
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.max_bytes = max_bytes
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()
        self._sizes: OrderedDict[str, int] = OrderedDict()  # entry file name -> bytes, oldest first
        self._total = 0
        entries = []
        for path in self.folder.glob("*/*"):
            if not path.name.startswith("."):
                stat = path.stat()
                entries.append((stat.st_mtime, path.parent.name + "/" + path.name, stat.st_size))
        for _, name, size in sorted(entries):
            self._sizes[name] = size
            self._total += size
        self._evict()

    @property
    def size(self) -> int:
        """Bytes held (as this process counts them)."""
        return self._total

    @staticmethod
    def _entry(name: str) -> str:
        digest = hashlib.blake2b(name.encode(), digest_size=16).hexdigest()
        return f"{digest[:2]}/{digest[2:]}"

    def get(self, name: str) -> bytes | None:
        """The cached bytes of ``name``, or None."""
        entry = self._entry(name)
        path = self.folder / entry
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            with self._lock:
                self.misses += 1
                if entry in self._sizes:  # evicted by another process
                    self._total -= self._sizes.pop(entry)
            return None
        try:
            os.utime(path)  # recency survives a reopen, and is seen by other processes
        except FileNotFoundError:
            pass  # evicted just now; the bytes read are whole all the same
        with self._lock:
            self.hits += 1
            if entry in self._sizes:
                self._sizes.move_to_end(entry)
            else:
                self._sizes[entry] = len(data)
                self._total += len(data)
        return data

    def put(self, name: str, data: bytes | memoryview) -> None:
        """Keep ``data`` as ``name`` (larger than the whole limit: not kept)."""
        if len(data) > self.max_bytes:
            return
        entry = self._entry(name)
        target = self.folder / entry
        target.parent.mkdir(exist_ok=True)
        temporary = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}")
        temporary.write_bytes(data)
        os.replace(temporary, target)
        with self._lock:
            self._total += len(data) - self._sizes.pop(entry, 0)
            self._sizes[entry] = len(data)
            self._evict()

    def _evict(self) -> None:
        while self._total > self.max_bytes and self._sizes:
            entry, size = self._sizes.popitem(last=False)
            self._total -= size
            try:
                (self.folder / entry).unlink()
            except FileNotFoundError:
                pass
