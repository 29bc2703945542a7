"""The user's map-style dataset as torch's worker processes see it under `stoker.torch.DataLoader`.

torch's workers fetch a batch with ``dataset.__getitems__(indices)`` when the dataset has one;
`WorkerDataset` gives it one, backed by a `BatchFetcher` in each worker process, so everything
else (worker ids, seeding, ``get_worker_info()``, which worker gets which batch, errors, dead
workers, timeouts, persistent workers, pinning) is torch's own machinery, unchanged.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

from torch.utils.data import Dataset, Subset
from torch.utils.data._utils import worker as torch_worker

from ._fetching import BatchFetcher

__all__ = ["WorkerDataset", "WorkerStart", "own_batch_fetch"]


class WorkerDataset(Dataset[Any]):
    """A map-style dataset whose batches are fetched by this process's `BatchFetcher`.

    Args:
        dataset: The user's dataset.
        items_in_flight: As `BatchFetcher`'s.
    """

    def __init__(self, dataset: Any, items_in_flight: int | None) -> None:
        self.dataset = dataset
        self.items_in_flight = items_in_flight
        self._own_fetch = own_batch_fetch(dataset)  # looked up once, not at every batch
        # A `BatchFetcher` per thread (and per process): a fetcher is owned by the one thread
        # that fetches with it. With ``num_workers=0`` the threads that iterate fetch here
        # themselves (was: one fetcher shared by them, whose pool one thread could replace, and
        # so cancel, while another's items were in it).
        self._fetchers = threading.local()

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: Any) -> Any:
        return self.dataset[index]

    def __getitems__(self, indices: Sequence[Any]) -> Any:
        if self._own_fetch is not None:  # the dataset fetches its batches itself: as under torch
            return self._own_fetch(indices)
        mine = self._fetchers
        if getattr(mine, "pid", None) != os.getpid():
            mine.fetcher, mine.pid = BatchFetcher(self.items_in_flight), os.getpid()
        return mine.fetcher.fetch(self.dataset, indices)

    def __getstate__(self) -> dict[str, Any]:
        # A worker started by spawn or forkserver gets the dataset, not this process's fetcher.
        return {"dataset": self.dataset, "items_in_flight": self.items_in_flight}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["dataset"], state["items_in_flight"])  # type: ignore[misc]


def own_batch_fetch(dataset: Any) -> Callable[[Sequence[Any]], Any] | None:
    """The dataset's own ``__getitems__``, or None where it has none worth keeping: torch's
    ``Subset`` (what ``random_split`` makes) has one that only loops over its dataset's items
    when that dataset has none, and fetching those items concurrently gives the same items."""
    own = getattr(dataset, "__getitems__", None)
    if not own:
        return None
    if isinstance(dataset, Subset) and own_batch_fetch(dataset.dataset) is None:
        return None
    return own


class WorkerStart:
    """The ``worker_init_fn`` torch is given: makes ``get_worker_info().dataset`` the user's own
    dataset (not the `WorkerDataset` around it), then calls the user's ``worker_init_fn``.

    Args:
        worker_init_fn: The user's, or None.
    """

    def __init__(self, worker_init_fn: Callable[[int], None] | None) -> None:
        self.worker_init_fn = worker_init_fn

    def __call__(self, worker_id: int) -> None:
        info = torch_worker._worker_info
        if info is not None and isinstance(info.dataset, WorkerDataset):
            if dataclasses.is_dataclass(info):
                torch_worker._worker_info = dataclasses.replace(info, dataset=info.dataset.dataset)
            else:  # torch before 2.6: a class that refuses assignment after its __init__
                object.__setattr__(info, "dataset", info.dataset.dataset)
        if self.worker_init_fn is not None:
            self.worker_init_fn(worker_id)
