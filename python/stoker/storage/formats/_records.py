"""Where each sample of a peer's dataset lies: the files, and per sample the payload's offset and
length inside its file's raw (decompressed) bytes and its label, as a few arrays.

A format's parser (`_mds.py`, `_tfrecord.py`) turns one file's raw bytes into `FileRecords`; a
`RecordTable` joins them. The table is built once per dataset (the peers' formats keep their
labels inside each record, so a dataset's labels are known only after a pass over its files)
and saved in stoker's cache folder, keyed by what the dataset's own index says, so every later
open (other ranks, other runs) reads the saved arrays, memory-mapped, and nothing of the data.
A saved table is untrusted input: it is checked against the files before it is used.
"""

from __future__ import annotations

import bisect
import hashlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import StorageError
from .._cache import cache_dir

__all__ = ["FileRecords", "RecordFile", "RecordTable"]

_TABLE_VERSION = 1


@dataclass(frozen=True)
class RecordFile:
    """One file of a dataset as its own index describes it.

    Attributes:
        name: The file's path relative to the dataset (what keys and messages name).
        stored_bytes: Its size as stored (None: not declared; then not checked).
        raw_bytes: Its size once decompressed (None: not declared; bounded by ``max_raw_bytes``).
        compression: ``None``, ``"zstd"`` or ``"gzip"``: a compressed file is read whole.
        samples: Samples its index declares (None: counted by the scan).
    """

    name: str
    stored_bytes: int | None = None
    raw_bytes: int | None = None
    compression: str | None = None
    samples: int | None = None


@dataclass(frozen=True)
class FileRecords:
    """One file's samples: payload ``offsets`` and ``lengths`` in its raw bytes, and labels
    (int64, -1 for none; or float64, NaN for none)."""

    offsets: np.ndarray
    lengths: np.ndarray
    labels: np.ndarray


class _Keys(Sequence[str]):
    """``file#position`` for each sample, made when asked for: no string per sample is held."""

    def __init__(self, table: RecordTable) -> None:
        self._table = table

    def __len__(self) -> int:
        return len(self._table)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[position] for position in range(*index.indices(len(self)))]
        number, position = self._table.locate(int(index))
        return f"{self._table.files[number].name}#{position}"

    def __iter__(self) -> Iterator[str]:
        for number, file in enumerate(self._table.files):
            for position in range(int(self._table.starts[number + 1] - self._table.starts[number])):
                yield f"{file.name}#{position}"


