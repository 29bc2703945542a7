"""A tar dataset's keys and labels as sequences made when asked for: a key or a label one at a
time, a batch's at once, a shard at a time when iterated; never one Python object per sample."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol

import numpy as np

__all__ = ["KeyColumn", "LabelColumn", "ShardLookup"]


class ShardLookup(Protocol):
    """What the columns ask of a catalog of shards (`ShardCatalog` is one): where a sample is,
    and each shard's index and labels. A protocol, so the catalog can build its columns without
    the two modules importing each other."""

    @property
    def shards(self) -> Sequence[Any]: ...
    @property
    def starts(self) -> np.ndarray: ...
    @property
    def label_dtype(self) -> np.dtype[Any]: ...
    def __len__(self) -> int: ...
    def key(self, index: int) -> str: ...
    def label(self, index: int) -> Any: ...
    def label_at(self, number: int, index: Any, position: int) -> Any: ...
    def locate_many(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...
    def shard(self, number: int) -> Any: ...


class KeyColumn(Sequence[str]):
    """Every sample's key, made when asked for (shard by shard when iterated)."""

    def __init__(self, catalog: ShardLookup) -> None:
        self._catalog = catalog

    def __len__(self) -> int:
        return len(self._catalog)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[position] for position in range(*index.indices(len(self)))]
        index = int(index)
        if not -len(self) <= index < len(self):
            raise IndexError(f"no sample {index} of {len(self)}")
        return self._catalog.key(index % len(self))

    def __iter__(self) -> Iterator[str]:
        for number in range(len(self._catalog.shards)):
            yield from self._catalog.shard(number).index.keys()

    def take(self, indices: Sequence[int]) -> list[str]:
        """The keys of the samples at ``indices`` (a batch's), worked out a shard at a time."""
        catalog = self._catalog
        numbers, positions = catalog.locate_many(np.asarray(indices, dtype=np.int64))
        keys: list[str] = [""] * len(numbers)
        for number in np.unique(numbers).tolist():
            slots = np.flatnonzero(numbers == number)
            for slot, key in zip(slots.tolist(), catalog.shard(number).index.keys_at(positions[slots])):
                keys[slot] = key
        return keys

    def __eq__(self, other: object) -> bool:  # as the list of keys another storage keeps
        return isinstance(other, Sequence) and not isinstance(other, str) and len(other) == len(self) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]


class LabelColumn(Sequence[Any]):
    """Every sample's label: a Python value one at a time, an array for an index array (the
    Loader's label column), without an object per sample."""

    def __init__(self, catalog: ShardLookup) -> None:
        self._catalog = catalog
        self.dtype = catalog.label_dtype

    def __len__(self) -> int:
        return len(self._catalog)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, np.ndarray):
            return self._take(index.astype(np.int64, copy=False))
        if isinstance(index, slice):
            return [self[position] for position in range(*index.indices(len(self)))]
        index = int(index)
        if not -len(self) <= index < len(self):
            raise IndexError(f"no sample {index} of {len(self)}")
        return self._catalog.label(index % len(self))

    def _take(self, indices: np.ndarray) -> np.ndarray:
        catalog = self._catalog
        out = np.empty(indices.shape, dtype=self.dtype)
        flat = indices.reshape(-1)
        numbers = np.searchsorted(catalog.starts, flat, side="right") - 1
        result = out.reshape(-1)
        for number in np.unique(numbers):
            chosen = numbers == number
            result[chosen] = catalog.shard(int(number)).labels[flat[chosen] - catalog.starts[number]]
        return out

    def __iter__(self) -> Iterator[Any]:
        catalog = self._catalog
        for number in range(len(catalog.shards)):
            index = catalog.shard(number).index
            for position in range(len(index)):
                yield catalog.label_at(number, index, position)

    def __eq__(self, other: object) -> bool:  # as the list of labels another storage keeps
        return isinstance(other, Sequence) and not isinstance(other, str) and len(other) == len(self) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]
