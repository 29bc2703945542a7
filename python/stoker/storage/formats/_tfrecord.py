"""TFRecord files read in place (TensorFlow's and most public datasets' original releases):
plain, or gzip-compressed whole (``.gz``).

A file is a run of records: length (u64), a masked CRC of the length (u32), the record, a masked
CRC of the record (u32). A record is a ``tf.train.Example`` protobuf: features by name, each a
list of bytes, floats or 64-bit integers. A scan walks the records and, in each, the protobuf
fields just far enough to find the payload feature's first value (its offset and length in the
file, so a read is one range of the file) and the label feature's first value; every length is
checked against what is left of the file and of the enclosing message before it is followed.
The CRCs are not checked (CRC-32C is not in the standard library; a length past the end is
caught by the bounds checks, and image payloads fail their decode).

stoker does not use the ``.idx`` files of the ``tfrecord`` package or DALI: they give where each
record starts, not where its payload lies inside it nor its label, which a read needs, so a scan
of the records is needed either way (once: the table is saved).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from ...errors import ShardError
from ._fields import FieldChoice, choose_fields

__all__ = ["TFRECORD_MARKERS", "example_features", "is_tfrecord_name", "scan_tfrecord", "tfrecord_fields", "tfrecord_records"]

TFRECORD_MARKERS = (".tfrecord", ".tfrecords", ".tfrec")
_FRAME = struct.Struct("<QI")

# Feature's oneof field numbers
_BYTES, _FLOATS, _INTS = 1, 2, 3


def is_tfrecord_name(name: str) -> bool:
    """Whether a file name reads as TFRecord (``x.tfrecord``, ``x.tfrecords.gz``,
    ``train.tfrecord-00000-of-00016``)."""
    lowered = name.lower().rsplit("/", 1)[-1]
    return any(marker in lowered for marker in TFRECORD_MARKERS) and not lowered.endswith((".idx", ".index"))


def tfrecord_records(data: bytes | memoryview, name: str) -> Iterator[tuple[int, int]]:
    """``(offset, length)`` of each record of a TFRecord file's raw bytes.

    Raises:
        ShardError: A record that runs past the end of the file (truncated), naming the file
            and the record.
    """
    size = len(data)
    position = 0
    number = 0
    while position < size:
        if size - position < 12:
            raise ShardError(f"{name}: record {number} at byte {position}: {size - position} bytes left, too few for a record (truncated?)")
        length, _ = _FRAME.unpack_from(data, position)
        if length > size - position - 16:
            raise ShardError(f"{name}: record {number} at byte {position} declares {length} bytes, past the end of the file (truncated?)")
        yield position + 12, length
        position += 16 + length
        number += 1


def _varint(data: bytes | memoryview, position: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if position >= end or shift > 63:
            raise ValueError("a varint runs past its message")
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, position
        shift += 7


def _fields(data: bytes | memoryview, start: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """``(field number, wire type, start, end)`` of each field of a message; for a varint or
    fixed field, start is where its value begins."""
    position = start
    while position < end:
        key, position = _varint(data, position, end)
        number, wire = key >> 3, key & 7
        if wire == 0:
            _, after = _varint(data, position, end)
        elif wire == 1:
            after = position + 8
        elif wire == 2:
            length, position = _varint(data, position, end)
            after = position + length
        elif wire == 5:
            after = position + 4
        else:
            raise ValueError(f"wire type {wire} is not one an Example uses")
        if after > end:
            raise ValueError("a field runs past its message")
        yield number, wire, position, after
        position = after


@dataclass(frozen=True)
class FeatureValue:
    """A feature's kind (``"bytes"``, ``"float"``, ``"int"``) and where its list lies."""

    kind: str
    start: int
    end: int


