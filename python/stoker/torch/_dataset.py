"""A `stoker.Loader` seen as a torch ``IterableDataset``, for code that wants torch's DataLoader
around it: ``torch.utils.data.DataLoader(LoaderDataset(loader), batch_size=None)``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from torch.utils.data import IterableDataset

from ..loader import Loader

__all__ = ["LoaderDataset"]


class LoaderDataset(IterableDataset):
    """Yields ``(data, labels)`` tensors per batch, sharing the Loader's batch memory.

    Use it with ``batch_size=None`` and ``num_workers=0``: the Loader already batches, and its
    threads do the parallel work.
    """

    def __init__(self, loader: Loader) -> None:
        self.loader = loader

    def __iter__(self) -> Iterator[tuple[Any, Any]]:
        for batch in self.loader:
            data = torch.from_numpy(batch.data) if hasattr(batch.data, "dtype") else batch.data
            yield data, torch.from_numpy(batch.labels)

    def __len__(self) -> int:
        """The Loader's epoch in batches (`Loader.__len__`), as torch counts a dataset's length."""
        return len(self.loader)
