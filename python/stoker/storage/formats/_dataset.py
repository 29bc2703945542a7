"""A peer's dataset before its samples are known: its files, the fields chosen, and how one of
its files' raw bytes become `FileRecords`. What local and object-store reads share: finding the
saved table, or building it from the files' bytes however they are fetched, and saving it."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..._bounded import MAX_METADATA_BYTES, read_json, shown_logger
from ...errors import ShardError, StorageError
from ._arrow import arrow_fields, hf_arrow_files, hf_class_names, scan_arrow
from ._fields import FieldChoice
from ._inflate import inflate
from ._litdata import parse_litdata_index, scan_litdata_chunk
from ._mds import MdsLayout, parse_mds_index, scan_mds_shard
from ._records import FileRecords, RecordFile, RecordTable, load_table, save_table, table_key
from ._tfrecord import scan_tfrecord, tfrecord_fields

_logger = shown_logger("stoker.storage")

__all__ = ["MAX_RAW_BYTES", "PeerDataset", "hf_dataset", "indexed_dataset", "litdata_dataset", "mds_dataset", "tfrecord_dataset"]

MAX_RAW_BYTES = 8 << 30
"""What a compressed file may inflate to at most, and what its index may declare (a file is held
whole once inflated, so a declared size sizes memory: 2**62 in an MDS index is refused by name,
not allocated)."""


@dataclass
class PeerDataset:
    """A dataset written by another tool.

    Attributes:
        format: ``"mds"``, ``"litdata"``, ``"tfrecord"`` or ``"datasets"`` (Hugging Face
            ``save_to_disk``).
        files: Its files, in order.
        identity: What identifies it for its saved table (its location and its own index).
        fields: The payload and label fields (a TFRecord dataset's are chosen from its first
            record, so None until then).
    """

    format: str
    files: list[RecordFile]
    identity: list[Any]
    fields: FieldChoice | None
    mds: MdsLayout | None = None
    wanted: tuple[str | None, str | None] = (None, None)
    max_raw_bytes: int = MAX_RAW_BYTES
    class_names: dict[str, list[str]] = field(default_factory=dict)
    table: RecordTable | None = field(default=None, repr=False)

    def stamp(self, stamps: Sequence[Any]) -> None:
        """Add each file's modification stamp (time, ETag) to its identity: a file rewritten in
        place, even to the same size, then gets a table of its own."""
        self.identity.append([str(stamp) for stamp in stamps])

    @property
    def key(self) -> str:
        return table_key(self.format, self.identity, self.wanted, [file.name for file in self.files])

    def raw(self, number: int, stored: bytes | memoryview, name: str) -> bytes | memoryview:
        """File ``number``'s raw bytes from its stored bytes: inflated within its declared
        size, or checked against it.

        Raises:
            ShardError: Shorter (or longer) than its index declares, a declared size over
                ``max_raw_bytes``, or it does not inflate.
        """
        file = self.files[number]
        if file.compression is not None and file.raw_bytes is not None and file.raw_bytes > self.max_raw_bytes:
            raise ShardError(
                f"{name}: its index declares {file.raw_bytes:,} bytes once inflated, over the {self.max_raw_bytes:,} stoker holds "
                "(max_file_bytes)"
            )
        if file.compression is not None:
            data: bytes | memoryview = inflate(
                stored, file.compression, file.raw_bytes if file.raw_bytes is not None else self.max_raw_bytes, name
            )
        else:
            data = stored
        if file.raw_bytes is not None and len(data) != file.raw_bytes:
            raise ShardError(f"{name}: {len(data)} bytes, its index declares {file.raw_bytes} (truncated or rewritten?)")
        return data

    def scan(self, number: int, raw: bytes | memoryview, name: str) -> FileRecords:
        """File ``number``'s samples from its raw bytes (the first file scanned chooses the
        fields where the format's index does not say them)."""
        if self.format in ("mds", "litdata"):
            assert self.mds is not None
            scan_file = scan_mds_shard if self.format == "mds" else scan_litdata_chunk
            return scan_file(self.mds, self.files[number], raw, name)
        choose, scan = (tfrecord_fields, scan_tfrecord) if self.format == "tfrecord" else (arrow_fields, scan_arrow)
        if self.fields is None:
            self.fields = choose(raw, name, *self.wanted)
        offsets, lengths, labels = scan(raw, self.fields, name)
        return FileRecords(offsets, lengths, labels)

    @property
    def classes(self) -> list[str] | None:
        """The label field's class names, where the dataset names them (a ``ClassLabel``)."""
        if self.fields is None or self.fields.label is None:
            return None
        return self.class_names.get(self.fields.label)

    def saved(self, source: str) -> RecordTable | None:
        """The table saved by an earlier open, checked, or None."""
        try:
            table = load_table(self.key, self.files, [file.raw_bytes for file in self.files], source)
        except StorageError as error:  # damaged or tampered with: the data says what is true
            _logger.warning("%s; it is built again from the data", error)
            return None
        if table is not None and self.fields is None:
            self.fields = _load_fields(self.key)
            if self.fields is None:
                return None
        return table

    def build(self, records: Iterable[FileRecords]) -> RecordTable:
        """The table of every file's records (in file order), saved for later opens."""
        table = RecordTable.join(self.files, list(records))
        folder = save_table(self.key, table)
        if self.fields is not None:
            (folder / "fields.json").write_text(json.dumps([self.fields.payload, self.fields.label, self.fields.picked]))
        return table