class RecordTable:
    """Every sample of a dataset: which file, where its payload lies, its label.

    Args:
        files: The files, in the dataset's order.
        records: Each file's `FileRecords`, aligned with ``files``.
    """

    def __init__(self, files: Sequence[RecordFile], starts: np.ndarray, offsets: np.ndarray, lengths: np.ndarray, labels: np.ndarray):
        self.files = list(files)
        self.starts = starts
        self.offsets = offsets
        self.lengths = lengths
        self.labels = labels
        self._first = [int(value) for value in starts[:-1]]  # one int per file, for bisect
        self.keys: Sequence[str] = _Keys(self)

    @classmethod
    def join(cls, files: Sequence[RecordFile], records: Sequence[FileRecords]) -> RecordTable:
        """One table of each file's records, in order."""
        counts = np.array([len(record.offsets) for record in records], dtype=np.int64)
        starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        floats = any(record.labels.dtype.kind == "f" for record in records)
        label_type = np.float64 if floats else np.int64
        empty = np.zeros(0, dtype=np.int64)
        return cls(
            files,
            starts,
            np.concatenate([record.offsets.astype(np.int64) for record in records] or [empty]),
            np.concatenate([record.lengths.astype(np.int64) for record in records] or [empty]),
            np.concatenate([record.labels.astype(label_type) for record in records] or [empty.astype(label_type)]),
        )

    def __len__(self) -> int:
        return int(self.starts[-1])

    def locate(self, index: int) -> tuple[int, int]:
        """``(file number, position in that file)`` of the sample at ``index``."""
        number = bisect.bisect_right(self._first, index) - 1
        return number, index - self._first[number]

    def span(self, index: int) -> tuple[int, int, int]:
        """``(file number, offset, length)`` of the sample's payload in its file's raw bytes."""
        number, _ = self.locate(index)
        return number, int(self.offsets[index]), int(self.lengths[index])

    def by_file(self, indices: Sequence[int]) -> dict[int, np.ndarray]:
        """The places in ``indices`` (a batch's samples) grouped by file number, in order of
        file: each file is then opened and read once per batch. Array operations: no Python
        object per sample."""
        wanted = np.asarray(indices, dtype=np.int64)
        numbers = np.searchsorted(self.starts, wanted, side="right") - 1
        order = np.argsort(numbers, kind="stable")
        files, firsts = np.unique(numbers[order], return_index=True)
        return {int(number): slots for number, slots in zip(files, np.split(order, firsts[1:]))}

    def samples_per_file(self) -> list[int]:
        """Samples in each file, in order."""
        return [int(count) for count in np.diff(self.starts)]

    def label_values(self) -> np.ndarray:
        """The labels, int64 (-1: none) or float64 (NaN: none)."""
        return self.labels

    # ---- the saved table ----------------------------------------------------------------

    def check(self, raw_sizes: Sequence[int | None], source: str) -> None:
        """Refuse a table whose spans leave their files (a saved table is untrusted input).

        Raises:
            StorageError: A span past its file's end, a negative offset or length, or arrays of
                different lengths; the message names ``source``.
        """
        count = len(self)
        if not (len(self.offsets) == len(self.lengths) == len(self.labels) == count) or len(self.starts) != len(self.files) + 1:
            raise StorageError(f"{source}: a saved index whose arrays do not match ({count} samples)")
        if count and (int(self.offsets.min()) < 0 or int(self.lengths.min()) < 0):
            raise StorageError(f"{source}: a saved index with a negative offset or length")
        if np.any(np.diff(self.starts) < 0):
            raise StorageError(f"{source}: a saved index whose files overlap")
        ends = self.offsets + self.lengths
        for number, size in enumerate(raw_sizes):
            low, high = int(self.starts[number]), int(self.starts[number + 1])
            if size is not None and high > low and int(ends[low:high].max()) > size:
                raise StorageError(f"{source}: a saved index reaching past the end of {self.files[number].name}")


def table_key(*parts: Any) -> str:
    """The name a dataset's saved table goes under: a digest of what identifies it (where it
    is, what its own index says, the fields chosen), so a changed dataset gets a new table."""
    digest = hashlib.sha256(json.dumps([_TABLE_VERSION, *parts], sort_keys=True, default=str).encode()).hexdigest()
    return digest[:32]


def load_table(key: str, files: Sequence[RecordFile], raw_sizes: Sequence[int | None], source: str) -> RecordTable | None:
    """The table saved under ``key``, memory-mapped and checked, or None if there is none (or
    it cannot be read: it is then built again)."""
    folder = cache_dir("formats") / key
    try:
        arrays = {
            name: np.load(folder / f"{name}.npy", mmap_mode="r", allow_pickle=False) for name in ("starts", "offsets", "lengths", "labels")
        }
    except (OSError, ValueError):
        return None
    if any(array.ndim != 1 for array in arrays.values()) or arrays["labels"].dtype.kind not in "if":
        return None
    if arrays["starts"].dtype.kind != "i" or arrays["offsets"].dtype.kind != "i" or arrays["lengths"].dtype.kind != "i":
        return None
    if len(arrays["starts"]) != len(files) + 1 or (len(files) and int(arrays["starts"][0]) != 0):
        return None
    table = RecordTable(files, np.asarray(arrays["starts"]), arrays["offsets"], arrays["lengths"], arrays["labels"])
    table.check(raw_sizes, f"{source} (the index saved at {folder})")
    return table


def save_table(key: str, table: RecordTable) -> Path:
    """Save ``table`` under ``key`` (each array written beside, then renamed into place: a
    reader never sees half a table)."""
    folder = cache_dir("formats", key)
    for name in ("starts", "offsets", "lengths", "labels"):
        partial = folder / f"{name}.partial.npy"
        np.save(partial, np.ascontiguousarray(getattr(table, name)), allow_pickle=False)
        partial.replace(folder / f"{name}.npy")
    return folder
