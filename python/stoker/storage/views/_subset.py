"""`SubsetStorage`: some samples of a storage, by key (one split of `stoker split`)."""

from __future__ import annotations

from collections.abc import Sequence

from ...errors import StorageError
from .._protocol import Storage

__all__ = ["SubsetStorage"]


class SubsetStorage(Storage):
    """The samples of ``base`` named by ``keys``, in that order; reads go to ``base``.

    Skipped samples are recorded in this subset's ``failures``. A subset of a network storage is itself remote (`is_remote`, async `fetch_index`), so the
    loader's out-of-order prefetch works on one split as on the whole.

    Raises:
        StorageError: A key that ``base`` does not hold (the first few are named).
    """

    def __init__(self, base: Storage, keys: Sequence[str]) -> None:
        super().__init__(base.max_concurrent_reads)
        self.base = base
        missing = []
        positions = []
        for key in keys:
            try:
                positions.append(base.index_of(key))
            except KeyError:
                missing.append(key)
        if missing:
            raise StorageError(f"{base.describe()}: {len(missing)} keys of the subset are not there, e.g. {missing[:3]}")
        self._positions = positions
        self._keys = list(keys)
        labels = base.labels
        self._labels = [labels[position] for position in positions]
        self.classes = base.classes
        self.is_remote = base.is_remote

    def describe(self) -> str:
        return f"{len(self._keys)} samples of {self.base.describe()}"

    def _read_indices(self, indices: Sequence[int]) -> list[bytes | Exception]:
        return self.base.try_read_indices([self._positions[index] for index in indices])

    async def fetch_index(self, index: int) -> bytes:
        """The sample at ``index`` of the subset, through the base's async fetch."""
        return await self.base.fetch_index(self._positions[index])
