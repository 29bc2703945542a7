"""`PeerFormatStorage`: a dataset written by MosaicML Streaming (MDS) or TensorFlow (TFRecord)
on this machine's disks, read in place, through the same explicit, coalesced reads as tar
shards (a sample's payload is one range of its file); a compressed file is read whole and
inflated once, then held within a bound while its samples are read."""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import ShardError, StorageError
from .._arrow_columns import filter_values, member_columns
from .._column_cache import cached_column
from .._protocol import Storage
from ..local import read_spans
from ..policies import BlockCache
from ._arrow import arrow_column_names, read_arrow_columns
from ._dataset import MAX_RAW_BYTES
from ._detect import local_peer_dataset
from ._mds import mds_column_values

__all__ = ["PeerFormatStorage"]


class PeerFormatStorage(Storage):
    """Samples of a peer's dataset on local disk: MDS shards (a folder with MosaicML's
    ``index.json``), TFRecord files (a folder of them, one file, or a glob), or a Hugging Face
    ``save_to_disk`` folder (its Arrow files).

    The first open of a dataset reads each file once, to find where each sample's payload lies
    and its label (these formats keep labels inside the records); the result is saved in
    stoker's cache folder (``$STOKER_CACHE/formats``), so later opens read nothing of the data.

    Args:
        path: The dataset.
        payload: The field each read returns (default: the obvious one; `fields` says which).
        label: The field of the labels (default: one named like a label, if any; ``""``: none).
        compression: TFRecord only: ``"gzip"`` for files compressed without a ``.gz`` name.
        max_file_bytes: What a compressed file whose index declares no size (gzip TFRecord)
            may inflate to at most; a larger one is an error naming it.
        block_cache_bytes: Inflated compressed files kept in memory.
        max_gap: Largest hole (bytes) read through to merge two reads of one file.
        max_read: Largest merged read (bytes).
        max_concurrent_reads: See `Storage`.

    Raises:
        StorageError: Not a dataset of a format stoker reads, or a file that cannot be read.
        ShardError: A file that does not match its index or is damaged; names it.
        ConfigurationError: A named field that is not there or cannot serve.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        payload: str | None = None,
        label: str | None = None,
        compression: str | None = None,
        max_file_bytes: int = MAX_RAW_BYTES,
        block_cache_bytes: int = 1 << 30,
        max_gap: int = 64 * 1024,
        max_read: int = 8 * 1024 * 1024,
        max_concurrent_reads: int = 16,
    ) -> None:
        super().__init__(max_concurrent_reads)
        self.root, self.dataset = local_peer_dataset(path, payload, label, compression)
        self.dataset.max_raw_bytes = max_file_bytes
        self.format = self.dataset.format
        self.max_gap, self.max_read = max_gap, max_read
        self.block_cache_bytes = block_cache_bytes
        self._inflated: OrderedDict[int, bytes | memoryview] = OrderedDict()
        self._inflated_bytes = 0
        self.table = self.dataset.saved(str(self.root)) or self.dataset.build(
            self._scan(number) for number in range(len(self.dataset.files))
        )
        self._keys = self.table.keys
        self._labels = self.table.labels  # type: ignore[assignment]  # an array, as label_array takes it
        self._file_numbers = {file.name: number for number, file in enumerate(self.dataset.files)}
        assert self.dataset.fields is not None  # chosen by the scan or loaded with the table
        self.fields = self.dataset.fields
        self.classes = self.dataset.classes
        self._column_names: list[str] | None = None  # read on first use; two threads at once read the same names
        # other columns (`try_read_members`) by file, within a quarter of the inflated-file bound
        self._member_cache = BlockCache(max(1, block_cache_bytes // 4), size_of=lambda table: int(table.nbytes))

    def _path(self, number: int) -> Path:
        return self.root / self.dataset.files[number].name if self.root.is_dir() else self.root

    def _raw(self, number: int) -> bytes | memoryview:
        """File ``number``'s raw bytes, whole (read and inflated if compressed)."""
        path = self._path(number)
        try:
            stored = path.read_bytes()
        except OSError as error:
            raise StorageError(f"{path}: cannot be read ({error})") from error
        return self.dataset.raw(number, stored, str(path))

    def _scan(self, number: int) -> Any:
        return self.dataset.scan(number, self._raw(number), str(self._path(number)))

    def _held_raw(self, number: int) -> bytes | memoryview:
        """A compressed file's inflated bytes, from memory or read now (then held, the least
        recently used let go past ``block_cache_bytes``)."""
        with self._lock:
            data = self._inflated.get(number)
            if data is not None:
                self._inflated.move_to_end(number)
                return data
        data = self._raw(number)
        with self._lock:
            if number not in self._inflated:
                self._inflated[number] = data
                self._inflated_bytes += len(data)
            while self._inflated_bytes > self.block_cache_bytes and len(self._inflated) > 1:
                _, dropped = self._inflated.popitem(last=False)
                self._inflated_bytes -= len(dropped)
        return data

    def _read_indices(self, indices: Sequence[int]) -> list[bytes | Exception]:
        results: list[bytes | Exception | None] = [None] * len(indices)
        wanted = np.asarray(indices, dtype=np.int64)
        for number, slots in self.table.by_file(indices).items():
            chosen = wanted[slots]
            spans = list(zip(self.table.offsets[chosen].tolist(), self.table.lengths[chosen].tolist()))
            if self.dataset.files[number].compression is None:
                # names are made only for a read that fails: a string per sample costs as much as its read
                names = _SampleNames(self, chosen)
                data: list[bytes | Exception] = read_spans(
                    self._path(number), spans, names, max_gap=self.max_gap, max_read=self.max_read, error_type=ShardError
                )
                for slot, result in zip(slots.tolist(), data):
                    results[slot] = result
                continue
            try:
                raw = self._held_raw(number)
            except StorageError as error:
                for slot in slots.tolist():
                    results[slot] = type(error)(f"{self.sample_name(indices[slot])}: {error}")
                continue
            for slot, (offset, length) in zip(slots.tolist(), spans):
                results[slot] = bytes(raw[offset : offset + length])
        return results  # type: ignore[return-value]

    def sample_name(self, index: int) -> str:
        """``path/file#position``: where the sample lives, for messages."""
        number, position = self.table.locate(index)
        return f"{self._path(number)}#{position}"

    def index_of(self, key: str) -> int:
        """Position of ``key`` (``file#position``), without a table of every key.

        Raises:
            KeyError: No such sample.
        """
        name, _, position = key.rpartition("#")
        number = self._file_numbers.get(name)
        if number is not None and position.isdigit():
            index = int(self.table.starts[number]) + int(position)
            if index < int(self.table.starts[number + 1]):
                return index
        raise KeyError(f"{self.describe()}: no sample with key {key!r}")

    def content_digest(self) -> str:
        """What the dataset holds (its own index, its files' stamps, the fields read), in
        constant time: the Loader's fingerprint for exact resume."""
        return self.dataset.key

    def describe(self) -> str:
        return str(self.root)

    def read_values(self, name: str) -> np.ndarray:
        """Every sample's value in the column ``name``, for a filter (`Sampling(where=...)`): a
        ``save_to_disk`` folder's Arrow columns as Parquet's are read (`filter_values`: numbers
        as float64, text and the rest as objects), the column alone, mapped from each file; an
        MDS column (numbers as float64, ``str`` columns as text), whose first use reads every
        shard once and is then kept in the cache folder under the dataset's digest.

        Raises:
            StorageError: TFRecord or LitData records (stoker reads one field of them), no such
                column, or an MDS column of payloads (images, bytes, arrays, JSON), each named.
            ShardError: A damaged file, named.
        """
        if self.format == "datasets":
            self._check_columns([name])
            parts = [
                filter_values(read_arrow_columns(str(self._path(number)), [name]).column(name)) for number in range(len(self.dataset.files))
            ]
            return np.concatenate(parts) if parts else np.zeros(0)
        layout = self.dataset.mds
        if self.format != "mds" or layout is None:
            raise StorageError(
                f"{self.describe()}: stoker reads no columns of {self.format} records for a filter (it reads those of MDS, Parquet and "
                "save_to_disk folders); give them as Where(expression, table=...)"
            )
        if name not in layout.columns:
            raise StorageError(f"{self.describe()}: no column {name!r} (columns: {', '.join(layout.columns)})")

        def every_shard() -> np.ndarray:
            parts = [
                mds_column_values(layout, file, self._raw(number), str(self._path(number)), name)
                for number, file in enumerate(self.dataset.files)
            ]
            return np.concatenate(parts) if parts else np.zeros(0)

        return cached_column(self.content_digest(), "mds", name, len(self), every_shard)

    def column_classes(self, name: str) -> list[str] | None:
        """The class names of column ``name`` where it is a ``ClassLabel`` of a ``save_to_disk``
        folder (from its ``dataset_info.json``), so a filter may name a class: ``label == 'cat'``."""
        return self.dataset.class_names.get(name)

    def column_names(self) -> list[str]:
        """A ``save_to_disk`` folder's columns (its first Arrow file's), read once; none for
        the other formats (MDS's are in ``dataset.mds.columns``).

        Raises:
            ShardError: The first Arrow file is not one, named.
        """
        if self.format != "datasets":
            return []
        if self._column_names is None:
            self._column_names = arrow_column_names(str(self._path(0))) if self.dataset.files else []
        return self._column_names

    def _check_columns(self, names: Sequence[str]) -> None:
        missing = [name for name in names if name not in self.column_names()]
        if missing:
            raise StorageError(f"{self.describe()}: no column {missing[0]!r} (columns: {', '.join(self.column_names())})")

    def try_read_members(self, indices: Sequence[int], extensions: Sequence[str]) -> list[dict[str, Any] | Exception]:
        """Other columns of each sample of a ``save_to_disk`` folder (``extra=("text",)``), as a
        Parquet file's are read (`member_columns`): ``{column: value}``, an Arrow file's columns
        at a time; an exception in place of a sample whose column is null or missing.

        Raises:
            StorageError: MDS, LitData or TFRecord records: stoker reads one field of them (the
                payload), so ``extra=`` is refused when the Loader is made, saying so.
        """
        if self.format != "datasets":
            raise StorageError(
                f"{self.describe()}: stoker reads one field of {self.format} records (payload={self.fields.payload!r}); extra= reads "
                "other columns of Parquet files and save_to_disk folders, and members of tar shards"
            )
        return member_columns(
            indices,
            extensions,
            available=self.column_names(),
            where=self.describe(),
            locate=lambda index: self.table.locate(index),
            load=lambda number, columns: read_arrow_columns(str(self._path(int(number))), columns),
            cache=self._member_cache,
            row_name=lambda number, position: f"{self._path(int(number))}#{position}",
            block_name=lambda number: str(self._path(int(number))),
        )

    # ---- blocks: a file is a block -------------------------------------------------------

    def block_sizes(self) -> list[int]:
        """Samples per file: the block shuffle reads a few files at a time."""
        return self.table.samples_per_file()

    def max_open_blocks(self) -> int | None:
        """Compressed files: how many fit in ``block_cache_bytes``; raw ones: no bound."""
        sizes = [file.raw_bytes or 0 for file in self.dataset.files if file.compression is not None]
        if not sizes:
            return None
        return max(1, self.block_cache_bytes // max(1, sum(sizes) // len(sizes)))

    def stream_blocks(self) -> None:
        """Nothing to change: compressed files are always read whole, raw ones by range."""

    def prefetch_blocks(self, blocks: Sequence[int]) -> None:
        """Local reads are fast: nothing is read ahead."""


class _SampleNames(Sequence[str]):
    """The names of a batch's samples in one file, each made when asked for (on a failed read)."""

    def __init__(self, storage: PeerFormatStorage, indices: np.ndarray) -> None:
        self._storage, self._indices = storage, indices

    def __len__(self) -> int:
        return len(self._indices)

    def __getitem__(self, position: Any) -> Any:
        if isinstance(position, slice):
            return [self[item] for item in range(*position.indices(len(self)))]
        return self._storage.sample_name(int(self._indices[position]))
