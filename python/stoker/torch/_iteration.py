"""One pass of `stoker.torch.DataLoader` over a map-style dataset: index batches drawn lazily, with
torch's look-ahead, and each batch's items fetched concurrently.

When indices are drawn matters as much as which: a sampler may draw from the global RNG, and so
may the training loop between batches. So the draws happen where torch makes them, in the calling
thread: the loader's base seed when the iteration starts; then with workers, ``prefetch_factor *
num_workers`` index batches at the start and one more as each batch is returned; without workers,
one batch per ``next()``. An infinite sampler therefore works, and batches equal torch's.
"""

from __future__ import annotations

import multiprocessing
import threading
import warnings
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from multiprocessing.context import BaseContext
from typing import Any, Protocol

import torch

from ._randomness import draws_from_global_rng, item_seed, seed_global_rngs

__all__ = ["IterationSettings", "MapStyleIteration"]


class IterationSettings(Protocol):
    """What one pass reads of its `DataLoader` (typed here so this module never imports it)."""

    dataset: Any
    sampler: Any
    batch_sampler: Any
    auto_collation: bool
    collate_fn: Callable[[Any], Any]
    generator: torch.Generator | None
    num_workers: int
    prefetch_factor: int
    pin_memory: bool
    timeout: float
    worker_init_fn: Callable[[int], None] | None
    multiprocessing: bool
    multiprocessing_context: BaseContext | None
    draws_from_rng: bool | None


def _fetch(dataset: Any, index: Any) -> Any:
    try:
        return dataset[index]
    except Exception as error:
        if hasattr(error, "add_note"):  # Python 3.11+: the traceback then names the item
            error.add_note(f"(raised by dataset[{index!r}] in stoker.torch.DataLoader)")
        raise


class _Nothing:
    """No item fetched yet (None may be an item)."""


_NOTHING: Any = _Nothing()


def _done(value: Any) -> Future[Any]:
    future: Future[Any] = Future()
    future.set_result(value)
    return future


