"""`FilteredStorage`: the samples of a storage that a filter kept, by index array.

What `Sampling(where=...)` reads through: the filter is worked out once over the storage's index
(its metadata columns), and the kept samples are one int64 array, 8 bytes a kept sample and no
Python object per sample; a read costs one array lookup more than reading the base.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from .._capabilities import MemberStorage, has_blocks
from .._protocol import Storage

__all__ = ["FilteredStorage"]


class _KeptSequence(Sequence[Any]):
    """The base's keys or labels at the kept indices, looked up when asked for. Over a column
    that computes its values for an index array (a ``dtype`` and array indexing, as lazy label
    columns have), it is such a column too: no Python object per sample."""

    def __init__(self, values: Sequence[Any], kept: np.ndarray) -> None:
        self._values, self._kept = values, kept
        if hasattr(values, "dtype"):
            self.dtype = values.dtype

    def __len__(self) -> int:
        return len(self._kept)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, np.ndarray):
            at = self._kept[index]
            if hasattr(self._values, "dtype"):  # a lazy column: it takes an index array
                column: Any = self._values
                return column[at]
            return [self._values[int(one)] for one in at]
        if isinstance(index, slice):
            return [self._values[int(at)] for at in self._kept[index]]
        return self._values[int(self._kept[index])]

    def __iter__(self) -> Iterator[Any]:
        for at in self._kept.tolist():
            yield self._values[at]

    def take(self, indices: list[int]) -> list[Any]:
        """Many at once (the Loader asks for a batch's keys so)."""
        base = self._kept[np.asarray(indices, dtype=np.int64)].tolist()
        take = getattr(self._values, "take", None)
        return list(take(base)) if take is not None else [self._values[at] for at in base]


class FilteredStorage(Storage):
    """The samples of ``base`` at ``kept`` (ascending storage indices); reads go to ``base``.

    Args:
        base: The storage filtered.
        kept: The indices kept, ascending, as an int64 array.
        description: What kept them (the filter), for `describe` and the fingerprint.
    """

    def __init__(self, base: Storage, kept: np.ndarray, description: str) -> None:
        super().__init__(base.max_concurrent_reads)
        self.base = base
        self.kept = np.ascontiguousarray(kept, dtype=np.int64)
        self.description = description
        self._keys = _KeptSequence(base.keys, self.kept)
        labels = base.labels
        self._labels = labels[self.kept] if isinstance(labels, np.ndarray) else _KeptSequence(labels, self.kept)
        self.classes = base.classes
        self.is_remote = base.is_remote

    @classmethod
    def of(cls, base: Storage, kept: np.ndarray, description: str) -> FilteredStorage:
        """A view of ``base`` that keeps its block and member capabilities where it has them
        (the block shuffle and ``extra=`` work over the kept samples as over all)."""
        kind = {
            (False, False): FilteredStorage,
            (True, False): _FilteredBlocks,
            (False, True): _FilteredMembers,
            (True, True): _FilteredBlocksAndMembers,
        }[has_blocks(base), isinstance(base, MemberStorage)]
        return kind(base, kept, description)

    @classmethod
    def remapped(cls, base: Storage, indices: np.ndarray, description: str) -> FilteredStorage:
        """A view of ``base`` at ``indices`` in any order (-1: a slot no read may ask for), keeping
        its member capability but not its blocks (whose runs the order breaks): an epoch continued
        over a changed dataset reads the samples left at their old positions so. A view of a view
        is one view of the first base (one index lookup a read, not one a level)."""
        indices = np.asarray(indices, dtype=np.int64)
        if isinstance(base, FilteredStorage):
            indices = np.where(indices >= 0, base.kept[np.maximum(indices, 0)], -1)
            base = base.base
        return (_FilteredMembers if isinstance(base, MemberStorage) else FilteredStorage)(base, indices, description)

    def describe(self) -> str:
        return f"{len(self.kept):,} samples of {self.base.describe()} where {self.description}"

    def _read_indices(self, indices: Sequence[int]) -> list[bytes | Exception]:
        return self.base.try_read_indices(self.kept[np.asarray(indices, dtype=np.int64)].tolist())

    async def fetch_index(self, index: int) -> bytes:
        """The kept sample at ``index``, through the base's async fetch."""
        return await self.base.fetch_index(int(self.kept[index]))

    def close(self) -> None:
        """Release this view's threads; the base stays open (it is the caller's)."""
        super().close()


class _KeptBlocks:
    """The block capability of a filtered storage whose base has blocks: a view's block is the
    kept samples of one of the base's blocks (blocks left empty by the filter are dropped), so
    the block shuffle reads whole base blocks as it does unfiltered."""

    base: Any
    kept: np.ndarray

    def _blocks(self) -> tuple[list[int], np.ndarray]:
        cached = self.__dict__.get("_block_layout")
        if cached is None:
            ends = np.cumsum(np.asarray(self.base.block_sizes(), dtype=np.int64))
            counts = np.bincount(np.searchsorted(ends, self.kept, side="right"), minlength=len(ends))
            used = np.flatnonzero(counts)
            cached = ([int(count) for count in counts[used]], used)
            self.__dict__["_block_layout"] = cached
        return cached

    def block_sizes(self) -> list[int] | None:
        """Kept samples in each base block that keeps any, in storage order."""
        return self._blocks()[0]

    def max_open_blocks(self) -> int | None:
        """The base's bound."""
        return self.base.max_open_blocks()

    def stream_blocks(self) -> None:
        """The base streams whole blocks."""
        self.base.stream_blocks()

    def prefetch_blocks(self, blocks: Sequence[int]) -> None:
        """The base's blocks behind ``blocks``."""
        used = self._blocks()[1]
        self.base.prefetch_blocks([int(used[block]) for block in blocks])


class _KeptMembers:
    """The members capability of a filtered storage whose base has members."""

    base: Any
    kept: np.ndarray

    def try_read_members(self, indices: Sequence[int], extensions: Sequence[str]) -> list[dict[str, Any] | Exception]:
        """The base's members of the kept samples at ``indices``."""
        return self.base.try_read_members(self.kept[np.asarray(indices, dtype=np.int64)].tolist(), extensions)


class _FilteredBlocks(_KeptBlocks, FilteredStorage):
    pass


class _FilteredMembers(_KeptMembers, FilteredStorage):
    pass


class _FilteredBlocksAndMembers(_KeptBlocks, _KeptMembers, FilteredStorage):
    pass
