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

The constructor is torch's contract, checked against torch's own DataLoader by
``tests/torch/test_differential_construction.py``: the same errors in the same words, the same
worker-count warning, ``multiprocessing_context`` (a start method's name or a context: worker
processes of that kind), ``in_order``, ``pin_memory_device``, and the same attributes refused
after construction.

Other differences from torch: with threads, ``get_worker_info()`` is None inside
``__getitem__``; ``worker_init_fn(worker_id)`` is called once in each fetch thread (ids ``0 ..
num_workers - 1``) before its first item; ``timeout`` bounds the wait for each batch.
"""

from __future__ import annotations

import multiprocessing as python_multiprocessing
import os
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, TypeVar

import torch
from torch.utils.data import BatchSampler, IterableDataset, RandomSampler, Sampler, SequentialSampler
from torch.utils.data._utils.collate import default_collate, default_convert

from ._iteration import MapStyleIteration

__all__ = ["DataLoader"]

T_co = TypeVar("T_co", covariant=True)
# What torch refuses to have changed once a DataLoader is built (its __setattr__).
_FIXED_AFTER_INIT = ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset", "persistent_workers")


class DataLoader(Generic[T_co]):
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
        multiprocessing_context: As torch's: a start method's name or a context; given (with
            ``num_workers > 0``), items are fetched in worker processes of that kind.
        pin_memory_device: As torch's (deprecated there too).
        in_order: As torch's; batches are always delivered in order here, which torch allows.
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
        multiprocessing_context: str | python_multiprocessing.context.BaseContext | None = None,
        generator: torch.Generator | None = None,
        *,
        prefetch_factor: int | None = None,
        persistent_workers: bool = False,
        pin_memory_device: str = "",
        in_order: bool = True,
        multiprocessing: bool = False,
    ) -> None:
        self._initialized = False
        _check_arguments(num_workers, prefetch_factor, timeout, persistent_workers, multiprocessing)
        context = _start_method(multiprocessing_context, num_workers)
        self.multiprocessing_context = context
        self.pin_memory_device = pin_memory_device
        self.in_order = in_order
        if isinstance(dataset, IterableDataset):
            _check_iterable_arguments(shuffle, sampler, batch_sampler)
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
        # A start method chosen means worker processes, as under torch.
        self.multiprocessing = multiprocessing or context is not None
        self.draws_from_rng: bool | None = None  # found out on the first threaded iteration
        self.auto_collation = batch_sampler is not None or batch_size is not None
        self.collate_fn = collate_fn or (default_collate if self.auto_collation else default_convert)
        self._collate_given = collate_fn
        self.iterable = isinstance(dataset, IterableDataset)
        if self.iterable:
            self.sampler: Any = None
            self.batch_sampler: Any = None
            self._finish_init()
            return
        if sampler is None:
            sampler = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
        self.sampler = sampler
        if batch_sampler is None and batch_size is not None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_sampler = batch_sampler
        self._finish_init()

    def _finish_init(self) -> None:
        self._initialized = True
        _warn_if_more_workers_than_cores(self.num_workers)

    def __setattr__(self, name: str, value: Any) -> None:
        # torch refuses these once built: the batches already drawn would no longer match them.
        if name in _FIXED_AFTER_INIT and getattr(self, "_initialized", False):
            raise ValueError(f"{name} attribute should not be set after {type(self).__name__} is initialized")
        super().__setattr__(name, value)

    def __len__(self) -> int:
        if self.iterable:
            return len(self._torch_loader())
        return len(self.batch_sampler if self.batch_sampler is not None else self.sampler)

    def __iter__(self) -> Iterator[Any]:
        if not self.iterable:
            _warn_if_more_workers_than_cores(self.num_workers)  # torch says it again at each pass
        if self.iterable:
            return iter(self._torch_loader())
        return MapStyleIteration(self)

    def _torch_loader(self) -> Any:
        """torch's own DataLoader over the IterableDataset, with these arguments (its construction's
        warnings were said when this loader was built; its iteration's are its own)."""
        options: dict[str, Any] = {"prefetch_factor": self.prefetch_factor} if self.num_workers else {}
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="This DataLoader will create")
            return self._build_torch_loader(options)

    def _build_torch_loader(self, options: dict[str, Any]) -> Any:
        return torch.utils.data.DataLoader(
            self.dataset,
            batch_size=self.batch_size,
            num_workers=self.num_workers,
            collate_fn=self._collate_given,
            pin_memory=self.pin_memory,
            drop_last=self.drop_last,
            timeout=self.timeout,
            worker_init_fn=self.worker_init_fn,
            multiprocessing_context=self.multiprocessing_context,
            generator=self.generator,
            persistent_workers=self.persistent_workers,
            pin_memory_device=self.pin_memory_device,
            in_order=self.in_order,
            **options,
        )