def example_features(data: bytes | memoryview, start: int, end: int) -> dict[str, FeatureValue]:
    """Each feature of the ``tf.train.Example`` in ``data[start:end]``.

    Raises:
        ValueError: Not an Example (a length past its message, a field an Example never has).
    """
    features: dict[str, FeatureValue] = {}
    for number, wire, body, after in _fields(data, start, end):
        if number != 1 or wire != 2:
            continue
        for entry_number, entry_wire, entry, entry_end in _fields(data, body, after):
            if entry_number != 1 or entry_wire != 2:
                continue
            key: str | None = None
            value: FeatureValue | None = None
            for field_number, field_wire, field_start, field_end in _fields(data, entry, entry_end):
                if field_number == 1 and field_wire == 2:
                    key = bytes(data[field_start:field_end]).decode("utf-8", "replace")
                elif field_number == 2 and field_wire == 2:
                    for kind_number, kind_wire, list_start, list_end in _fields(data, field_start, field_end):
                        if kind_wire == 2 and kind_number in (_BYTES, _FLOATS, _INTS):
                            value = FeatureValue({_BYTES: "bytes", _FLOATS: "float", _INTS: "int"}[kind_number], list_start, list_end)
            if key is not None and value is not None:
                features[key] = value
    return features


def first_bytes(data: bytes | memoryview, feature: FeatureValue) -> tuple[int, int]:
    """``(offset, length)`` of a bytes feature's first value.

    Raises:
        ValueError: The list is empty.
    """
    for number, wire, start, end in _fields(data, feature.start, feature.end):
        if number == 1 and wire == 2:
            return start, end - start
    raise ValueError("an empty bytes list")


def first_number(data: bytes | memoryview, feature: FeatureValue) -> int | float:
    """An int64 or float feature's first value (packed or not).

    Raises:
        ValueError: The list is empty.
    """
    for number, wire, start, end in _fields(data, feature.start, feature.end):
        if number != 1:
            continue
        if feature.kind == "int":
            value, _ = _varint(data, start, end) if wire in (0, 2) else (None, 0)
            if value is not None:
                return value - (1 << 64) if value >= 1 << 63 else value
        elif wire == 5:
            return float(struct.unpack_from("<f", data, start)[0])
        elif wire == 2 and end - start >= 4:
            return float(struct.unpack_from("<f", data, start)[0])
    raise ValueError("an empty number list")


def tfrecord_fields(data: bytes | memoryview, name: str, payload: str | None, label: str | None) -> FieldChoice:
    """The fields to read, from the first record of a file.

    Raises:
        ShardError: The file is empty or its first record is not an Example.
        ConfigurationError: A named field that is not there or cannot serve.
    """
    try:
        offset, length = next(tfrecord_records(data, name))
        features = example_features(data, offset, offset + length)
    except StopIteration:
        raise ShardError(f"{name}: holds no records") from None
    except ValueError as error:
        raise ShardError(f"{name}: record 0 is not a tf.train.Example ({error})") from error
    payloads = [key for key, value in features.items() if value.kind == "bytes"]
    labels = [key for key, value in features.items() if value.kind in ("int", "float")]
    return choose_fields(list(features), payloads, labels, payload, label, name)


def scan_tfrecord(data: bytes | memoryview, fields: FieldChoice, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each record's payload ``(offsets, lengths)`` in ``data`` and its label.

    Raises:
        ShardError: A truncated file, a record that is not an Example, or one without the
            payload or label feature; names the file and the record.
    """
    offsets: list[int] = []
    lengths: list[int] = []
    labels: list[int | float] = []
    for number, (offset, length) in enumerate(tfrecord_records(data, name)):
        try:
            features = example_features(data, offset, offset + length)
            payload = features.get(fields.payload)
            if payload is None or payload.kind != "bytes":
                raise ValueError(f"no bytes feature {fields.payload!r}")
            start, size = first_bytes(data, payload)
            if fields.label is not None:
                feature = features.get(fields.label)
                if feature is None or feature.kind == "bytes":
                    raise ValueError(f"no number feature {fields.label!r}")
                labels.append(first_number(data, feature))
        except ValueError as error:
            raise ShardError(f"{name}: record {number} (at byte {offset - 12}): {error}") from error
        offsets.append(start)
        lengths.append(size)
    floats = any(isinstance(value, float) for value in labels)
    label_array = (
        np.array(labels, dtype=np.float64 if floats else np.int64) if fields.label is not None else np.full(len(offsets), -1, np.int64)
    )
    return np.array(offsets, dtype=np.int64), np.array(lengths, dtype=np.int64), label_array