class MapStyleIteration(Iterator[Any]):
    """The iterator `DataLoader.__iter__` returns (see the module notes)."""

    def __init__(self, loader: IterationSettings) -> None:
        self.loader = loader
        self.dataset = loader.dataset
        self._index_iterator = iter(loader.batch_sampler if loader.batch_sampler is not None else loader.sampler)
        # torch draws the shared base seed when the iteration starts, after creating (not yet
        # running) the sampler's iterator: the global RNG or the generator advances as there.
        self.base_seed = int(torch.empty((), dtype=torch.int64).random_(generator=loader.generator).item())
        # Drawn batches: (indices, the future of the collated batch or None to fetch it here,
        # an item already fetched for the first index or _NOTHING).
        self._pending: deque[tuple[list[Any], Future[Any] | None, Any]] = deque()
        self._executor: Executor | None = None
        self._collator: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self.mode = "inline" if loader.num_workers == 0 else ("processes" if loader.multiprocessing else "threads")
        if self.mode == "inline":
            return
        self._start_workers()
        for _ in range(loader.prefetch_factor * loader.num_workers):
            self._put_next()

    # ---- drawing and submitting -----------------------------------------------------------

    def _draw(self) -> list[Any] | None:
        try:
            drawn = next(self._index_iterator)
        except StopIteration:
            return None
        return list(drawn) if self.loader.batch_sampler is not None else [drawn]

    def _put_next(self) -> None:
        indices = self._draw()
        if indices is None:
            return
        if self.mode == "threads" and self.loader.draws_from_rng is None:
            # Before any concurrent fetch: does __getitem__ draw from the global RNGs?
            first, draws = draws_from_global_rng(lambda: _fetch(self.dataset, indices[0]))
            self.loader.draws_from_rng = draws
            if draws:
                warnings.warn(
                    f"{type(self.dataset).__name__}.__getitem__ draws from the global random generator (torch, random or "
                    "numpy): its items are fetched in the calling thread, in order, so augmentation is the same run after "
                    "run (concurrent threads would draw in a different order each time). For parallel random "
                    "augmentation pass multiprocessing=True (each item seeded from the base seed and its index).",
                    stacklevel=4,
                )
                self._pending.append((indices, None, first))
            else:
                self._pending.append((indices, self._submit(indices, first_item=first), _NOTHING))
            return
        self._pending.append((indices, None if self._fetch_inline() else self._submit(indices), _NOTHING))

    def _fetch_inline(self) -> bool:
        return self.mode == "inline" or (self.mode == "threads" and bool(self.loader.draws_from_rng))

    def _submit(self, indices: list[Any], first_item: Any = _NOTHING) -> Future[Any]:
        """Fetch every item of a batch at once; the returned future is the collated batch."""
        assert self._executor is not None and self._collator is not None
        if self.mode == "processes":
            workers = max(1, self.loader.num_workers)
            chunk = max(1, -(-len(indices) // workers))
            parts = [indices[start : start + chunk] for start in range(0, len(indices), chunk)]
            seeds = [item_seed(self.base_seed, index) for index in indices]
            chunks = [
                self._executor.submit(_fetch_in_process, part, seeds[start : start + chunk])
                for start, part in zip(range(0, len(indices), chunk), parts)
            ]
            return self._collator.submit(self._collate, chunks, True)
        futures: list[Future[Any]] = []
        for position, index in enumerate(indices):
            if position == 0 and first_item is not _NOTHING:
                futures.append(_done(first_item))
            else:
                futures.append(self._executor.submit(_fetch, self.dataset, index))
        return self._collator.submit(self._collate, futures, False)

    def _collate(self, futures: list[Future[Any]], chunked: bool) -> Any:
        items = [item for future in futures for item in future.result()] if chunked else [future.result() for future in futures]
        return self._finish(items)

    def _finish(self, items: list[Any]) -> Any:
        loader = self.loader
        batch = loader.collate_fn(items) if loader.auto_collation else loader.collate_fn(items[0])
        if loader.pin_memory and torch.cuda.is_available():
            from torch.utils.data._utils.pin_memory import pin_memory

            batch = pin_memory(batch)
        return batch

    # ---- delivering -----------------------------------------------------------------------

    def __next__(self) -> Any:
        if self.mode == "inline":
            indices = self._draw()
            if indices is None:
                raise StopIteration
            return self._finish([_fetch(self.dataset, index) for index in indices])
        if not self._pending:
            self.close()
            raise StopIteration
        indices, future, first = self._pending.popleft()
        if future is None:
            fetched = [] if first is _NOTHING else [first]
            batch = self._finish(fetched + [_fetch(self.dataset, index) for index in indices[len(fetched) :]])
        else:
            try:
                batch = future.result(timeout=self.loader.timeout or None)
            except FutureTimeout:
                self.close()
                raise RuntimeError(f"DataLoader timed out after {self.loader.timeout} seconds (a batch of {len(indices)} items)") from None
            except BaseException:
                self.close()
                raise
        self._put_next()  # as torch: the next draw comes as a batch is returned
        return batch

    def __iter__(self) -> MapStyleIteration:
        return self

    # ---- workers --------------------------------------------------------------------------

    def _start_workers(self) -> None:
        loader = self.loader
        if self.mode == "processes":
            # forkserver, not fork: forking a process that runs threads (ours, torch's, JAX's) can
            # copy a held lock into the child and deadlock it.
            self._executor = ProcessPoolExecutor(
                loader.num_workers,
                mp_context=self.loader.multiprocessing_context or multiprocessing.get_context("forkserver"),
                initializer=_init_process,
                initargs=(self.dataset, loader.worker_init_fn),
            )
        else:
            self._executor = ThreadPoolExecutor(
                loader.num_workers, thread_name_prefix="stoker-torch-fetch", initializer=_thread_initializer(loader.worker_init_fn)
            )
        self._collator = ThreadPoolExecutor(max(1, loader.prefetch_factor * loader.num_workers), thread_name_prefix="stoker-torch-collate")

    def close(self) -> None:
        """Stop the workers; items not started are cancelled. Idempotent."""
        with self._lock:
            executors, self._executor, self._collator = (self._executor, self._collator), None, None
        for executor in executors:
            if executor is not None:
                executor.shutdown(wait=False, cancel_futures=True)

    def __del__(self) -> None:
        self.close()


def _thread_initializer(init: Callable[[int], None] | None) -> Callable[[], None] | None:
    """``worker_init_fn`` once per fetch thread, with ids 0, 1, ..."""
    if init is None:
        return None
    counter = iter(range(1 << 30))
    lock = threading.Lock()

    def initialize() -> None:
        with lock:
            worker_id = next(counter)
        init(worker_id)

    return initialize


_process_dataset: Any = None


def _init_process(dataset: Any, worker_init_fn: Callable[[int], None] | None) -> None:
    import os

    global _process_dataset
    _process_dataset = dataset
    if worker_init_fn is not None:
        worker_init_fn(os.getpid() % (1 << 16))


def _fetch_in_process(indices: list[Any], seeds: list[int]) -> list[Any]:
    items = []
    for index, seed in zip(indices, seeds):
        seed_global_rngs(seed)  # the same augmentation whichever process fetches the item
        items.append(_fetch(_process_dataset, index))
    return items
