"""`ArrayRecordStorage`: Grain's ArrayRecord files read in place, through the ``array_record``
package's own reader (Google's C++ library: ArrayRecord is Riegeli, chunks compressed together,
so a record is not a byte range of the file and a reader of the format is needed).

A record is either a serialized ``tf.train.Example`` (how most ArrayRecord datasets are made,
converted from TFRecord), whose payload and label features a read takes apart as for TFRecord,
or opaque bytes, returned whole (no labels). Which it is, is seen from the first record. The
labels of Example records are read once, in one pass over the files, and saved in stoker's
cache folder as for the other formats; opaque records need no pass (the counts are in the
files' footers).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..._bounded import matching_files
from ...errors import ShardError, StorageError
from .._protocol import Storage
from ._fields import FieldChoice, choose_fields
from ._records import FileRecords, RecordFile, RecordTable, load_table, save_table, table_key
from ._tfrecord import example_features, first_bytes, first_number

__all__ = ["ARRAY_RECORD_SUFFIX", "ArrayRecordStorage"]

ARRAY_RECORD_SUFFIX = ".array_record"


def _reader_class() -> Any:
    try:
        from array_record.python.array_record_module import ArrayRecordReader
    except ImportError as error:
        raise StorageError("reading ArrayRecord files needs Google's array_record package: pip install array-record") from error
    return ArrayRecordReader


def array_record_files(path: str | os.PathLike[str]) -> tuple[Path, list[Path]]:
    """The folder names are relative to, and the files (a folder's ``*.array_record*`` files,
    one file, or a glob), in name order."""
    text = str(path)
    if any(character in text for character in "*?["):
        files = matching_files(text)
        return (files[0].parent if files else Path(".")), files
    location = Path(path)
    if location.is_file():
        return location.parent, [location]
    return location, sorted(entry for entry in location.iterdir() if entry.is_file() and ARRAY_RECORD_SUFFIX in entry.name)


class ArrayRecordStorage(Storage):
    """Samples of ArrayRecord files on local disk.

    Args:
        path: A folder of ``*.array_record`` files (also ``-00000-of-00008`` names), one file,
            or a glob.
        payload: The Example feature each read returns (default: the obvious one); ignored for
            opaque records, which are returned whole.
        label: The Example feature of the labels (default: one named like a label; ``""``: none).
        max_concurrent_reads: See `Storage`.

    Raises:
        StorageError: No ArrayRecord files, the package missing, a file that does not open;
            names the file.
        ShardError: A record that breaks the first record's pattern (an Example without the
            payload feature); names the file and the record.
    """

    def __init__(
        self, path: str | os.PathLike[str], *, payload: str | None = None, label: str | None = None, max_concurrent_reads: int = 16
    ) -> None:
        super().__init__(max_concurrent_reads)
        self._readers: dict[int, Any] = {}
        try:
            self._open(path, payload, label)
        except BaseException:
            self.close()
            raise

    def _open(self, path: str | os.PathLike[str], payload: str | None, label: str | None) -> None:
        self.root, paths = array_record_files(path)
        if not paths:
            raise StorageError(f"{path}: no ArrayRecord files")
        self.paths = paths
        self.format = "array_record"
        self._reader_locks = [threading.Lock() for _ in paths]
        counts = [self._reader(number).num_records() for number in range(len(paths))]
        first = next((number for number, count in enumerate(counts) if count), None)
        sample = self._read(first, [0])[0] if first is not None else b""
        features = self._features(sample)
        files = [RecordFile(str(file.relative_to(self.root)), file.stat().st_size, None, None, count) for file, count in zip(paths, counts)]
        if features is None:  # opaque records: each read returns the record whole
            self.fields = FieldChoice("(the whole record)", None, True)
            starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
            total = int(starts[-1])
            self.table = RecordTable(files, starts, np.zeros(total, np.int64), np.full(total, -1, np.int64), np.full(total, -1, np.int64))
        else:
            payloads = [name for name, value in features.items() if value.kind == "bytes"]
            labels = [name for name, value in features.items() if value.kind != "bytes"]
            self.fields = choose_fields(list(features), payloads, labels, payload, label, str(paths[first or 0]))
            key = table_key(
                "array_record",
                str(self.root.resolve()),
                [[file.name, file.stored_bytes, str(Path(self.root / file.name).stat().st_mtime_ns)] for file in files],
                [self.fields.payload, self.fields.label],
            )
            table = load_table(key, files, [None] * len(files), str(self.root))
            if table is None:
                table = RecordTable.join(files, [self._scan(number) for number in range(len(paths))])
                save_table(key, table)
            self.table = table
        self.whole = features is None
        self._keys = self.table.keys
        self._labels = self.table.labels  # type: ignore[assignment]  # an array, as label_array takes it

    def _reader(self, number: int) -> Any:
        reader = self._readers.get(number)
        if reader is None:
            try:
                reader = _reader_class()(str(self.paths[number]))
            except StorageError:
                raise
            except Exception as error:  # its own error types: a file that is not ArrayRecord
                raise StorageError(f"{self.paths[number]}: not an ArrayRecord file ({error})") from error
            if not reader.ok():  # it opens anything, and says so only here (and on a read, in words)
                try:
                    reader.read([0])
                    why = "its reader is not ok"
                except Exception as error:
                    why = str(error)
                raise StorageError(f"{self.paths[number]}: not an ArrayRecord file ({why})")
            self._readers[number] = reader
        return reader

    def _read(self, number: int, positions: Sequence[int]) -> list[bytes]:
        with self._reader_locks[number]:  # one reader per file; its reads are not made for threads
            try:
                return list(self._reader(number).read(list(positions)))
            except StorageError:
                raise
            except Exception as error:
                raise ShardError(f"{self.paths[number]}: records {list(positions)[:4]}... do not read ({error})") from error

    @staticmethod
    def _features(record: bytes) -> dict[str, Any] | None:
        """The record's Example features, or None when it is not an Example with a bytes feature."""
        try:
            features = example_features(record, 0, len(record))
        except ValueError:
            return None
        return features if any(value.kind == "bytes" for value in features.values()) else None

    def _scan(self, number: int) -> FileRecords:
        count = self._reader(number).num_records()
        offsets, lengths = np.zeros(count, np.int64), np.zeros(count, np.int64)
        labels: list[int | float] = []
        for start in range(0, count, 4096):
            for position, record in enumerate(self._read(number, range(start, min(count, start + 4096))), start=start):
                offsets[position], lengths[position], label = self._locate(record, f"{self.paths[number]} record {position}")
                labels.append(label)
        floats = any(isinstance(value, float) for value in labels)
        return FileRecords(
            offsets, lengths, np.array(labels, dtype=np.float64 if floats else np.int64) if labels else np.zeros(0, np.int64)
        )

    def _locate(self, record: bytes, name: str) -> tuple[int, int, int | float]:
        """Where the payload lies in one Example record, and its label (-1: none)."""
        try:
            features = example_features(record, 0, len(record))
            payload = features.get(self.fields.payload)
            if payload is None or payload.kind != "bytes":
                raise ValueError(f"no bytes feature {self.fields.payload!r}")
            offset, length = first_bytes(record, payload)
            label: int | float = -1
            if self.fields.label is not None:
                feature = features.get(self.fields.label)
                if feature is None or feature.kind == "bytes":
                    raise ValueError(f"no number feature {self.fields.label!r}")
                label = first_number(record, feature)
        except ValueError as error:
            raise ShardError(f"{name}: {error}") from error
        return offset, length, label

    def _read_indices(self, indices: Sequence[int]) -> list[bytes | Exception]:
        results: list[bytes | Exception | None] = [None] * len(indices)
        for number, grouped in self.table.by_file(indices).items():
            slots = grouped.tolist()
            positions = [self.table.locate(indices[slot])[1] for slot in slots]
            try:
                records = self._read(number, positions)
            except StorageError as error:
                for slot in slots:
                    results[slot] = type(error)(f"{self.sample_name(indices[slot])}: {error}")
                continue
            for slot, record in zip(slots, records):
                index = indices[slot]
                if self.whole:
                    results[slot] = record
                    continue
                offset, length = int(self.table.offsets[index]), int(self.table.lengths[index])
                if offset + length > len(record):
                    results[slot] = ShardError(
                        f"{self.sample_name(index)}: the record changed since it was indexed (its payload is past its end)"
                    )
                else:
                    results[slot] = record[offset : offset + length]
        return results  # type: ignore[return-value]

    def sample_name(self, index: int) -> str:
        number, position = self.table.locate(index)
        return f"{self.paths[number]}#{position}"

    def describe(self) -> str:
        return str(self.root)

    def block_sizes(self) -> list[int]:
        """Records per file: the block shuffle reads a few files at a time."""
        return self.table.samples_per_file()

    def max_open_blocks(self) -> int | None:
        return None

    def stream_blocks(self) -> None:
        """Nothing to change: the reader reads its chunks as it needs them."""

    def prefetch_blocks(self, blocks: Sequence[int]) -> None:
        """Local reads: nothing is read ahead."""

    def close(self) -> None:
        for number, reader in list(self._readers.items()):
            with self._reader_locks[number], contextlib.suppress(Exception):  # a reader that failed raises again here
                reader.close()
        self._readers.clear()
        super().close()
