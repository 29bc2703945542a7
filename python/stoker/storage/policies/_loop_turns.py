"""Work that an event loop's requests hand in during one turn of the loop, done together once
that turn's callbacks have run: the node cache's lookups (one read transaction for them all;
its stores go to a writer thread instead, `CacheWriter`).

Kept per loop: a process reads one storage from several loops (the storage's own, which runs
the next epoch's early requests, and each pipeline's), and a batch must be done on the loop
whose requests wait for it. Done on another loop's thread, its futures would be completed from
the wrong thread (the waiting loop is not woken); and a batch scheduled on a loop that stops
before running it (a pipeline ending its epoch) must not hold up the other loops' batches.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["LoopTurns", "complete"]

Item = TypeVar("Item")


class LoopTurns(Generic[Item]):
    """Items gathered per event loop and handed to ``handle(loop, items)`` once the loop's turn
    in which the first of them came has run its callbacks.

    A loop closed with a batch not yet done (stopped before its turn came) hands it to ``handle``
    when the next batch of any loop begins, or at `run_all`: ``handle`` sees ``loop.is_closed()``
    and does what needs no loop (nobody waits for a lookup any more).

    Args:
        handle: Does one loop's batch, on that loop's thread (or the caller's of `run_now` or
            `run_all`).
    """

    def __init__(self, handle: Callable[[asyncio.AbstractEventLoop, list[Item]], None]) -> None:
        self._handle = handle
        self._lock = threading.Lock()
        # Weak: a batch left by a closed loop must not keep the loop alive.
        self._pending: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, list[Item]] = weakref.WeakKeyDictionary()

    def add(self, item: Item) -> None:
        """Hand in ``item`` from a request running on an event loop."""
        loop = asyncio.get_running_loop()
        stale: list[tuple[asyncio.AbstractEventLoop, list[Item]]] = []
        with self._lock:
            pending = self._pending.get(loop)
            if pending is None:
                stale = [(other, self._pending.pop(other)) for other in list(self._pending) if other.is_closed()]
                pending = self._pending[loop] = []
                loop.call_soon(self.run_now, loop)
            pending.append(item)
        for other, items in stale:
            self._handle(other, items)

    def run_now(self, loop: asyncio.AbstractEventLoop) -> None:
        """Do ``loop``'s batch now, if it has one (its scheduled turn then finds nothing)."""
        with self._lock:
            items = self._pending.pop(loop, None)
        if items:
            self._handle(loop, items)

    def run_all(self) -> None:
        """Do every loop's batch now (closing: from any thread)."""
        with self._lock:
            batches = list(self._pending.items())
            self._pending.clear()
        for loop, items in batches:
            self._handle(loop, items)


def complete(future: asyncio.Future[Item], value: Item) -> None:
    """Set ``future``'s result from any thread: directly on its loop's own thread, else through
    the loop (woken); nothing if it is done already or its loop has closed."""
    loop = future.get_loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        if not future.done():
            future.set_result(value)
        return
    with contextlib.suppress(RuntimeError):  # its loop has closed: nobody waits any more
        loop.call_soon_threadsafe(_set_if_pending, future, value)


def _set_if_pending(future: asyncio.Future[Item], value: Item) -> None:
    if not future.done():
        future.set_result(value)