def _check_arguments(num_workers: Any, prefetch_factor: Any, timeout: Any, persistent_workers: Any, multiprocessing: Any) -> None:
    """torch's own checks, in torch's order and words, made when the loader is made."""
    if num_workers < 0:
        raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable multiprocessing.")
    if timeout < 0:
        raise ValueError("timeout option should be non-negative")
    if num_workers == 0 and prefetch_factor is not None:
        raise ValueError(
            "prefetch_factor option could only be specified in multiprocessing."
            "let num_workers > 0 to enable multiprocessing, otherwise set prefetch_factor to None."
        )
    if prefetch_factor is not None and prefetch_factor < 0:
        raise ValueError("prefetch_factor option should be non-negative")
    if persistent_workers and num_workers == 0:
        raise ValueError("persistent_workers option needs num_workers > 0")
    if multiprocessing and num_workers == 0:
        raise ValueError("multiprocessing=True needs num_workers > 0 worker processes")


def _start_method(context: Any, num_workers: int) -> python_multiprocessing.context.BaseContext | None:
    """``multiprocessing_context`` as a context, checked as torch checks it."""
    if context is None:
        return None
    if num_workers == 0:
        raise ValueError(
            f"multiprocessing_context can only be used with multi-process loading (num_workers > 0), but got num_workers={num_workers}"
        )
    if isinstance(context, str):
        methods = python_multiprocessing.get_all_start_methods()
        if context not in methods:
            raise ValueError(
                f"multiprocessing_context option should specify a valid start method in {methods!r}, but got multiprocessing_context={context!r}"
            )
        context = python_multiprocessing.get_context(context)
    if not isinstance(context, python_multiprocessing.context.BaseContext):
        raise TypeError(
            "multiprocessing_context option should be a valid context object or a string specifying the start method, "
            f"but got multiprocessing_context={context}"
        )
    return context


def _check_iterable_arguments(shuffle: Any, sampler: Any, batch_sampler: Any) -> None:
    """An IterableDataset orders itself: torch refuses a shuffle, a sampler or a batch sampler."""
    if shuffle not in {False, None}:
        raise ValueError(f"DataLoader with IterableDataset: expected unspecified shuffle option, but got shuffle={shuffle}")
    if sampler is not None:
        raise ValueError(f"DataLoader with IterableDataset: expected unspecified sampler option, but got sampler={sampler}")
    if batch_sampler is not None:
        raise ValueError(
            f"DataLoader with IterableDataset: expected unspecified batch_sampler option, but got batch_sampler={batch_sampler}"
        )


def _warn_if_more_workers_than_cores(num_workers: int) -> None:
    """torch's warning when more workers are asked for than this process may run on."""
    if num_workers <= 0:
        return
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    if cores is not None and num_workers > cores:
        warnings.warn(
            f"This DataLoader will create {num_workers} worker processes in total. Our suggested max number of worker in current system is "
            f"{cores}, which is smaller than what this DataLoader is going to create. Please be aware that excessive worker creation "
            "might get DataLoader running slow or even freeze, lower the worker number to avoid potential slowness/freeze if necessary.",
            stacklevel=3,
        )
