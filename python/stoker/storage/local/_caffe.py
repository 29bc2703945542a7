"""Caffe's ``Datum`` protobuf, the value format of Caffe's LMDB datasets, read by hand (a few
fields; a protobuf runtime for them would be a heavy dependency). `stoker.ingest.encode_datum`
writes it.

``message Datum { int32 channels = 1; int32 height = 2; int32 width = 3; bytes data = 4;
int32 label = 5; repeated float float_data = 6; bool encoded = 7; }``
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DatumLayout", "parse_datum"]


@dataclass(frozen=True)
class DatumLayout:
    """Where a Datum's ``data`` bytes sit inside the serialized value, and its other fields."""

    data_offset: int
    data_length: int
    label: int | None
    channels: int
    height: int
    width: int
    encoded: bool


def _varint(buffer: bytes | memoryview, position: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if position >= len(buffer):
            raise ValueError("truncated varint")
        byte = buffer[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, position
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _signed32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def parse_datum(buffer: bytes | memoryview) -> DatumLayout:
    """Locate the fields of a serialized Datum.

    Raises:
        ValueError: Not a Datum (bad wire type, truncated field).
    """
    position = 0
    fields: dict[int, int] = {}
    data_offset = data_length = 0
    while position < len(buffer):
        tag, position = _varint(buffer, position)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value, position = _varint(buffer, position)
            fields[number] = value
        elif wire == 2:
            length, position = _varint(buffer, position)
            if position + length > len(buffer):
                raise ValueError(f"field {number} runs past the end of the value")
            if number == 4:
                data_offset, data_length = position, length
            position += length
        elif wire == 5:
            position += 4
        elif wire == 1:
            position += 8
        else:
            raise ValueError(f"wire type {wire} is not used by Datum")
    return DatumLayout(
        data_offset=data_offset,
        data_length=data_length,
        label=_signed32(fields[5]) if 5 in fields else None,
        channels=fields.get(1, 0),
        height=fields.get(2, 0),
        width=fields.get(3, 0),
        encoded=bool(fields.get(7, 0)),
    )
