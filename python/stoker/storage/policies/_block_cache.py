"""Blocks read once and shared by the samples in them, for storages read by threads: Parquet row
groups, the blocks of local tar shards.

A block is read by the first thread that asks for it (others asking at the same time wait for
that read instead of reading again) and kept, least recently used first out past ``capacity``
bytes. Told how many samples a block holds, the cache also lets it go once each has been served
(the block shuffle reads a block's samples within a short stretch of the epoch, and not again
until the next), so memory holds the blocks in use, not the last ``capacity`` bytes read.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

__all__ = ["BlockCache"]


class BlockCache:
    """Loaded blocks by key, at most ``capacity`` bytes (as ``size_of`` counts them).

    Args:
        capacity: Bytes kept at most (the last block loaded is kept even if larger).
        size_of: A block's size in bytes (default ``len``).
    """

    def __init__(self, capacity: int, size_of: Callable[[Any], int] = len) -> None:
        self.capacity = capacity
        self._size_of = size_of
        self._blocks: OrderedDict[Hashable, Any] = OrderedDict()
        self._unserved: dict[Hashable, int] = {}
        self._size = 0
        self._lock = threading.Lock()
        self._loading: dict[Hashable, threading.Lock] = {}
        self.reads = 0

    @property
    def bytes_held(self) -> int:
        """Bytes of blocks held now."""
        return self._size

    def get(self, key: Hashable, load: Callable[[], Any], samples: int | None = None) -> Any:
        """Block ``key``, from memory or ``load()`` (once, however many threads ask at once).

        Args:
            key: The block.
            load: Reads it (its errors propagate; the next call loads again).
            samples: How many samples it holds, to let it go once each is `served`; None: kept
                until evicted.
        """
        with self._lock:
            if key in self._blocks:
                self._blocks.move_to_end(key)
                return self._blocks[key]
            gate = self._loading.setdefault(key, threading.Lock())
        with gate:
            with self._lock:
                if key in self._blocks:
                    return self._blocks[key]
            try:
                block = load()
            except BaseException:
                with self._lock:
                    self._loading.pop(key, None)
                raise
            with self._lock:
                self._loading.pop(key, None)
                self._keep(key, block, samples)
            return block

    def lookup(self, key: Hashable) -> Any | None:
        """Block ``key`` if held (it becomes the most recently used), else None."""
        with self._lock:
            block = self._blocks.get(key)
            if block is not None:
                self._blocks.move_to_end(key)
            return block

    def contains(self, key: Hashable) -> bool:
        """Whether block ``key`` is held (its place in the eviction order unchanged)."""
        with self._lock:
            return key in self._blocks

    def put(self, key: Hashable, block: Any, samples: int | None = None) -> None:
        """Keep ``block`` as ``key``, loaded elsewhere (an async fetch); ``samples`` as in `get`."""
        with self._lock:
            self._keep(key, block, samples)

    def _keep(self, key: Hashable, block: Any, samples: int | None) -> None:
        """Store a loaded block and evict past the capacity (the lock held)."""
        self.reads += 1
        self._blocks[key] = block
        if samples is not None:
            self._unserved[key] = samples
        self._size += self._size_of(block)
        while self._size > self.capacity and len(self._blocks) > 1:
            evicted_key, evicted = self._blocks.popitem(last=False)
            self._unserved.pop(evicted_key, None)
            self._size -= self._size_of(evicted)

    def served(self, key: Hashable, count: int = 1) -> None:
        """``count`` samples of block ``key`` were served; once all have been, it is let go."""
        with self._lock:
            left = self._unserved.get(key)
            if left is None:
                return
            if left > count:
                self._unserved[key] = left - count
                return
            del self._unserved[key]
            block = self._blocks.pop(key, None)
            if block is not None:
                self._size -= self._size_of(block)