def _load_fields(key: str) -> FieldChoice | None:
    from .._cache import cache_dir

    try:
        payload, label, picked = read_json(
            cache_dir("formats") / key / "fields.json", what="a saved table's fields", max_bytes=MAX_METADATA_BYTES
        )
    except (OSError, ValueError, TypeError):  # missing or damaged: the table is built again
        return None
    if not isinstance(payload, str) or not (label is None or isinstance(label, str)):
        return None
    return FieldChoice(payload, label, bool(picked))


def mds_dataset(index: bytes, location: str, source: str, payload: str | None, label: str | None) -> PeerDataset:
    """An MDS dataset from its ``index.json`` (see `parse_mds_index`)."""
    layout = parse_mds_index(index, source, payload, label)
    return PeerDataset("mds", layout.files, [location, index.decode("utf-8", "replace")], layout.fields, layout, (payload, label))


def litdata_dataset(index: bytes, location: str, source: str, payload: str | None, label: str | None) -> PeerDataset:
    """A LitData dataset from its ``index.json`` (see `parse_litdata_index`)."""
    layout = parse_litdata_index(index, source, payload, label)
    return PeerDataset("litdata", layout.files, [location, index.decode("utf-8", "replace")], layout.fields, layout, (payload, label))


def indexed_dataset(kind: str, index: bytes, location: str, source: str, payload: str | None, label: str | None) -> PeerDataset:
    """An MDS (``kind="mds"``) or LitData (``"litdata"``) dataset from its ``index.json``."""
    return (mds_dataset if kind == "mds" else litdata_dataset)(index, location, source, payload, label)


def tfrecord_dataset(
    files: Sequence[tuple[str, int | None]], location: str, payload: str | None, label: str | None, compression: str | None
) -> PeerDataset:
    """A TFRecord dataset from its files' names and sizes; a name ending ``.gz`` (or
    ``compression="gzip"``) is gzip-compressed whole."""
    described = []
    for name, size in files:
        kind = compression or ("gzip" if name.lower().endswith((".gz", ".gzip")) else None)
        described.append(RecordFile(name, size, size if kind is None else None, kind))
    return PeerDataset("tfrecord", described, [location, [list(pair) for pair in files], compression], None, None, (payload, label))


def hf_dataset(
    state: bytes, info: bytes | None, sizes: dict[str, int], location: str, source: str, payload: str | None, label: str | None
) -> PeerDataset:
    """A Hugging Face ``save_to_disk`` folder from its ``state.json``, its ``dataset_info.json``
    (None if absent) and its files' sizes.

    Raises:
        StorageError: A file ``state.json`` lists that is not there.
    """
    names = hf_arrow_files(state, source)
    files = []
    for name in names:
        if name not in sizes:
            raise StorageError(f"{source}: lists {name}, which is not there")
        files.append(RecordFile(name, sizes[name], sizes[name], None, None))
    dataset = PeerDataset("datasets", files, [location, state.decode("utf-8", "replace")], None, None, (payload, label))
    dataset.class_names = hf_class_names(info, f"{location}/dataset_info.json")
    return dataset
