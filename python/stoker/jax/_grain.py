"""Grain and stoker, both ways: a stoker storage as a Grain random-access data source (Grain's
pipelines and checkpoints over stoker's formats and stores), and a Grain data source as a
stoker storage (stoker's Loader over what a Grain user already has)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..errors import StorageError
from ..storage import Storage, open_storage

__all__ = ["GrainStorage", "StorageSource"]


class StorageSource:
    """A stoker storage as a Grain ``RandomAccessDataSource``: ``len`` and ``source[i]``, the
    bytes of sample ``i`` in storage order (``grain.MapDataset.source(StorageSource(...))``).

    Reads are the storage's own (its retries, its node cache); Grain's shuffling, sharding and
    iterator checkpoints (``get_state``/``set_state``) work on the positions, which a storage
    keeps fixed, so a Grain checkpoint over it resumes exactly.

    Args:
        storage: A `Storage`, or a path or URL `stoker.storage.open_storage` opens.
    """

    def __init__(self, storage: Storage | str) -> None:
        self.storage = storage if isinstance(storage, Storage) else open_storage(storage)

    def __len__(self) -> int:
        return len(self.storage)

    def __getitem__(self, index: int) -> bytes:
        """The bytes of the sample at ``index`` (a negative one counts from the end).

        Raises:
            IndexError: Outside the storage.
            StorageError: The read failed (the message names the sample).
        """
        size = len(self.storage)
        position = index + size if index < 0 else index
        if not 0 <= position < size:
            raise IndexError(f"index {index} outside {self.storage.describe()} ({size} samples)")
        (data,) = self.storage.read_indices([position])
        assert data is not None  # on_error="raise"
        return data

    def __repr__(self) -> str:
        # Grain names a source by its repr in its statistics and errors.
        return f"StorageSource({self.storage.describe()})"


class GrainStorage(Storage):
    """A Grain data source (anything with ``len`` and ``source[i]``, such as an
    ``ArrayRecordDataSource``) as a stoker storage, for stoker's Loader: its records are the
    samples, keyed by position (``"00000042"``), with no labels.

    Args:
        source: The Grain ``RandomAccessDataSource``.
        to_bytes: Turns a record into the sample's bytes; needed where records are not bytes.
        name: How errors and logs name it (default: the source's repr).

    Raises:
        TypeError: ``source`` has no ``len`` or no ``__getitem__``.
    """

    def __init__(self, source: Any, *, to_bytes: Callable[[Any], bytes] | None = None, name: str | None = None) -> None:
        super().__init__()
        if not hasattr(source, "__len__") or not hasattr(source, "__getitem__"):
            raise TypeError(f"a Grain data source has len() and source[i]; got {type(source).__name__}")
        self.source = source
        self.to_bytes = to_bytes
        self._name = name or repr(source)
        size = len(source)
        width = max(8, len(str(size)))
        self._keys = [f"{index:0{width}d}" for index in range(size)]
        self._labels = [None] * size

    def _read_indices(self, indices: Sequence[int]) -> list[bytes | Exception]:
        results: list[bytes | Exception] = []
        for index in indices:
            try:
                record = self.source[int(index)]
                data = self.to_bytes(record) if self.to_bytes is not None else record
                if not isinstance(data, (bytes, bytearray, memoryview)):
                    raise TypeError(f"the record is a {type(data).__name__}, not bytes: give GrainStorage(to_bytes=...)")
                results.append(bytes(data))
            except Exception as error:  # one record's failure is its slot's, named; the others are read
                results.append(StorageError(f"{self._name}: record {self._keys[index]!r}: {type(error).__name__}: {error}"))
        return results

    def describe(self) -> str:
        return self._name
