"""How one worker fetches the items of one batch: one after another as torch does, or every item
of the batch in flight at once (ConcurrentDataloader's idea) when the items spend their time
waiting (a remote read, a network call) rather than computing.

Each worker decides for itself, from what its own batches show:

- an item that draws from the global random generators (torch's, ``random``'s, NumPy's) keeps
  the worker fetching one item after another, so the draws come in torch's order and the batches
  are bit for bit torch's, random augmentation included;
- an item or a batch whose wall time is mostly waiting (wall minus the fetching thread's CPU
  time, more than half of the wall time and more than `WAITING_ITEM_SECONDS` an item) switches
  the worker to fetching concurrently, with a pool of threads sized by the batch (or by
  ``items_in_flight``);
- anything else (cheap items, pure-Python or GIL-holding work) stays one after another: a thread
  per item would only add overhead there.

A worker watches its first `BATCHES_TO_WATCH` batches (two clock reads and a snapshot of the three
generators each, about 20 us a batch); it decides on the first item when that item already waits.
Once concurrent, it keeps checking the generators after each batch, and goes back to one after
another for good if they were drawn from.
"""

from __future__ import annotations

import operator
import os
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

try:
    import resource
except ImportError:  # Windows
    resource = None  # type: ignore[assignment]

from .._bounded import shown_logger
from .._daemon_pool import DaemonThreadPool
from ._randomness import GeneratorStates

__all__ = ["WAITING_ITEM_SECONDS", "BatchFetcher", "fetch_items"]

WAITING_ITEM_SECONDS = 200e-6
"""Mean wait an item above which a batch's items are worth fetching concurrently: a thread hand-off
costs about 25 us, so below this the pool would eat what it saves."""

BATCHES_TO_WATCH = 8
"""Batches a worker fetches one after another while watching whether they wait or draw random
numbers; after that it fetches without watching (no overhead on cheap items)."""

MAX_ITEMS_IN_FLIGHT = 256
"""Threads one worker's pool may hold when the batch sizes it (a batch of 4096 is not 4096 threads)."""

_log = shown_logger("stoker.torch")


def fetch_items(dataset: Any, indices: Sequence[Any]) -> list[Any]:
    """``[dataset[index] for index in indices]``, and an error names the item that raised it."""
    remaining = iter(indices)
    try:
        # The comprehension itself, as torch writes it: Python 3.11 runs a Python class's
        # __getitem__ in it without a call's overhead. What is left of the iterator tells, on
        # failure, which position raised.
        return [dataset[index] for index in remaining]
    except Exception as error:
        left = operator.length_hint(remaining, -1)
        if left >= 0:
            _name_the_item(error, indices[len(indices) - left - 1])
        raise


def _fetch_one(dataset: Any, index: Any) -> Any:
    try:
        return dataset[index]
    except Exception as error:
        _name_the_item(error, index)
        raise


def _name_the_item(error: BaseException, index: Any) -> None:
    if hasattr(error, "add_note"):  # Python 3.11+: the traceback then names the item
        error.add_note(f"(raised by dataset[{index!r}] in stoker.torch.DataLoader)")


