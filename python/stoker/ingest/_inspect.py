"""`stoker inspect`: what a dataset is, how big, how its labels are spread.

Every storage kind gives its size as stored (files, shards, objects, Parquet pages, Lance's
data), or the report says why it cannot (``bytes_unknown``: Cassandra rows, objects named by a
manifest); labels are counted by value (class names where the dataset has them), summed up as a
range where they are numbers with fractions (regression targets), and said to be absent where
no sample has one (a text corpus), never a histogram of "(none) 100%"."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from .._bounded import open_regular, shown, walk_files
from .._units import byte_size
from ..errors import StorageError
from ..storage import ObjectStorage, PeerFormatStorage, Storage, label_array, open_storage, storage_format
from ..storage.formats import ArrayRecordStorage, LanceStorage
from ..storage.local import FileStorage, JsonlStorage, LmdbStorage, MemoryStorage, ParquetStorage, TarShardStorage
from ..storage.remote import OBJECT_STORE_SCHEMES

__all__ = ["format_report", "inspect_storage"]


def inspect_storage(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Describe the dataset at ``path`` as plain data: format, sample count, its size as stored
    (``bytes``, or ``bytes_unknown`` saying why not), payload types by count, and its labels
    (``labels``: a histogram by value or class name, empty when no sample has a label;
    ``label_range`` for numbers with fractions), and ``notes`` on how Parquet files were written
    (columns a read leaves out, pages without checksums), said here every time."""
    scheme = str(path).split("://", 1)[0].lower() if "://" in str(path) else ""
    kind = OBJECT_STORE_SCHEMES.get(scheme) or scheme or storage_format(path)
    text_column = None
    try:
        storage = open_storage(path)
    except StorageError:
        text_column = _text_column(path) if kind == "parquet" else None
        if text_column is None:
            raise
        storage = open_storage(path, image_column=text_column)
    with storage:
        report: dict[str, Any] = {"path": str(path), "format": kind, "samples": len(storage)}
        if text_column is not None:
            report["text_column"] = text_column
        peer = storage.peer if isinstance(storage, ObjectStorage) else storage if isinstance(storage, PeerFormatStorage) else None
        if peer is not None:  # a peer's format: which, its files, and which fields a read returns
            report["layout"] = peer.dataset.format
            report["files"] = len(peer.dataset.files)
            report["bytes"] = sum(file.stored_bytes or 0 for file in peer.dataset.files)
            report["fields"] = peer.fields.describe()
        elif isinstance(storage, ObjectStorage | TarShardStorage) and storage.catalog is not None:  # tar shards, local or not
            if isinstance(storage, ObjectStorage):
                report["layout"] = storage.layout
            sizes = [shard.size for shard in storage.shards]
            report["shards"] = len(sizes)
            report["bytes"] = sum(sizes)
            report["shard_bytes"] = {"min": min(sizes), "max": max(sizes)}
            report["payload"] = storage.payload
            report["payloads"] = _by_count(storage.catalog.payload_counts())
        elif isinstance(storage, ObjectStorage):  # one object per sample
            report["layout"] = storage.layout
        elif isinstance(storage, LmdbStorage):
            report["bytes"] = storage.data_file.stat().st_size
            report["value_format"] = storage.value_format
        elif isinstance(storage, FileStorage):
            report["bytes"] = sum(os.path.getsize(storage.path_of(key)) for key in storage.keys)
            report["payloads"] = _by_count(Counter(Path(key).suffix.lstrip(".").lower() or "(none)" for key in storage.keys))
        if "bytes" not in report:
            size = _stored_bytes(storage)
            report["bytes" if isinstance(size, int) else "bytes_unknown"] = size
        report.update(_labels(storage))
        if isinstance(storage, ParquetStorage) and storage.notes:
            report["notes"] = list(storage.notes)
    return report


