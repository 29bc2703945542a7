"""Batch memory allocated once and reused, by explicit leases.

Each batch gets its array through a lease: a small owner object that every array, view, tensor
or DLPack capsule made from the batch array keeps alive (NumPy, torch and JAX all hold on to the
object whose memory they share). The buffer goes back to the pool when that owner is collected,
so a buffer is never handed out again while anything made from it can still be read, without
relying on reference counts, which are a CPython detail (and differ under free-threading).
A `Batch` drops its own reference when released (`Batch.release`, ``with batch:``) or collected.
"""

from __future__ import annotations

import sys
import threading
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["BufferPool", "pinned_allocator"]


class _LeaseOwner:
    """Exposes a pooled buffer's memory to NumPy as its own (``__array_interface__``), so the
    arrays made from it all refer to this object, and its collection means none is left."""

    __slots__ = ("__array_interface__", "__weakref__", "buffer", "finalizer", "pool")

    def __init__(self, pool: BufferPool, buffer: np.ndarray, interface: dict[str, Any] | None) -> None:
        self.pool = pool
        self.buffer = buffer  # keeps the memory alive as long as anything reads it
        self.__array_interface__ = buffer.__array_interface__ if interface is None else interface
        # Returns the buffer to the pool when this owner is collected; detached by `hand_over`.
        self.finalizer = weakref.finalize(self, pool._give_back, buffer)


class BufferPool:
    """Up to ``capacity`` reusable arrays from ``allocate``, leased one batch at a time.

    `acquire` returns a fresh array over a free buffer (or a new one when none is free); the
    buffer is free again once that array and everything made from it are gone. Beyond
    ``capacity`` (which may be changed at any time), returned buffers are dropped rather than kept.
    """

    def __init__(self, allocate: Callable[[], np.ndarray], capacity: int) -> None:
        self._allocate = allocate
        self.capacity = capacity  # one attribute: the tuner's thread may set it, any thread read it
        # Leases are taken by every decode thread and returned from whichever thread drops the
        # last array of a batch (the garbage collector's finalizer). `_lock` guards `_free` and
        # `allocated`. It is reentrant: a collection may run a return inside `acquire` or another
        # return on the same thread, which then goes on through the lock it already holds; the
        # allocation itself runs outside it.
        self._lock = threading.RLock()
        self._free: deque[np.ndarray] = deque()
        self.allocated = 0

    def acquire(self) -> np.ndarray:
        """An array over a buffer nothing else can read now; its buffer returns when it dies."""
        with self._lock:
            buffer = self._free.pop() if self._free else None
            if buffer is None:
                self.allocated += 1
        if buffer is None:
            buffer = self._allocate()
        return self._lease(buffer, None)

    def _lease(self, buffer: np.ndarray, interface: dict[str, Any] | None) -> np.ndarray:
        return np.asarray(_LeaseOwner(self, buffer, interface))

    @staticmethod
    def hand_over(array: Any) -> Any:
        """``array`` again, as a new array over the same memory whose lease this thread made;
        anything that is not a leased array is returned as it is.

        Called by the thread that hands a batch to the training loop, once the threads that
        made the batch are done with it. Free-threaded CPython frees an object dropped by a
        thread other than the one that made it only when its maker next runs Python code
        (biased reference counting), so a lease made by a busy or idle decode thread would come
        back late and the pool would allocate a buffer it already has. A lease made by the
        consumer comes back the moment the consumer drops the last array of the batch.
        The arrays made by the earlier lease must not be read after this (the pipeline keeps
        none): the buffer goes back when the new lease dies, whatever became of the old one.
        """
        owner = getattr(array, "base", None)
        while isinstance(owner, np.ndarray):  # a view's base is the leased array, whose base is the owner
            owner = owner.base
        if not isinstance(owner, _LeaseOwner) or owner.finalizer.detach() is None:
            return array  # not leased, or handed over already (its old lease returns nothing now)
        return owner.pool._lease(owner.buffer, array.__array_interface__)

    def _give_back(self, buffer: np.ndarray) -> None:
        with self._lock:  # the room checked and taken in one turn: never more than `capacity` kept
            if len(self._free) < self.capacity:
                self._free.append(buffer)

    @property
    def free(self) -> int:
        """Buffers ready to be leased again."""
        with self._lock:
            return len(self._free)


def pinned_allocator(shape: tuple[int, ...], dtype: str) -> Callable[[], Any]:
    """A function allocating page-locked host arrays (numpy views of pinned torch tensors) when
    CUDA is there, plain numpy arrays otherwise. Torch is only used if the program already
    imported it: importing it here would cost a training-free loader a second and a gigabyte."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch_dtype = {"uint8": torch.uint8, "int16": torch.int16, "float32": torch.float32, "float16": torch.float16}[dtype]
        return lambda: torch.empty(shape, dtype=torch_dtype, pin_memory=True).numpy()
    return lambda: np.zeros(shape, dtype=dtype)
