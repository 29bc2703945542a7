"""Worker threads for `stoker.torch.DataLoader(worker_kind="threads")`: torch's worker design
(whole batches assigned round robin, ``prefetch_factor`` batches in flight per worker, errors
carried back to the batch that raised them) with threads in place of processes.

Threads share the dataset instead of copying it into every process, so a large in-memory dataset
costs its own size once, whatever the number of workers (torch's processes grow towards a copy
each as they read it: its issue #13246). They also share the global random generators, so random
augmentation drawn from them is not repeatable run to run here: the loader warns when it sees
such draws (the default worker processes give torch's exact augmentation).

The iterator is a ``torch.utils.data.dataloader._BaseDataLoaderIter``: torch's own bookkeeping
(when the base seed and the indices are drawn, the ``pin_memory`` warnings, ``len()``) with this
module fetching the batches.
"""

from __future__ import annotations

import itertools
import queue
import threading
import warnings
from collections.abc import Callable
from typing import Any

from torch._utils import ExceptionWrapper
from torch.utils.data._utils.pin_memory import pin_memory
from torch.utils.data.dataloader import _BaseDataLoaderIter

from .._daemon_pool import join_at_exit
from ._fetching import BatchFetcher

__all__ = ["ThreadWorkers", "ThreadedIteration"]

# A pass's batches come back on a queue of its own, sent with each task: passes over one set of
# persistent workers never see each other's batches (was: one results queue shared, each pass
# letting go of the other's batches as a dropped pass's, so of two passes at once the second
# waited forever). A dropped pass's queue is collected with the last batch its workers put there.
Results = queue.SimpleQueue[tuple[int, Any]]


class ThreadWorkers:
    """``num_workers`` threads, each running ``worker_init_fn(worker_id)`` once and then fetching and
    collating the batches sent to it, each with a `BatchFetcher` of its own.

    Shared state: ``_tasks`` and each pass's results are `queue.SimpleQueue`s (whole by themselves);
    ``draws_random_numbers`` only ever goes from False to True, written by a worker whose own
    fetcher saw draws (was: every worker stored ``flag or mine`` after each batch, so a worker
    that had read False stored it back over another's True); ``_stopping`` is one flag set once.

    Args:
        dataset: The user's map-style dataset (shared by the threads).
        num_workers: Threads to start.
        fetch: Makes a batch from its indices with a worker's fetcher (fetching and collation).
        worker_init_fn: As torch's, called in each thread with its id.
        items_in_flight: As `BatchFetcher`'s.
    """

    def __init__(
        self,
        num_workers: int,
        make_batch: Callable[[BatchFetcher, Any], Any],
        worker_init_fn: Callable[[int], None] | None,
        items_in_flight: int | None,
    ) -> None:
        self.draws_random_numbers = False
        self._make_batch = make_batch
        self._worker_init_fn = worker_init_fn
        self._items_in_flight = items_in_flight
        self._tasks: list[queue.SimpleQueue[tuple[Results, int, Any] | None]] = [queue.SimpleQueue() for _ in range(num_workers)]
        self._stopping = False
        self.threads = [
            threading.Thread(target=self._work, args=(worker_id,), name=f"stoker-torch-worker-{worker_id}", daemon=True)
            for worker_id in range(num_workers)
        ]
        for thread in self.threads:
            thread.start()
        join_at_exit(self)

    def send(self, worker_id: int, results: Results, batch_number: int, indices: Any) -> None:
        """Have worker ``worker_id`` make batch ``batch_number`` and put it on ``results`` (its
        pass's queue) as ``(batch_number, batch)``."""
        self._tasks[worker_id].put((results, batch_number, indices))

    def stop(self) -> None:
        """Ask every thread to end once its current batch is done (threads are daemons: one stuck
        in the dataset's code cannot keep the program from exiting)."""
        for tasks in self._tasks:
            tasks.put(None)

    def stop_now(self) -> None:
        """Ask every thread to end once its current batch is done, leaving the batches queued (at
        the interpreter's exit: see `stoker._daemon_pool`)."""
        self._stopping = True
        self.stop()

    def _work(self, worker_id: int) -> None:
        fetcher = BatchFetcher(self._items_in_flight)
        where = f"in DataLoader worker thread {worker_id}"
        failed_to_start: ExceptionWrapper | None = None
        # BaseException, not Exception: a KeyboardInterrupt or SystemExit raised by the user's
        # code ends this batch, not the thread, and is carried back to the loop that waits for it
        # (caught only as Exception, the thread died and the loop waited forever).
        try:
            if self._worker_init_fn is not None:
                self._worker_init_fn(worker_id)
        except BaseException:
            failed_to_start = ExceptionWrapper(where=where)
        while (task := self._tasks[worker_id].get()) is not None and not self._stopping:
            results, batch_number, indices = task
            result: Any = failed_to_start  # a worker that did not start fails each batch sent to it
            if failed_to_start is None:
                try:
                    result = self._make_batch(fetcher, indices)
                except BaseException:
                    result = ExceptionWrapper(where=where)
            if fetcher.draws_random_numbers:  # only ever set: a stale False is never stored back
                self.draws_random_numbers = True
            results.put((batch_number, result))
            del result, task, indices, results
        fetcher.close()