def _text_column(path: str | os.PathLike[str]) -> str | None:
    """The ``text`` column of a local Parquet text corpus (FineWeb's, or what ``datasets`` and
    pandas write) that has no column of bytes: the Loader never guesses a text column to be the
    samples, but ``inspect`` reads none of them, and `stoker inspect` has no option to name one.
    None where there is no such column (the first Parquet file's schema says)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    location = Path(path)
    try:
        files = walk_files(location, lambda name: name.endswith(".parquet")) if location.is_dir() else [location]
        if not files:
            return None
        with open_regular(files[0], "a Parquet file") as file:
            schema = pq.read_schema(file)
    except (OSError, StorageError, pa.ArrowException):  # not Parquet after all: the storage's own error stands
        return None
    field = next((field for field in schema if field.name == "text"), None)
    return "text" if field is not None and (pa.types.is_string(field.type) or pa.types.is_large_string(field.type)) else None


def _stored_bytes(storage: Storage) -> int | str:
    """The bytes ``storage`` takes where it is stored, or why that is not known."""
    if isinstance(storage, ParquetStorage):
        if all(os.path.isfile(name) for name in storage.names):
            return sum(os.path.getsize(name) for name in storage.names)
        # On a store: the column chunks and footers the files' own metadata declares.
        return sum(
            metadata.serialized_size
            + sum(
                metadata.row_group(group).column(column).total_compressed_size
                for group in range(metadata.num_row_groups)
                for column in range(metadata.num_columns)
            )
            for metadata in storage.metadata
        )
    if isinstance(storage, JsonlStorage):
        return sum(os.path.getsize(file) for file in storage.files)  # as stored: compressed files' compressed size
    if isinstance(storage, ArrayRecordStorage):
        return sum(os.path.getsize(file) for file in storage.paths)
    if isinstance(storage, LanceStorage):
        return sum(field.bytes_on_disk for field in storage.dataset.stats.data_stats().fields)
    if isinstance(storage, MemoryStorage):
        return sum(len(storage.read(key)) for key in storage.keys)
    if isinstance(storage, ObjectStorage) and storage.listed_bytes is not None:
        return storage.listed_bytes
    if isinstance(storage, ObjectStorage):
        return "its manifest names the objects without their sizes"
    return f"{type(storage).__name__} does not say how many bytes it holds without reading every sample"


def _labels(storage: Storage) -> dict[str, Any]:
    """The report's label parts: ``labels`` (count by label, class names where there are some,
    ``"(none)"`` for samples without one among labelled ones; empty when no sample has one) and,
    for numbers with fractions (regression targets), ``label_range`` (min, max, mean) instead of
    a histogram of distinct values. Counted as one array: no Python object per sample."""
    column = label_array(storage.labels)
    if not isinstance(column, np.ndarray):  # a label column computed on demand (JSON Lines)
        column = np.asarray(column[np.arange(len(storage))])
    missing = np.isnan(column) if column.dtype.kind == "f" else column == -1  # how label_array marks "none"
    unlabelled = int(missing.sum())
    if unlabelled == len(column):
        return {"labels": {}}
    known = column[~missing]
    if column.dtype.kind == "f" and not np.array_equal(known, np.round(known)):
        return {
            "labels": {"(none)": unlabelled} if unlabelled else {},
            "label_range": {"min": float(known.min()), "max": float(known.max()), "mean": float(known.mean())},
        }
    values, tallies = np.unique(known.astype(np.int64), return_counts=True)
    names = storage.classes
    counts = {
        (names[value] if names and 0 <= value < len(names) else str(value)): int(tally) for value, tally in zip(values.tolist(), tallies)
    }
    return {"labels": {**counts, "(none)": unlabelled} if unlabelled else counts}


def _by_count(counts: dict[str, int]) -> dict[str, int]:
    """Payload types, the most common first: a dataset that mixes PNGs into JPEGs says so."""
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def _payloads(report: dict[str, Any]) -> str:
    payloads = report.get("payloads") or {report["payload"]: report["samples"]}
    return ", ".join(f".{shown(extension, 40)} ({count})" for extension, count in payloads.items())


def format_report(report: dict[str, Any], top: int = 20) -> str:
    """The report as text, the largest ``top`` label groups listed; names from the dataset (its
    path, label and class names, fields) shown escaped (`stoker._bounded.shown`)."""
    where = report["path"] if "://" in report["path"] else Path(report["path"])  # a Path would fold a URL's //
    size = byte_size(report["bytes"]) if "bytes" in report else f"size not known ({report.get('bytes_unknown', 'not reported')})"
    lines = [f"{shown(where)}: {report['format']}, {report['samples']} samples, {size}"]
    if "shards" in report:
        lines.append(
            f"  {report['shards']} shards of {byte_size(report['shard_bytes']['min'])} to {byte_size(report['shard_bytes']['max'])}; payloads {_payloads(report)}"
        )
    elif "fields" in report:
        lines.append(f"  {report['files']} {report['layout'].upper()} files; fields: {shown(report['fields'], 2_000)}")
    elif "payloads" in report:
        lines.append(f"  payloads {_payloads(report)}")
    if "text_column" in report:
        lines.append(f"  text: column {shown(report['text_column'])!r} (no column of bytes: a text corpus)")
    if "value_format" in report:
        lines.append(f"  values: {report['value_format']}")
    labels = report["labels"]
    if "label_range" in report:
        span = report["label_range"]
        lines.append(f"  labels: numbers from {span['min']:g} to {span['max']:g}, mean {span['mean']:g}")
    elif not labels:
        lines.append("  labels: none (no sample carries a label)")
    else:
        lines.append(f"  labels: {len(labels)} distinct")
    for name, count in sorted(labels.items(), key=lambda item: -item[1])[:top]:
        lines.append(f"    {shown(name, 80):<30} {count:>9}  {100 * count / max(1, report['samples']):5.1f}%")
    if len(labels) > top:
        lines.append(f"    ... {len(labels) - top} more")
    for note in report.get("notes", []):
        lines.append(f"  note: {shown(note, 2_000)}")
    return "\n".join(lines)
