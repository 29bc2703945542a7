"""MosaicML Streaming's MDS shards, read in place: ``index.json`` and its ``shard.NNNNN.mds``
files (raw, or compressed whole as ``.mds.zstd`` / ``.mds.gz``).

A shard is ``num_samples`` (u32), ``num_samples + 1`` sample offsets (u32), then the samples.
A sample is one u32 size for each variable-size column (the columns whose ``column_sizes`` entry
is null), in column order, then every column's bytes in column order. A shard is parsed with a
few array operations (no loop per sample in Python), and every offset and size is checked
against the shard's length before it is used.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..._bounded import MAX_INDEX_BYTES, parse_json
from ...errors import ShardError, StorageError
from ._fields import FieldChoice, choose_fields
from ._paths import relative_name
from ._records import FileRecords, RecordFile

__all__ = ["MdsLayout", "mds_column_values", "parse_mds_index", "scan_mds_shard"]

_SCALARS = {
    "int": "<i8",
    "int8": "<i1",
    "int16": "<i2",
    "int32": "<i4",
    "int64": "<i8",
    "uint8": "<u1",
    "uint16": "<u2",
    "uint32": "<u4",
    "uint64": "<u8",
    "float16": "<f2",
    "float32": "<f4",
    "float64": "<f8",
}
_TEXT_NUMBERS = ("str_int", "str_float")
_COMPRESSIONS = {"zstd": "zstd", "gz": "gzip", "gzip": "gzip"}
_PAYLOAD_ENCODINGS = ("jpeg", "png", "jpeg_array", "bytes", "str", "json")
_MAX_SAMPLES = 1 << 31


@dataclass(frozen=True)
class MdsLayout:
    """An MDS dataset: its shards and columns, and the fields chosen."""

    files: list[RecordFile]
    columns: list[str]
    encodings: list[str]
    sizes: list[int | None]
    fields: FieldChoice


def _count(value: Any, what: str, source: str, limit: int = 1 << 62) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= limit:
        raise StorageError(f"{source}: {what} is {value!r}, not a count")
    return value


def parse_mds_index(data: bytes, source: str, payload: str | None = None, label: str | None = None) -> MdsLayout:
    """An MDS ``index.json``, checked: its shards (every one of the same columns) and the
    payload and label columns (`choose_fields`).

    Raises:
        StorageError: Not JSON (or past the JSON reader's bounds: over ``MAX_INDEX_BYTES``,
            nested too deep), not MDS version 2, shards of different columns, a compression
            stoker does not read, counts that are not counts; the message names ``source``.
        ConfigurationError: A named field that is not there or cannot serve.
    """
    document = parse_json(data, source, max_bytes=MAX_INDEX_BYTES)
    try:
        shards = document["shards"]
        if not isinstance(shards, list) or not shards:
            raise StorageError(f"{source}: lists no shards")
        first = shards[0]
        columns, encodings, sizes = list(first["column_names"]), list(first["column_encodings"]), list(first["column_sizes"])
    except StorageError:
        raise
    except (ValueError, KeyError, TypeError, IndexError) as error:
        raise StorageError(f"{source}: not an MDS index ({type(error).__name__}: {error})") from error
    if not (len(columns) == len(encodings) == len(sizes)) or not all(isinstance(name, str) for name in columns):
        raise StorageError(f"{source}: its column names, encodings and sizes do not line up")
    files: list[RecordFile] = []
    for number, shard in enumerate(shards):
        where = f"{source} (shard {number})"
        if not isinstance(shard, dict):
            raise StorageError(f"{where}: not an object")
        if shard.get("format") != "mds" or shard.get("version") != 2:
            raise StorageError(f"{where}: format {shard.get('format')!r} version {shard.get('version')!r}; stoker reads MDS version 2")
        if [shard.get("column_names"), shard.get("column_encodings"), shard.get("column_sizes")] != [columns, encodings, sizes]:
            raise StorageError(f"{where}: columns differ from the first shard's")
        raw = shard.get("raw_data")
        zipped = shard.get("zip_data")
        compression = shard.get("compression")
        if not isinstance(raw, dict):
            raise StorageError(f"{where}: no raw_data")
        raw_bytes = _count(raw.get("bytes"), "raw_data.bytes", where)
        samples = _count(shard.get("samples"), "samples", where, _MAX_SAMPLES)
        if compression:
            kind = _COMPRESSIONS.get(str(compression).split(":", 1)[0])
            if kind is None:
                raise StorageError(f"{where}: compression {compression!r} is not one stoker reads (zstd, gz)")
            if not isinstance(zipped, dict):
                raise StorageError(f"{where}: compressed ({compression}) but no zip_data")
            files.append(
                RecordFile(
                    relative_name(zipped.get("basename"), where),
                    _count(zipped.get("bytes"), "zip_data.bytes", where),
                    raw_bytes,
                    kind,
                    samples,
                )
            )
        else:
            files.append(RecordFile(relative_name(raw.get("basename"), where), raw_bytes, raw_bytes, None, samples))
    for name, encoding, size in zip(columns, encodings, sizes):
        fixed = _SCALARS.get(str(encoding))
        if size is not None and (not isinstance(size, int) or isinstance(size, bool) or not 0 < size < 1 << 31):
            raise StorageError(f"{source}: column {name!r} has size {size!r}")
        if fixed is not None and size is not None and size != np.dtype(fixed).itemsize:
            raise StorageError(f"{source}: column {name!r} ({encoding}) has size {size}, not {np.dtype(fixed).itemsize}")
    labels = [name for name, encoding in zip(columns, encodings) if encoding in _SCALARS or encoding in _TEXT_NUMBERS]
    payloads = sorted(
        (name for name, encoding in zip(columns, encodings) if str(encoding) in _PAYLOAD_ENCODINGS or str(encoding).startswith("ndarray")),
        key=lambda name: (
            _PAYLOAD_ENCODINGS.index(encodings[columns.index(name)]) if encodings[columns.index(name)] in _PAYLOAD_ENCODINGS else 99
        ),
    )
    fields = choose_fields(columns, payloads, labels, payload, label, source)
    return MdsLayout(files, columns, [str(encoding) for encoding in encodings], sizes, fields)


def _gather(raw: np.ndarray, starts: np.ndarray, width: int) -> np.ndarray:
    """``width`` bytes at each of ``starts`` as rows."""
    return raw[starts[:, None] + np.arange(width, dtype=np.int64)]


def scan_mds_shard(layout: MdsLayout, file: RecordFile, data: bytes | memoryview, name: str) -> FileRecords:
    """Where the payload of each sample of one shard lies (in ``data``, its raw bytes), and
    each sample's label.

    Raises:
        ShardError: A shard shorter than its header says, offsets out of order or past its end,
            sizes that do not add up to a sample, a label that is not a number; names the shard
            (and the sample).
    """
    raw, column_starts, sizes = _sample_columns(layout, file, data, name)
    payload = layout.columns.index(layout.fields.payload)
    labels = _labels(layout, raw, column_starts, sizes, name)
    return FileRecords(column_starts[:, payload].copy(), sizes[:, payload].copy(), labels)


def mds_column_values(layout: MdsLayout, file: RecordFile, data: bytes | memoryview, name: str, column_name: str) -> np.ndarray:
    """Every sample's value in the column ``column_name`` of one shard, for a filter: numbers
    (the scalar encodings, ``str_int``, ``str_float``) as float64, ``str`` as text (objects).

    Raises:
        StorageError: No such column, or one of another encoding (images, bytes, arrays, JSON).
        ShardError: A damaged shard (as `scan_mds_shard`), or text that is not UTF-8 or a number.
    """
    if column_name not in layout.columns:
        raise StorageError(f"{name}: no column {column_name!r} (columns: {', '.join(layout.columns)})")
    column = layout.columns.index(column_name)
    encoding = layout.encodings[column]
    if encoding not in _SCALARS and encoding not in _TEXT_NUMBERS and encoding != "str":
        raise StorageError(f"{name}: column {column_name!r} holds {encoding}; a filter reads numbers and text (str) columns")
    raw, column_starts, sizes = _sample_columns(layout, file, data, name)
    if encoding != "str":
        return _numbers(encoding, raw, column_starts[:, column], sizes[:, column], f"{name}: column {column_name!r}").astype(np.float64)
    values = np.empty(len(column_starts), dtype=object)
    try:
        for position, (start, size) in enumerate(zip(column_starts[:, column].tolist(), sizes[:, column].tolist())):
            values[position] = bytes(raw[start : start + size]).decode("utf-8")
    except UnicodeDecodeError as error:
        raise ShardError(f"{name}: sample {position}'s {column_name!r} is not UTF-8 text ({error})") from error
    return values


def _sample_columns(layout: MdsLayout, file: RecordFile, data: bytes | memoryview, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One shard's bytes, and where each sample's every column starts and how long it is,
    every offset and size checked against the shard's length."""
    raw = np.frombuffer(data, dtype=np.uint8)
    if len(raw) < 4:
        raise ShardError(f"{name}: {len(raw)} bytes, too short for an MDS shard")
    count = int(raw[:4].view("<u4")[0])
    if file.samples is not None and count != file.samples:
        raise ShardError(f"{name}: holds {count} samples, its index says {file.samples}")
    header = 4 * (count + 2)
    if header > len(raw):
        raise ShardError(f"{name}: its header declares {count} samples, more than its {len(raw)} bytes hold (truncated?)")
    bounds = raw[4:header].view("<u4").astype(np.int64)
    begins, ends = bounds[:-1], bounds[1:]
    if count and (int(bounds[0]) < header or np.any(ends < begins) or int(bounds[-1]) > len(raw)):
        position = int(np.argmax(ends < begins)) if np.any(ends < begins) else count - 1
        raise ShardError(f"{name}: sample offsets out of order or past its {len(raw)} bytes (near sample {position}; truncated?)")
    variable = [column for column, size in enumerate(layout.sizes) if size is None]
    if count and int((ends - begins).min()) < 4 * len(variable):
        raise ShardError(f"{name}: sample {int(np.argmin(ends - begins))} is too short for its size header")
    sizes = np.zeros((count, len(layout.columns)), dtype=np.int64)
    for slot, column in enumerate(variable):
        sizes[:, column] = _gather(raw, begins + 4 * slot, 4).view("<u4")[:, 0] if count else 0
    for column, size in enumerate(layout.sizes):
        if size is not None:
            sizes[:, column] = size
    column_starts = begins[:, None] + 4 * len(variable) + np.cumsum(sizes, axis=1) - sizes
    wrong = (4 * len(variable) + sizes.sum(axis=1)) != (ends - begins)
    if np.any(wrong):
        raise ShardError(
            f"{name}: sample {int(np.argmax(wrong))}'s column sizes do not add up to its {int((ends - begins)[np.argmax(wrong)])} bytes"
        )
    return raw, column_starts, sizes


