"""`stoker.torch.DataLoader`: a drop-in for ``torch.utils.data.DataLoader``, with threads instead
of worker processes and every item of a batch fetched at once.

Map-style datasets: index batches come from torch's own samplers, drawn lazily in the calling
thread exactly when torch draws them (the shared base seed as the iteration starts; then, with
workers, ``prefetch_factor * num_workers`` batches ahead and one more as each batch is returned;
without workers, one per ``next()``). So for the same seed, generator, sampler or batch sampler
the batches are *identical* to torch's, an infinite sampler works, and a sampler drawing from the
global RNG interleaves with the training loop's own draws as under torch.

- ``num_workers=0``: items are fetched in the calling thread, as torch does: identical results,
  random augmentation in ``__getitem__`` included.
- ``num_workers=N``: N threads fetch all items of a batch concurrently (ConcurrentDataloader's
  idea for high-latency storage), put back in the batch's order and collated on a collate thread.
  Threads share torch's, ``random``'s and NumPy's global generators, so a ``__getitem__`` that
  draws from them would augment differently on every run; the first item of the first iteration
  is fetched alone to see whether it draws, and if it does, items are fetched in the calling
  thread, in order (reproducible), with a warning saying so.
- ``multiprocessing=True``: N worker processes (for a ``__getitem__`` that holds the GIL or draws
  random numbers); before each item, the global generators are seeded from the iteration's base
  seed and the item's index, so augmentation is the same run after run whichever process
  fetches it (and differs from torch's, whose workers draw in sequence).

An ``IterableDataset`` is iterated by torch's own DataLoader with the same arguments: the dataset
decides its order and its sharding across workers (``get_worker_info()``), so there is no batch
of indices to fetch concurrently, and torch's machinery is its exact semantics.

Other differences from torch: with threads, ``get_worker_info()`` is None inside
``__getitem__``; ``worker_init_fn(worker_id)`` is called once in each fetch thread (ids ``0 ..
num_workers - 1``) before its first item; ``timeout`` bounds the wait for each batch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch
from torch.utils.data import BatchSampler, IterableDataset, RandomSampler, Sampler, SequentialSampler
from torch.utils.data._utils.collate import default_collate, default_convert

from ._iteration import MapStyleIteration

__all__ = ["DataLoader"]


class DataLoader:
    """Same arguments as ``torch.utils.data.DataLoader`` for common use; see the module notes.

    Args:
        dataset: A map-style dataset (``__getitem__``, and ``__len__`` unless the sampler is
            given) or an ``IterableDataset``.
        batch_size: As torch's.
        shuffle: As torch's.
        sampler: As torch's.
        batch_sampler: As torch's.
        drop_last: As torch's.
        collate_fn: As torch's.
        generator: As torch's.
        pin_memory: As torch's (a CPU fallback where there is no CUDA).
        timeout: As torch's.
        worker_init_fn: As torch's.
        persistent_workers: As torch's.
        num_workers: 0 fetches in the calling thread as torch does; N fetches with N threads
            (or processes with ``multiprocessing``), every item of a batch at once.
        prefetch_factor: Batches in flight per worker (default 2), as torch's.
        multiprocessing: Fetch in ``num_workers`` processes; the dataset must be picklable.

    Raises:
        ValueError: Conflicting sampler arguments, as torch raises them, or a bad value.
        TypeError: An argument of the wrong type; the message names it.
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
        _check_arguments(batch_size, num_workers, prefetch_factor, timeout, multiprocessing)
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
        self.draws_from_rng: bool | None = None  # found out on the first threaded iteration
        self.auto_collation = batch_sampler is not None or batch_size is not None
        self.collate_fn = collate_fn or (default_collate if self.auto_collation else default_convert)
        self._collate_given = collate_fn
        self.iterable = isinstance(dataset, IterableDataset)
        if self.iterable:
            if sampler is not None or batch_sampler is not None or shuffle:
                raise ValueError("an IterableDataset orders itself: sampler, batch_sampler and shuffle do not apply (as in torch)")
            self.sampler: Any = None
            self.batch_sampler: Any = None
            return
        if sampler is None:
            sampler = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
        self.sampler = sampler
        if batch_sampler is None and batch_size is not None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_sampler = batch_sampler

    def __len__(self) -> int:
        if self.iterable:
            return len(self._torch_loader())
        return len(self.batch_sampler if self.batch_sampler is not None else self.sampler)

    def __iter__(self) -> Iterator[Any]:
        if self.iterable:
            return iter(self._torch_loader())
        return MapStyleIteration(self)

    def _torch_loader(self) -> Any:
        """torch's own DataLoader over the IterableDataset, with these arguments."""
        options: dict[str, Any] = {"prefetch_factor": self.prefetch_factor} if self.num_workers else {}
        return torch.utils.data.DataLoader(
            self.dataset,
            batch_size=self.batch_size,
            num_workers=self.num_workers,
            collate_fn=self._collate_given,
            pin_memory=self.pin_memory,
            drop_last=self.drop_last,
            timeout=self.timeout,
            worker_init_fn=self.worker_init_fn,
            generator=self.generator,
            persistent_workers=self.persistent_workers,
            **options,
        )


def _check_arguments(batch_size: Any, num_workers: Any, prefetch_factor: Any, timeout: Any, multiprocessing: Any) -> None:
    """torch's own checks, made when the loader is made, each naming its argument."""
    if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int)):
        raise TypeError(f"batch_size should be a positive integer or None, got {type(batch_size).__name__} {batch_size!r}")
    if batch_size is not None and batch_size < 1:
        raise ValueError(f"batch_size should be a positive integer or None, got {batch_size}")
    if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
        raise ValueError(f"num_workers option should be a non-negative integer, got {num_workers!r}")
    if prefetch_factor is not None and (not isinstance(prefetch_factor, int) or prefetch_factor < 1):
        raise ValueError(f"prefetch_factor option should be a positive integer, got {prefetch_factor!r}")
    if prefetch_factor is not None and num_workers == 0:
        raise ValueError(
            "prefetch_factor option could only be specified in multiprocessing. let num_workers > 0 to enable multiprocessing, otherwise set prefetch_factor to None."
        )
    if not isinstance(timeout, (int, float)) or timeout < 0:
        raise ValueError(f"timeout option should be non-negative, got {timeout!r}")
    if multiprocessing and num_workers == 0:
        raise ValueError("multiprocessing=True needs num_workers > 0 worker processes")