class ThreadedIteration(_BaseDataLoaderIter):
    """One pass over a map-style dataset with `ThreadWorkers` (see the module notes).

    Owned by the thread that iterates it (as torch's iterators are): its counters and the
    batches that arrived out of order are touched by that thread only.

    Args:
        loader: torch's DataLoader holding the settings (its dataset is never read here).
        workers: The threads (kept across passes with ``persistent_workers``).
        stop_workers_at_end: Stop the threads when this pass ends or is dropped.
        owner: Held while this pass lives: the stoker DataLoader, whose collection stops its
            persistent workers (not under a pass that still uses them).
    """

    def __init__(self, loader: Any, workers: ThreadWorkers, stop_workers_at_end: bool, owner: Any = None) -> None:
        super().__init__(loader)
        self._owner = owner
        self._workers = workers
        self._stop_workers_at_end = stop_workers_at_end
        self._results: Results = queue.SimpleQueue()
        self._in_order = loader.in_order
        self._worker_cycle = itertools.cycle(range(loader.num_workers))
        self._sent = 0
        self._delivered = 0
        self._next_number = 0  # in order: the batch to deliver next
        self._arrived: dict[int, Any] = {}
        self._warned = False
        for _ in range(loader.prefetch_factor * loader.num_workers):
            self._send_next()

    def _send_next(self) -> None:
        try:
            indices = self._next_index()
        except StopIteration:
            return
        self._workers.send(next(self._worker_cycle), self._results, self._sent, indices)
        self._sent += 1

    def _next_data(self) -> Any:
        if self._delivered == self._sent:
            self._end()
            raise StopIteration
        result = self._take()
        self._delivered += 1
        self._send_next()  # as torch: the next batch is asked for as one is delivered
        if self._workers.draws_random_numbers and not self._warned:
            self._warned = True
            warnings.warn(
                "the dataset's __getitem__ draws from the global random generators (torch, random or numpy), which "
                "worker threads share: its augmentation is not repeatable run to run with worker_kind='threads'. "
                "Worker processes (the default) give torch's exact augmentation.",
                stacklevel=3,
            )
        if isinstance(result, ExceptionWrapper):
            result.reraise()
        return pin_memory(result, self._pin_memory_device) if self._pin_memory else result

    def _take(self) -> Any:
        """The next batch: in sampler order, or with ``in_order=False`` whichever is ready first."""
        while True:
            if self._in_order and self._next_number in self._arrived:
                self._next_number += 1
                return self._arrived.pop(self._next_number - 1)
            if not self._in_order and self._arrived:
                return self._arrived.pop(min(self._arrived))
            try:
                number, result = self._results.get(timeout=self._timeout or None)
            except queue.Empty:
                raise RuntimeError(f"DataLoader timed out after {self._timeout} seconds") from None
            self._arrived[number] = result

    def _end(self) -> None:
        if self._stop_workers_at_end:
            self._workers.stop()
            self._stop_workers_at_end = False

    def __del__(self) -> None:
        self._end()
