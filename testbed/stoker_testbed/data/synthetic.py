"""A storage of N tiny samples made without I/O, for epochs of millions to billions (the epoch
scale tests and `benchmarks/loader/epoch_scale.py`): keys made when asked for, labels as one array, a
content digest in constant time, and a sample's bytes computed from its index."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from stoker.storage import Storage

__all__ = ["SyntheticStorage", "free_decode"]


def free_decode(data: bytes) -> int:
    """Decode made free: only the loader's own work is left to measure."""
    return 0


class _Keys(Sequence[str]):
    """``sample-<index>``, made when asked for: no string per sample is ever held."""

    def __init__(self, size: int) -> None:
        self._size = size

    def __len__(self) -> int:
        return self._size

    def __getitem__(self, index: int) -> str:  # type: ignore[override]
        if isinstance(index, slice):
            return [self[position] for position in range(*index.indices(self._size))]  # type: ignore[return-value]
        if not -self._size <= index < self._size:
            raise IndexError(index)
        return f"sample-{index % self._size}"

    def __iter__(self) -> Iterator[str]:
        return (f"sample-{index}" for index in range(self._size))


class _Labels(Sequence[int]):
    """index % 10, computed: one at a time, or for an index array (the Loader's label column)."""

    dtype = np.dtype(np.int64)

    def __init__(self, size: int) -> None:
        self._size = size

    def __len__(self) -> int:
        return self._size

    def __getitem__(self, index: Any) -> Any:  # type: ignore[override]
        if isinstance(index, np.ndarray):
            return index.astype(np.int64) % 10
        if isinstance(index, slice):
            return [position % 10 for position in range(*index.indices(self._size))]
        if not -self._size <= index < self._size:
            raise IndexError(index)
        return int(index) % self._size % 10

    def __iter__(self) -> Iterator[int]:
        return (index % 10 for index in range(self._size))


class SyntheticStorage(Storage):
    """``size`` samples whose bytes are their index (8 bytes, little-endian); label = index % 10."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self._keys = _Keys(size)
        self._labels = _Labels(size)
        self._size = size

    def __len__(self) -> int:
        return self._size

    def describe(self) -> str:
        return f"{self._size:,} synthetic samples"

    def content_digest(self) -> str:
        return hashlib.blake2b(f"synthetic:{self._size}".encode(), digest_size=12).hexdigest()

    def _read_indices(self, indices: Sequence[int]) -> list[bytes | Exception]:
        return [int(index).to_bytes(8, "little") for index in indices]
