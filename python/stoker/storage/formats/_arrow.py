"""Hugging Face ``datasets`` folders written by ``save_to_disk``, read in place: ``state.json``
lists the Arrow files (IPC streams, ``data-00000-of-00004.arrow``), ``dataset_info.json`` says the
features (a ``ClassLabel``'s names become the classes).

An Arrow file is opened from its bytes without a copy, so each binary value (an ``Image``
feature's ``bytes``, a ``binary`` or ``string`` column) is a range of the file: the scan records
the range (the values buffer's place in the file plus the value's offset), and a read is then one
``pread`` of that range, as for tar shards. Arrow files whose buffers are compressed (not what
``save_to_disk`` writes) have no such ranges and are refused, named.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..._bounded import MAX_METADATA_BYTES, parse_json, shown_logger
from ...errors import ShardError, StorageError
from .._arrow_columns import class_label_names
from ._fields import FieldChoice, choose_fields
from ._paths import relative_name

__all__ = ["arrow_column_names", "arrow_fields", "hf_arrow_files", "hf_class_names", "read_arrow_columns", "scan_arrow", "scan_batches"]

_logger = shown_logger("stoker.storage")


def hf_arrow_files(state: bytes, source: str) -> list[str]:
    """The Arrow files ``state.json`` lists, in order.

    Raises:
        StorageError: Not a ``save_to_disk`` state (or past the JSON reader's bounds), or a file
            name leaving the folder.
    """
    document = parse_json(state, source, max_bytes=MAX_METADATA_BYTES)
    try:
        names = [entry["filename"] for entry in document["_data_files"]]
    except (ValueError, KeyError, TypeError) as error:
        raise StorageError(f"{source}: not the state.json of a datasets save_to_disk folder ({type(error).__name__}: {error})") from error
    if not names:
        raise StorageError(f"{source}: lists no Arrow files")
    return [relative_name(name, source) for name in names]


def hf_class_names(info: bytes | None, source: str = "dataset_info.json") -> dict[str, list[str]]:
    """Each ``ClassLabel`` feature's class names, from ``dataset_info.json`` at ``source`` (none
    if absent, or unreadable, with a warning naming it: labels are then numbers without names)."""
    if info is None:
        return {}
    try:
        document = parse_json(info, source, max_bytes=MAX_METADATA_BYTES)
    except ValueError as error:
        _logger.warning("%s; labels are numbers without class names", error)
        return {}
    return class_label_names(document.get("features") if isinstance(document, dict) else None)


def _open(raw: bytes | memoryview, name: str) -> Any:
    import pyarrow as pa

    try:
        buffer = pa.py_buffer(raw)
        return buffer, pa.ipc.open_stream(buffer)
    except (pa.ArrowInvalid, pa.ArrowException, ValueError, OSError) as error:
        raise ShardError(f"{name}: not an Arrow IPC stream ({error})") from error


def _mapped(path: str) -> Any:
    """The Arrow stream in the file at ``path``, mapped into memory (nothing read until used)."""
    import pyarrow as pa

    try:
        return pa.ipc.open_stream(pa.memory_map(path))
    except (pa.ArrowException, ValueError, OSError) as error:
        raise ShardError(f"{path}: not an Arrow IPC stream ({error})") from error


def arrow_column_names(path: str) -> list[str]:
    """The columns of the Arrow stream file at ``path``.

    Raises:
        ShardError: Not an Arrow stream, or a damaged schema.
    """
    try:
        return [str(name) for name in _mapped(path).schema.names]
    except ValueError as error:  # a field name that is not UTF-8
        raise ShardError(f"{path}: a damaged Arrow schema ({error})") from error


def read_arrow_columns(path: str, columns: Sequence[str]) -> Any:
    """``columns`` of the Arrow stream file at ``path`` as a table, mapped from the file, not
    copied (a filter's column, the ``extra=`` columns beside the payload); each batch checked
    in full before a value of it is used, as the scan checks them.

    Raises:
        ShardError: Not an Arrow stream, a column missing, or a damaged batch; names the file.
    """
    import pyarrow as pa

    batches = []
    try:
        for batch in _mapped(path):
            chosen = batch.select(list(columns))
            chosen.validate(full=True)
            batches.append(chosen)
        return pa.Table.from_batches(batches) if batches else _mapped(path).schema.empty_table().select(list(columns))
    except ShardError:
        raise
    except (pa.ArrowException, KeyError, OSError, ValueError) as error:
        raise ShardError(f"{path}: columns {list(columns)} cannot be read ({type(error).__name__}: {error})") from error


def _payload_types(schema: Any) -> tuple[list[str], list[str]]:
    import pyarrow as pa

    payloads, labels = [], []
    for field in schema:
        kind = field.type
        if pa.types.is_binary(kind) or pa.types.is_large_binary(kind) or pa.types.is_string(kind) or pa.types.is_large_string(kind):
            payloads.append(field.name)
        elif pa.types.is_struct(kind) and kind.get_field_index("bytes") >= 0:
            payloads.append(field.name)  # an Image or Audio feature: its encoded bytes
        elif pa.types.is_integer(kind) or pa.types.is_floating(kind):
            labels.append(field.name)
    return payloads, labels


def arrow_fields(raw: bytes | memoryview, name: str, payload: str | None, label: str | None) -> FieldChoice:
    """The fields to read, from the first file's schema.

    Raises:
        ShardError: Not an Arrow stream.
        ConfigurationError: A named field that is not there or cannot serve.
    """
    _, reader = _open(raw, name)
    try:
        payloads, labels = _payload_types(reader.schema)
        names = reader.schema.names
    except ValueError as error:  # a field name that is not UTF-8
        raise ShardError(f"{name}: a damaged Arrow schema ({error})") from error
    return choose_fields(names, payloads, labels, payload, label, name)


def _binary(column: Any) -> Any:
    import pyarrow as pa

    if pa.types.is_struct(column.type):
        return column.field("bytes")
    return column


def scan_arrow(raw: bytes | memoryview, fields: FieldChoice, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each row's payload ``(offsets, lengths)`` in an Arrow IPC stream file and its label.

    Raises:
        ShardError: Not an Arrow stream, compressed buffers, a row without a payload, a
            missing field; names the file and the row.
    """
    buffer, reader = _open(raw, name)
    return scan_batches(reader, buffer.address, buffer.size, fields, name)


def scan_batches(batches: Any, base: int, size: int, fields: FieldChoice, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`scan_arrow` over record ``batches`` read without a copy from a file whose bytes start
    at address ``base`` and run ``size`` bytes (a stream, or an IPC file inside a chunk)."""
    import pyarrow as pa

    offsets: list[np.ndarray] = []
    lengths: list[np.ndarray] = []
    labels: list[np.ndarray] = []
    row = 0
    try:
        for batch in batches:
            # The IPC reader trusts the lengths and offsets in the file; a damaged batch must be
            # caught before a column of it is sliced (pyarrow aborts the process on some).
            batch.validate(full=True)
            if fields.payload not in batch.schema.names or (fields.label is not None and fields.label not in batch.schema.names):
                raise ShardError(f"{name}: rows from {row} lack the field {fields.payload!r} or {fields.label!r}")
            column = _binary(batch.column(fields.payload))
            if column.null_count:
                missing = row + int(np.flatnonzero(np.asarray(column.is_null()))[0])
                raise ShardError(f"{name}: row {missing} has no {fields.payload!r}")
            _, bounds_buffer, values = column.buffers()[:3]
            wide = pa.types.is_large_binary(column.type) or pa.types.is_large_string(column.type)
            bounds = np.frombuffer(bounds_buffer, dtype=np.int64 if wide else np.int32)[
                column.offset : column.offset + len(column) + 1
            ].astype(np.int64)
            start = values.address - base if values is not None else 0
            if len(bounds) and (int(bounds[0]) < 0 or int(bounds[-1]) > (values.size if values is not None else 0)):
                raise ShardError(f"{name}: rows from {row}: value offsets past their buffer")
            if values is not None and not (0 <= start and start + values.size <= size):
                raise ShardError(
                    f"{name}: its Arrow buffers are compressed, so its values are not ranges of the file; stoker reads uncompressed Arrow files"
                )
            offsets.append(start + bounds[:-1])
            lengths.append(np.diff(bounds))
            if fields.label is not None:
                values_column = batch.column(fields.label)
                floats = pa.types.is_floating(values_column.type)
                filled = values_column.fill_null(float("nan") if floats else -1)
                labels.append(np.asarray(filled.to_numpy(zero_copy_only=False), dtype=np.float64 if floats else np.int64))
            row += batch.num_rows
    except ShardError:
        raise
    except (pa.ArrowException, OSError, ValueError) as error:  # pyarrow's read errors are of all three kinds
        raise ShardError(f"{name}: a damaged Arrow stream near row {row} ({error})") from error
    if offsets and (int(min(part.min(initial=0) for part in lengths)) < 0):
        raise ShardError(f"{name}: value offsets out of order")
    label_array: np.ndarray = np.concatenate(labels) if labels else np.full(row, -1, np.int64)
    return (
        np.concatenate(offsets) if offsets else np.zeros(0, np.int64),
        np.concatenate(lengths) if lengths else np.zeros(0, np.int64),
        label_array,
    )
