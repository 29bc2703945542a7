"""`stoker.torch.DataLoader`: a drop-in for ``torch.utils.data.DataLoader`` over map-style datasets,
with threads instead of worker processes and every item of a batch fetched at once.

Index batches come from torch's own samplers, drawn in the calling thread exactly as torch draws
them (the shared base seed first, then the sampler), so for the same seed, generator, sampler or
batch sampler the batches are *identical* to torch's. Items are fetched by index (never by
position in the batch) on a thread pool, all items of a batch concurrently (ConcurrentDataloader's
idea for high-latency storage), then put back in the batch's order and collated. Batches leave in
sampler order. For datasets whose ``__getitem__`` holds the GIL, ``multiprocessing=True`` fetches
in worker processes instead.

Differences from torch, by design: there are no worker processes, so ``get_worker_info()`` is
None inside ``__getitem__``; ``worker_init_fn(worker_id)`` is called once in each fetch thread
(ids ``0 .. num_workers - 1``) before its first item; ``timeout`` bounds the wait for each batch.
"""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any

import torch
from torch.utils.data import BatchSampler, RandomSampler, Sampler, SequentialSampler
from torch.utils.data._utils.collate import default_collate, default_convert

from ..pipeline import PipelineBuilder

__all__ = ["DataLoader"]


def _fetch_items(dataset: Any, indices: Sequence[Any]) -> list[Any]:
    return [dataset[index] for index in indices]


class DataLoader:
    """Same arguments as ``torch.utils.data.DataLoader`` for common use; see the module notes.

    Args:
        dataset: A map-style dataset (``__getitem__`` and ``__len__``).
        batch_size, shuffle, sampler, batch_sampler, drop_last, collate_fn, generator,
        pin_memory, timeout, worker_init_fn: As torch's.
        num_workers: Threads fetching items (0 means 8: threads are cheap and fetches overlap).
        prefetch_factor: Batches in flight per worker (default 2), as torch's.
        multiprocessing: Fetch in ``num_workers`` processes (for ``__getitem__`` that holds the
            GIL); the dataset must be picklable.

    Raises:
        ValueError: Conflicting sampler arguments, as torch raises them.
    """

    def __init__(
        self,
        dataset: Any,
        batch_size: int | None = 1,
        shuffle: bool | None = None,
        sampler: Sampler[Any] | Iterable[Any] | None = None,
        batch_sampler: Sampler[list[Any]] | Iterable[list[Any]] | None = None,
        num_workers: int = 0,
        collate_fn: Callable[[list[Any]], Any] | None = None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float = 0,
        worker_init_fn: Callable[[int], None] | None = None,
        generator: torch.Generator | None = None,
        *,
        prefetch_factor: int | None = None,
        persistent_workers: bool = False,
        multiprocessing: bool = False,
    ) -> None:
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None and (batch_size != 1 or shuffle or sampler is not None or drop_last):
            raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and drop_last")
        if batch_sampler is None and batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive with drop_last")
        self.dataset = dataset
        self.batch_size = batch_size if batch_sampler is None else None
        self.drop_last = drop_last
        self.generator = generator
        self.num_workers = num_workers
        self.pin_memory = pin_memory
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.prefetch_factor = prefetch_factor or 2
        self.persistent_workers = persistent_workers
        self.multiprocessing = multiprocessing
        if sampler is None:
            sampler = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
        self.sampler = sampler
        if batch_sampler is None and batch_size is not None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_sampler = batch_sampler
        self.auto_collation = batch_sampler is not None
        self.collate_fn = collate_fn or (default_collate if self.auto_collation else default_convert)

    def __len__(self) -> int:
        return len(self.batch_sampler if self.batch_sampler is not None else self.sampler)  # type: ignore[arg-type]

    def _index_batches(self) -> list[Any]:
        # torch draws the loader's shared base seed before the sampler draws its own: do the same
        # so the global RNG (or the generator) advances exactly as under torch.
        torch.empty((), dtype=torch.int64).random_(generator=self.generator).item()
        if self.batch_sampler is not None:
            return [list(batch) for batch in self.batch_sampler]
        return [[index] for index in self.sampler]

    def __iter__(self) -> Iterator[Any]:
        batches = self._index_batches()
        threads = self.num_workers or 8
        executor: Executor
        if self.multiprocessing:
            # forkserver, not fork: forking a process that runs threads (ours, torch's, JAX's) can
            # copy a held lock into the child and deadlock it.
            executor = ProcessPoolExecutor(
                max(1, self.num_workers),
                mp_context=multiprocessing.get_context("forkserver"),
                initializer=_init_process if self.worker_init_fn else None,
                initargs=(self.worker_init_fn,) if self.worker_init_fn else (),
            )
        else:
            executor = ThreadPoolExecutor(threads, thread_name_prefix="stoker-torch-fetch", initializer=self._thread_initializer())
        dataset = self.dataset
        auto = self.auto_collation
        collate = self.collate_fn
        pin = self.pin_memory and torch.cuda.is_available()

        def fetch(indices: list[Any]) -> Any:
            if self.multiprocessing:
                chunk = max(1, len(indices) // max(1, self.num_workers))
                futures = [executor.submit(_fetch_items, dataset, indices[start : start + chunk]) for start in range(0, len(indices), chunk)]
                items = [item for future in futures for item in future.result()]
            else:
                futures = [executor.submit(dataset.__getitem__, index) for index in indices]  # all at once
                items = [future.result() for future in futures]  # back in the batch's order
            batch = collate(items) if auto else collate(items[0])
            if pin:
                from torch.utils.data._utils.pin_memory import pin_memory

                batch = pin_memory(batch)
            return batch

        in_flight = max(1, self.prefetch_factor * max(1, self.num_workers))
        pipeline = (
            PipelineBuilder()
            .add_source(batches, name="batch_sampler")
            .pipe(fetch, concurrency=in_flight, output_order="input", name="fetch", max_failures=0)
            .add_sink(2)
            .build(name="torch-dataloader")
        )
        try:
            with pipeline.auto_stop():
                while True:
                    try:
                        yield pipeline.get(timeout=self.timeout or None)
                    except StopIteration:
                        return
        finally:
            executor.shutdown(wait=True, cancel_futures=True)

    def _thread_initializer(self) -> Callable[[], None] | None:
        if self.worker_init_fn is None:
            return None
        counter = iter(range(1 << 30))
        lock = threading.Lock()
        init = self.worker_init_fn

        def initialize() -> None:
            with lock:
                worker_id = next(counter)
            init(worker_id)

        return initialize


def _init_process(worker_init_fn: Callable[[int], None]) -> None:
    import os

    worker_init_fn(os.getpid() % (1 << 16))
