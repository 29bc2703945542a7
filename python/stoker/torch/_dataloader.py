"""`stoker.torch.DataLoader`: torch's DataLoader, exactly, with the items of a batch fetched at
once when they wait, and a worker kind that keeps one copy of the dataset.

It is built on torch's own DataLoader: the constructor's checks, errors and warnings, the
samplers, when the base seed and the indices are drawn, worker processes (ids ``0 .. N-1``,
``base_seed + worker_id`` seeding, ``get_worker_info()``, torch's default start method, the
round-robin assignment of batches to workers), error propagation, dead-worker detection,
``timeout``, ``persistent_workers``, ``pin_memory`` and ``in_order`` are torch's (a dead
worker's error also says which worker it was and how it ended, `stoker.torch._worker_deaths`). What changes is
how a worker fetches the items of one batch (`stoker.torch._fetching`): one after another as
torch does, or, once a worker sees its items spend their time waiting (a remote read), every item
of the batch in flight at once, ConcurrentDataloader's idea. A ``__getitem__`` that draws random
numbers is always fetched one item after another, so batches are bit for bit torch's.

``worker_kind="threads"`` fetches in ``num_workers`` threads instead (`stoker.torch._threads`):
for a large in-memory dataset, which torch's processes copy into each worker as they read it.

An ``IterableDataset`` orders and shards itself, so it is iterated by torch's DataLoader as is.
The deliberate differences from torch are listed in ``docs/torch.md``.
"""

from __future__ import annotations

import multiprocessing as python_multiprocessing
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, Literal, TypeVar

import torch
from torch.utils.data import IterableDataset, Sampler

from .._deprecation import warn_deprecated
from ._fetching import BatchFetcher
from ._threads import ThreadedIteration, ThreadWorkers
from ._worker_dataset import WorkerDataset, WorkerStart, own_batch_fetch
from ._worker_deaths import NamedWorkerDeaths

__all__ = ["DataLoader"]

T_co = TypeVar("T_co", covariant=True)

# Guards every loader's `_thread_workers` while a pass starts (was: read and set without a lock,
# so two passes started at once each started persistent threads, and one set was never stopped).
# One lock for all loaders, not one each: a pass starts rarely, and a loader stays picklable.
_STARTING = threading.Lock()
WorkerKind = Literal["processes", "threads"]
# Attributes that live on torch's DataLoader inside: read from it, and set on it (where torch
# refuses an assignment after construction, its own check raises its own error).
_TORCH_ATTRIBUTES = frozenset(
    {
        "batch_size", "batch_sampler", "sampler", "drop_last", "persistent_workers", "num_workers", "collate_fn",
        "pin_memory", "timeout", "generator", "prefetch_factor", "multiprocessing_context", "pin_memory_device", "in_order",
    }
)  # fmt: skip


