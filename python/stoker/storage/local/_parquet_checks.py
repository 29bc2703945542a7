"""What a Parquet dataset is checked for when it opens, beyond its columns' layout.

- **One kind of label.** A label column holds integers, floats or class names, and every file
  must hold the same kind: a file of strings among files of ClassLabel integers (or floats among
  integers) is refused, naming the file and both kinds, not read as a mixture.
- **Columns left unread** are noted, so a dataset whose captions or boxes sit in other columns
  does not pass without a word.
- **Page checksums.** pyarrow (and so ``datasets``) writes none by default; without them a flipped
  bit in a page is read as wrong data, not caught. A dataset whose pages carry none is noted,
  saying how to write them.

Both notes describe how the files were written, not a fault: each is said at INFO once per
dataset in a process (`say_notes`), not as a warning on every open, and `stoker inspect` shows
them (`ParquetStorage.notes`). The first data page header of the payload column is read (Thrift compact
  encoding: three i32 fields, then the optional CRC as field 4).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import IO, Any

from ..._bounded import shown_logger
from ...errors import StorageError
from ._parquet_layout import ParquetLayout

_logger = shown_logger("stoker.storage")


def label_kind(field_type: Any) -> str:
    """``"integers"``, ``"floats"`` or ``"class names"``: what a label column of this type holds."""
    import pyarrow as pa

    if pa.types.is_integer(field_type):
        return "integers"
    if pa.types.is_floating(field_type):
        return "floats"
    return "class names"


def check_label_kinds(names: Sequence[str], metadata: Sequence[Any], layout: ParquetLayout) -> None:
    """Every file's label column holds one kind of label.

    Raises:
        StorageError: A file's label kind differs from the first file's, naming both.
    """
    if layout.label is None:
        return
    kinds = [label_kind(meta.schema.to_arrow_schema().field(layout.label).type) for meta in metadata]
    for name, kind in zip(names[1:], kinds[1:]):
        if kind != kinds[0]:
            raise StorageError(
                f"{name}: label column {layout.label!r} holds {kind}, and {names[0]}'s holds {kinds[0]}; one dataset has one kind "
                "of label (convert the odd files' labels, or read them as another dataset)"
            )


def unread_columns_note(name: str, metadata: Any, layout: ParquetLayout) -> str | None:
    """What `say_notes` says of the columns no read uses, or None where every column is read."""
    used = {layout.payload, layout.label, layout.key} - {None}
    unread = [column for column in metadata.schema.to_arrow_schema().names if column not in used]
    if not unread:
        return None
    return (
        f"{name}: reading columns {', '.join(sorted(str(column) for column in used))}; not read: {', '.join(unread)} "
        "(image_column=, label_column=, key_column= choose others; Loader(extra=(column,)) reads one beside each sample)"
    )


_said: set[str] = set()  # the datasets whose notes were said in this process; guarded by _said_lock
_said_lock = threading.Lock()
_MOST_SAID = 100_000  # past this many datasets the record is cleared: a note said again, never memory without bound


def say_notes(dataset: str, notes: Sequence[str]) -> None:
    """Log ``notes`` on ``dataset`` at INFO, the first time it is opened in this process only:
    they describe how the files were written, which every later open would repeat word for word
    (`stoker inspect` shows them every time)."""
    with _said_lock:
        if dataset in _said:
            return
        if len(_said) >= _MOST_SAID:
            _said.clear()
        _said.add(dataset)
    for note in notes:
        _logger.info("%s", note)


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value, shift = 0, 0
    while at < len(data):
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at += 1
        if not byte & 0x80:
            return value, at
        shift += 7
    raise ValueError("a varint runs past the bytes read")


def page_has_checksum(header: bytes) -> bool:
    """Whether a Parquet page header (Thrift compact) carries its CRC (field 4)."""
    at, field = 0, 0
    while at < len(header):
        byte = header[at]
        if byte == 0:  # the struct's end: no CRC
            return False
        delta, kind = byte >> 4, byte & 0x0F
        at += 1
        if delta == 0:  # a long-form field id (zigzag i16)
            encoded, at = _varint(header, at)
            field = (encoded >> 1) ^ -(encoded & 1)
        else:
            field += delta
        if field == 4:
            return True
        if field > 4 or kind != 5:  # fields 1-3 are i32; anything else means field 4 was skipped
            return False
        _, at = _varint(header, at)
    return False


def checksum_note(name: str, metadata: Any, layout: ParquetLayout, open_file: Callable[[str], IO[bytes] | Any]) -> str | None:
    """What `say_notes` says when the first page of ``name``'s payload column carries no
    checksum, or None where it carries one (or the page cannot be read: the read path reports that)."""
    if metadata.num_row_groups == 0:
        return None
    group = metadata.row_group(0)
    column = next(
        (group.column(index) for index in range(group.num_columns) if group.column(index).path_in_schema.split(".")[0] == layout.payload),
        None,
    )
    if column is None:
        return None
    offset = column.dictionary_page_offset if column.has_dictionary_page and column.dictionary_page_offset else column.data_page_offset
    try:
        with open_file(name) as file:
            file.seek(offset)
            header = file.read(64)
        has_checksum = page_has_checksum(header)
    except (OSError, ValueError):
        return None  # the read path reports a file it cannot read; this is only a hint
    if has_checksum:
        return None
    return (
        f"{name}: its pages carry no checksums (pyarrow and datasets write none by default), so a flipped bit would be read as "
        "wrong data, not caught; write them with pyarrow.parquet.write_table(table, path, write_page_checksum=True) "
        "(stoker convert --to parquet does)"
    )