def _labels(layout: MdsLayout, raw: np.ndarray, column_starts: np.ndarray, sizes: np.ndarray, name: str) -> np.ndarray:
    if layout.fields.label is None:
        return np.full(len(column_starts), -1, dtype=np.int64)
    column = layout.columns.index(layout.fields.label)
    where = f"{name}: a label in {layout.fields.label!r}"
    return _numbers(layout.encodings[column], raw, column_starts[:, column], sizes[:, column], where)


def _numbers(encoding: str, raw: np.ndarray, starts: np.ndarray, sizes: np.ndarray, where: str) -> np.ndarray:
    """One numeric column's values: int64 for integers, float64 for the rest."""
    count = len(starts)
    scalar = _SCALARS.get(encoding)
    if scalar is not None:
        dtype = np.dtype(scalar)
        if not count:
            return np.zeros(0, dtype=np.float64 if dtype.kind == "f" else np.int64)
        values = _gather(raw, starts, dtype.itemsize).copy().view(dtype)[:, 0]
        if dtype.kind == "f":
            return values.astype(np.float64)
        if dtype == np.uint64 and np.any(values > np.iinfo(np.int64).max):
            raise ShardError(f"{where} does not fit 64 signed bits")
        return values.astype(np.int64)
    texts = [bytes(raw[start : start + size]) for start, size in zip(starts.tolist(), sizes.tolist())]
    try:
        if encoding == "str_int":
            return np.array([int(text) for text in texts], dtype=np.int64)
        return np.array([float(text) for text in texts], dtype=np.float64)
    except (ValueError, OverflowError) as error:
        raise ShardError(f"{where} is not a number ({error})") from error


def mds_fields(layout: MdsLayout) -> Sequence[str]:
    """The columns, for `stoker inspect`."""
    return [f"{name} ({encoding})" for name, encoding in zip(layout.columns, layout.encodings)]
