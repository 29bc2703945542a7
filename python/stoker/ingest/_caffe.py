"""Caffe's ``Datum`` protobuf written by hand, for `convert_storage` to Caffe-style LMDB (the
reader is `stoker.storage`'s ``parse_datum``).

``message Datum { int32 channels = 1; int32 height = 2; int32 width = 3; bytes data = 4;
int32 label = 5; repeated float float_data = 6; bool encoded = 7; }``
"""

from __future__ import annotations

__all__ = ["encode_datum"]


def _encode_varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def encode_datum(data: bytes, label: int | None, *, encoded: bool = True, channels: int = 0, height: int = 0, width: int = 0) -> bytes:
    """Serialize a Datum holding ``data`` (encoded image bytes by default) and ``label``."""
    parts = []
    for number, value in ((1, channels), (2, height), (3, width)):
        if value:
            parts.append(_encode_varint(number << 3) + _encode_varint(value))
    parts.append(_encode_varint(4 << 3 | 2) + _encode_varint(len(data)) + data)
    if label is not None:
        parts.append(_encode_varint(5 << 3) + _encode_varint(label))
    if encoded:
        parts.append(_encode_varint(7 << 3) + b"\x01")
    return b"".join(parts)