class DataLoader(Generic[T_co]):
    """torch's ``DataLoader``, with a batch's waiting items fetched at once (see the module notes).

    Args:
        dataset: A map-style dataset (``__getitem__``, and ``__len__`` unless a sampler is
            given) or an ``IterableDataset``, as torch's.
        batch_size: As torch's.
        shuffle: As torch's.
        sampler: As torch's.
        batch_sampler: As torch's.
        num_workers: As torch's: 0 fetches in the calling process.
        collate_fn: As torch's.
        pin_memory: As torch's (nothing is pinned where there is no accelerator, with torch's
            warning).
        drop_last: As torch's.
        timeout: As torch's.
        worker_init_fn: As torch's; ``get_worker_info().dataset`` is the dataset given here.
        multiprocessing_context: As torch's (torch's default start method when None).
        generator: As torch's.
        prefetch_factor: As torch's.
        persistent_workers: As torch's.
        pin_memory_device: As torch's (deprecated there).
        in_order: As torch's.
        worker_kind: ``"processes"`` (torch's worker processes; the default) or ``"threads"``
            (``num_workers`` threads sharing one copy of a map-style dataset).
        items_in_flight: Items of one batch a worker fetches at once: None (the default) decides
            from the batches (all of them when they wait, one after another otherwise); 1 is
            torch's one after another always; N > 1 is up to N at once always.
        multiprocessing: Deprecated: ``worker_kind="processes"`` (True) or ``"threads"`` (False).

    Raises:
        ValueError: As torch's, in torch's words; ``worker_kind`` or ``items_in_flight`` out of
            range, or threads asked for with a start method or an ``IterableDataset``.
        TypeError: As torch's.
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
        worker_kind: WorkerKind = "processes",
        items_in_flight: int | None = None,
        multiprocessing: bool | None = None,
    ) -> None:
        map_style = not isinstance(dataset, IterableDataset)
        torch_loader = torch.utils.data.DataLoader(
            WorkerDataset(dataset, items_in_flight) if map_style else dataset,
            batch_size,
            shuffle,
            sampler,
            batch_sampler,
            num_workers,
            collate_fn,
            pin_memory,
            drop_last,
            timeout,
            WorkerStart(worker_init_fn) if map_style else worker_init_fn,
            multiprocessing_context,
            generator,
            prefetch_factor=prefetch_factor,
            persistent_workers=persistent_workers,
            pin_memory_device=pin_memory_device,
            in_order=in_order,
        )
        worker_kind = _worker_kind(worker_kind, multiprocessing, num_workers, multiprocessing_context, map_style)
        _check_items_in_flight(items_in_flight)
        state = {
            "_torch": torch_loader,
            "_map_style": map_style,
            "_thread_workers": None,
            "dataset": dataset,
            "worker_init_fn": worker_init_fn,
            "worker_kind": worker_kind,
            "items_in_flight": items_in_flight,
        }
        self.__dict__.update(state)

    def __getattr__(self, name: str) -> Any:
        # Only reached for what is not set here: torch's attributes and methods.
        if name.startswith("__") or name == "_torch":
            raise AttributeError(name)
        return getattr(self._torch, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "dataset":
            raise ValueError(f"dataset attribute should not be set after {type(self).__name__} is initialized")
        if name == "worker_init_fn":
            self._torch.worker_init_fn = WorkerStart(value) if self._map_style else value
        elif name in _TORCH_ATTRIBUTES:
            setattr(self._torch, name, value)
            return
        super().__setattr__(name, value)

    def __len__(self) -> int:
        return len(self._torch)

    def __iter__(self) -> Iterator[Any]:
        if self.num_workers == 0:
            return iter(self._torch)
        if self.worker_kind == "processes":
            return NamedWorkerDeaths(iter(self._torch))
        self._torch.check_worker_number_rationality()  # torch's warning, as at each pass there
        persistent = bool(self.persistent_workers)
        with _STARTING:
            workers = self._thread_workers
            if workers is None:
                workers = self._start_threads()
                if persistent:
                    # Stopped once this DataLoader is collected (each pass holds it, below), as
                    # torch's persistent worker processes are (was: never stopped before the
                    # interpreter's exit: a DataLoader made each epoch left its threads behind).
                    weakref.finalize(self, workers.stop)
            self.__dict__["_thread_workers"] = workers if persistent else None
        return ThreadedIteration(self._torch, workers, stop_workers_at_end=not persistent, owner=self)

    def _start_threads(self) -> ThreadWorkers:
        dataset, collate = self.dataset, self.collate_fn
        own = own_batch_fetch(dataset)
        if self._torch._auto_collation and own is not None:  # the dataset fetches its batches itself: as under torch

            def make_batch(fetcher: BatchFetcher, indices: Any) -> Any:
                return collate(own(indices))
        elif self._torch._auto_collation:

            def make_batch(fetcher: BatchFetcher, indices: Any) -> Any:
                return collate(fetcher.fetch(dataset, indices))
        else:

            def make_batch(fetcher: BatchFetcher, indices: Any) -> Any:
                return collate(dataset[indices])

        return ThreadWorkers(self.num_workers, make_batch, self.worker_init_fn, self.items_in_flight)


def _worker_kind(kind: Any, multiprocessing: bool | None, num_workers: int, context: Any, map_style: bool) -> WorkerKind:
    """``worker_kind``, from the deprecated ``multiprocessing`` where that was given, checked."""
    if multiprocessing is not None:
        kind = "processes" if multiprocessing else "threads"
        warn_deprecated(f"DataLoader(multiprocessing={multiprocessing}) is now DataLoader(worker_kind={kind!r})", stacklevel=4)
    if kind not in ("processes", "threads"):
        raise ValueError(f"worker_kind should be 'processes' or 'threads', but got worker_kind={kind!r}")
    if kind == "threads" and context is not None:
        raise ValueError(f"worker_kind='threads' runs no worker processes, but got multiprocessing_context={context!r}")
    if kind == "threads" and not map_style and num_workers > 0:
        raise ValueError("worker_kind='threads' is for map-style datasets: an IterableDataset runs in torch's worker processes")
    return kind


def _check_items_in_flight(items_in_flight: Any) -> None:
    if items_in_flight is None:
        return
    if isinstance(items_in_flight, bool) or not isinstance(items_in_flight, int) or items_in_flight < 1:
        raise ValueError(f"items_in_flight should be None or a positive integer, but got items_in_flight={items_in_flight!r}")
