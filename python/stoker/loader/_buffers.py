"""Batch memory allocated once and reused: a ring of arrays, each handed out again only when
nothing outside the pool refers to it any more (no view, no Batch, no tensor made from it), so a
buffer is never overwritten while the training loop can still read it."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable

import numpy as np

__all__ = ["BufferPool"]


class BufferPool:
    """Up to ``capacity`` reusable arrays from ``allocate``; beyond that, fresh ones."""

    def __init__(self, allocate: Callable[[], np.ndarray], capacity: int) -> None:
        self._allocate = allocate
        self._capacity = capacity
        self._buffers: list[np.ndarray] = []
        self._lock = threading.Lock()
        self.allocated = 0

    def acquire(self) -> np.ndarray:
        with self._lock:
            for buffer in self._buffers:
                # References: the pool's list, this loop variable, getrefcount's argument.
                if sys.getrefcount(buffer) <= 3:
                    return buffer
            buffer = self._allocate()
            self.allocated += 1
            if len(self._buffers) < self._capacity:
                self._buffers.append(buffer)
            return buffer