class BatchFetcher:
    """One worker's way of fetching a batch (see the module notes).

    Args:
        items_in_flight: None decides from the batches (up to the batch's size at once); 1
            fetches one item after another always, as torch; N > 1 keeps up to N items of a batch
            in flight always, even when ``__getitem__`` draws random numbers (the draws then come
            in whatever order the threads run).
    """

    def __init__(self, items_in_flight: int | None = None) -> None:
        self.items_in_flight = items_in_flight
        self.concurrent = bool(items_in_flight and items_in_flight > 1)
        self.draws_random_numbers: bool | None = None
        self._batches_left_to_watch = BATCHES_TO_WATCH if items_in_flight is None else 0
        self._pool: DaemonThreadPool | None = None
        self._pool_size = 0
        self._pid = os.getpid()

    def fetch(self, dataset: Any, indices: Sequence[Any]) -> list[Any]:
        """The items of ``indices``, in order.

        Raises:
            Exception: The first failing item's own exception (by position), naming the item.
        """
        if self.items_in_flight is not None:  # the user's choice, kept whatever the items do
            return self._fetch_concurrently(dataset, indices) if self.concurrent else fetch_items(dataset, indices)
        if self.draws_random_numbers or len(indices) < 2 or not (self.concurrent or self._batches_left_to_watch):
            return fetch_items(dataset, indices)
        states = GeneratorStates.take()
        items = self._fetch_concurrently(dataset, indices) if self.concurrent else self._fetch_watching(dataset, indices, states)
        if not states.unchanged():
            # From now on one after another, in torch's order. (A batch fetched concurrently
            # before this was seen drew in its threads' order: it is said in the log.)
            if self.concurrent:
                _log.warning("pid %d: __getitem__ drew random numbers while a batch's items were fetched at once", os.getpid())
            self.draws_random_numbers, self.concurrent = True, False
        return items

    def _fetch_watching(self, dataset: Any, indices: Sequence[Any], states: GeneratorStates) -> list[Any]:
        """Fetch one after another and learn whether this worker should go concurrent: at once if
        the first item waited without drawing random numbers, or if the whole batch waited."""
        self._batches_left_to_watch -= 1
        clocks = _Clocks.read()
        items = fetch_items(dataset, indices[:1])
        if clocks.mostly_waiting(1) and states.unchanged():
            self.concurrent = True
            _log.debug("pid %d: items wait; fetching a batch's items at once", os.getpid())
            return items + self._fetch_concurrently(dataset, indices[1:])
        items += fetch_items(dataset, indices[1:])
        self.concurrent = clocks.mostly_waiting(len(indices))
        return items

    def _fetch_concurrently(self, dataset: Any, indices: Sequence[Any]) -> list[Any]:
        pool = self._pool_for(self.items_in_flight or min(len(indices), MAX_ITEMS_IN_FLIGHT))
        futures = [pool.submit(_fetch_one, dataset, index) for index in indices]
        return [future.result() for future in futures]

    def _pool_for(self, size: int) -> DaemonThreadPool:
        # A pool made before a fork has no threads in the child: make a new one there. Daemon
        # threads: an item stuck in __getitem__ must not keep the program from exiting.
        if self._pool is None or self._pid != os.getpid() or size > self._pool_size:
            self.close()
            self._pool = DaemonThreadPool(size, thread_name_prefix="stoker-torch-item")
            self._pool_size, self._pid = size, os.getpid()
        return self._pool

    def close(self) -> None:
        """Let the pool's threads go (they are idle between batches)."""
        if self._pool is not None and self._pid == os.getpid():
            self._pool.shutdown(wait=False, cancel_futures=True)
        self._pool = None


class _Clocks(NamedTuple):
    """This thread's wall time, CPU time and voluntary context switches at one moment."""

    wall: float
    cpu: float
    blocked: int

    @classmethod
    def read(cls) -> _Clocks:
        return cls(time.perf_counter(), time.thread_time(), _voluntary_switches())

    def mostly_waiting(self, items: int) -> bool:
        """Whether, since this reading, the thread waited more than it computed, more than
        `WAITING_ITEM_SECONDS` an item, and blocked itself for it (at least once every few
        items): a thread the scheduler merely preempted (more busy workers than cores) does
        not count as waiting."""
        now = _Clocks.read()
        wall, waited = now.wall - self.wall, (now.wall - self.wall) - (now.cpu - self.cpu)
        blocked = now.blocked - self.blocked
        return waited > wall / 2 and waited > WAITING_ITEM_SECONDS * items and (_RUSAGE_THREAD is None or blocked >= max(1, items // 4))


def _voluntary_switches() -> int:
    """Times this thread has given up the CPU to wait (Linux; elsewhere 0 and only the clocks decide)."""
    if _RUSAGE_THREAD is None:
        return 0
    return resource.getrusage(_RUSAGE_THREAD).ru_nvcsw


_RUSAGE_THREAD: int | None = getattr(resource, "RUSAGE_THREAD", None) if resource is not None else None
