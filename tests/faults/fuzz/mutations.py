"""Structure-aware mutation of a seed file, as Hypothesis strategies.

Each format's parser finds the fields that say how big something is or how many there are
(`Field`: chunk and box sizes, segment lengths, page counts, tar sizes, the Parquet footer's
length, image dimensions); a mutation sets such a field to an extreme, flips bits, overwrites a
run of bytes, truncates, or splices a part of the file into another place. Hypothesis draws the
mutations from a seed (``derandomize`` in CI), shrinks a failing one to its smallest form, and
the suite saves it as a regression file.
"""

from __future__ import annotations

import hashlib
import re
import struct
from dataclasses import dataclass

from hypothesis import strategies as st


@dataclass(frozen=True)
class Field:
    """A size or count in a file: ``width`` bytes at ``offset``, ``"big"`` or ``"little"`` endian
    (``"octal"``: tar's ASCII octal numbers; ``"decimal"``: a number in JSON, ``width`` digits)."""

    offset: int
    width: int
    order: str = "big"


def _png(data: bytes) -> list[Field]:
    fields, at = [], 8
    while at + 8 <= len(data):
        (length,) = struct.unpack_from(">I", data, at)
        fields.append(Field(at, 4))
        if data[at + 4 : at + 8] == b"IHDR":
            fields += [Field(at + 8, 4), Field(at + 12, 4), Field(at + 16, 1), Field(at + 17, 1)]  # size, depth, colour
        at += 12 + length
    return fields


def _jpeg(data: bytes) -> list[Field]:
    fields, at = [], 2
    while at + 4 <= len(data) and data[at] == 0xFF:
        marker = data[at + 1]
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
            at += 2
            continue
        fields.append(Field(at + 2, 2))
        if marker in (0xC0, 0xC1, 0xC2):  # frame header: precision, height, width, components
            fields += [Field(at + 4, 1), Field(at + 5, 2), Field(at + 7, 2), Field(at + 9, 1)]
        if marker == 0xDA:
            break
        (length,) = struct.unpack_from(">H", data, at + 2)
        at += 2 + length
    return fields


def _riff(data: bytes) -> list[Field]:
    fields, at = [Field(4, 4, "little")], 12
    while at + 8 <= len(data):
        (size,) = struct.unpack_from("<I", data, at + 4)
        fields.append(Field(at + 4, 4, "little"))
        if data[at : at + 4] == b"fmt ":  # channels, sample rate, byte rate, block align, bits
            fields += [Field(at + 10, 2, "little"), Field(at + 12, 4, "little"), Field(at + 16, 4, "little"), Field(at + 22, 2, "little")]
        at += 8 + size + (size & 1)
    return fields


def _boxes(data: bytes, start: int, end: int, depth: int = 0) -> list[Field]:
    """ISO BMFF (MP4, M4A) box sizes, following the containers that hold the sample tables."""
    fields, at = [], start
    while at + 8 <= end and depth < 6:
        (size,) = struct.unpack_from(">I", data, at)
        kind = data[at + 4 : at + 8]
        fields.append(Field(at, 4))
        if size < 8:
            break
        if kind in (b"moov", b"trak", b"mdia", b"minf", b"stbl", b"udta", b"edts"):
            fields += _boxes(data, at + 8, min(end, at + size), depth + 1)
        elif kind in (b"stsz", b"stco", b"stts", b"stsc", b"stss", b"ctts") and at + 16 <= end:
            fields.append(Field(at + 12, 4))  # entry count (stsz: the sample size)
            if kind == b"stsz" and at + 20 <= end:
                fields.append(Field(at + 16, 4))
        at += size
    return fields


def _mp4(data: bytes) -> list[Field]:
    return _boxes(data, 0, len(data))


def _flac(data: bytes) -> list[Field]:
    fields, at = [], 4
    while at + 4 <= len(data):
        header = data[at]
        fields.append(Field(at + 1, 3))
        if header & 0x7F == 0:  # STREAMINFO: block sizes, frame sizes, then rate/channels/bits
            fields += [Field(at + 4, 2), Field(at + 6, 2), Field(at + 8, 3), Field(at + 11, 3), Field(at + 14, 3)]
        (length,) = struct.unpack_from(">I", b"\0" + data[at + 1 : at + 4])
        at += 4 + length
        if header & 0x80:
            break
    return fields


def _ogg(data: bytes) -> list[Field]:
    fields, at = [], 0
    while at + 27 <= len(data) and data[at : at + 4] == b"OggS":
        count = data[at + 26]
        fields += [Field(at + 26, 1)] + [Field(at + 27 + index, 1) for index in range(min(count, 4))]
        at += 27 + count + sum(data[at + 27 : at + 27 + count])
    return fields


def _ebml(data: bytes) -> list[Field]:
    """Matroska/WebM element sizes (the variable-length integers after each ID), top levels."""
    fields, at, seen = [], 0, 0

    def vint_width(first: int) -> int:
        return next((index + 1 for index in range(8) if first & (0x80 >> index)), 0)

    while at < len(data) and seen < 64:
        id_width = vint_width(data[at])
        if id_width == 0 or at + id_width >= len(data):
            break
        size_at = at + id_width
        size_width = vint_width(data[size_at])
        if size_width == 0:
            break
        fields.append(Field(size_at, size_width))
        size = int.from_bytes(data[size_at : size_at + size_width], "big") & ((1 << (7 * size_width)) - 1)
        element = data[at : at + id_width]
        # Descend into EBML header, Segment, Tracks, TrackEntry, Video, Cluster.
        at = (
            size_at + size_width
            if element in (b"\x1a\x45\xdf\xa3", b"\x18\x53\x80\x67", b"\x16\x54\xae\x6b", b"\xae", b"\xe0", b"\x1f\x43\xb6\x75")
            else size_at + size_width + size
        )
        seen += 1
    return fields


def _tar(data: bytes) -> list[Field]:
    fields, at = [], 0
    while at + 512 <= len(data) and data[at] != 0:
        fields.append(Field(at + 124, 11, "octal"))
        try:
            size = int(data[at + 124 : at + 135].strip(b"\0 ") or b"0", 8)
        except ValueError:
            break
        at += 512 + (size + 511) // 512 * 512
    return fields


def _json_numbers(data: bytes) -> list[Field]:
    """The numbers of a JSON index (offsets, sizes, counts, labels)."""
    return [Field(match.start(), match.end() - match.start(), "decimal") for match in re.finditer(rb"(?<=[:\[,])-?\d+", data)][:256]


def _tar_index(data: bytes) -> list[Field]:
    """A version 3 tar index: its header's length, the numbers of its JSON header (counts,
    sizes, pattern counts, block sizes, array lengths), and the 8-byte words of its arrays (key
    ends, offsets, sizes, checksums); the numbers of an older JSON index."""
    if data[:8] != b"\x89STKIDX\n" or len(data) < 16:
        return _json_numbers(data)
    length = int.from_bytes(data[8:16], "little")
    arrays = (16 + length + 7) // 8 * 8
    header = [Field(16 + field.offset, field.width, field.order) for field in _json_numbers(data[16 : 16 + length])]
    return [Field(8, 8, "little"), *header[:128], *(Field(offset, 8, "little") for offset in range(arrays, len(data) - 7, 8))][:256]


def _json_values(data: bytes) -> list[Field]:
    """The numbers of JSON as `json.dumps` writes it, a space after ``:`` and ``,`` (a state's
    spans, seed and epoch; a JSON Lines document's fields)."""
    return [Field(match.start(1), match.end(1) - match.start(1), "decimal") for match in re.finditer(rb"[:\[,]\s*(-?\d+)", data)][:256]


def _parquet(data: bytes) -> list[Field]:
    """The footer's length, and the magic at each end (the metadata itself is Thrift-encoded:
    reached by the bit flips and overwrites)."""
    return [Field(len(data) - 8, 4, "little"), Field(len(data) - 4, 4), Field(0, 4)] if len(data) >= 12 else []


def _arrow_stream(data: bytes) -> list[Field]:
    """An Arrow IPC stream (the provenance ledger): each message's metadata length, after its
    0xFFFFFFFF continuation marker, and the numbers of the JSON in its schema's metadata (the
    transform's sizes, the batch size)."""
    lengths = [Field(match.end(), 4, "little") for match in re.finditer(rb"\xff\xff\xff\xff", data)][:64]
    return lengths + _json_numbers(data)[:64]


def _gzip(data: bytes) -> list[Field]:
    """gzip's header flags and extra length, and the trailer's CRC-32 and uncompressed size."""
    return (
        [Field(3, 1), Field(4, 4, "little"), Field(len(data) - 8, 4, "little"), Field(len(data) - 4, 4, "little")] if len(data) > 18 else []
    )


def _zstd(data: bytes) -> list[Field]:
    """A zstd frame's header descriptor and its content size (8 bytes after a 1-byte window
    descriptor, as `write_content_size` lays it out), and the first block header."""
    return [Field(4, 1), Field(5, 1), Field(6, 8, "little"), Field(14, 3, "little")] if len(data) > 18 else []


def _mds(data: bytes) -> list[Field]:
    """An MDS shard: its sample count, its sample offsets, and the first size word of each
    sample (a variable-size column's length)."""
    if len(data) < 8:
        return []
    count = int.from_bytes(data[:4], "little")
    fields = [Field(0, 4, "little")]
    for number in range(min(count + 1, 64)):
        at = 4 + 4 * number
        if at + 4 > len(data):
            break
        fields.append(Field(at, 4, "little"))
        begin = int.from_bytes(data[at : at + 4], "little")
        if number < count and begin + 4 <= len(data):
            fields.append(Field(begin, 4, "little"))
    return fields


def _tfrecord(data: bytes) -> list[Field]:
    """A TFRecord file: each record's length (and the protobuf length bytes right after its
    frame: the Example's first field)."""
    fields, at = [], 0
    while at + 12 <= len(data) and len(fields) < 128:
        length = int.from_bytes(data[at : at + 8], "little")
        fields.extend([Field(at, 8, "little"), Field(at + 13, 1, "little")])
        at += 16 + length
    return fields


def _first_elements(data: bytes) -> list[tuple[int, int]]:
    """Where the first element of each JSON array lies (after its ``[``, before its ``,`` or
    ``]``), strings skipped: what the ``repeat`` mutation makes a long list of (a state of 10**4
    mixture changes, an index of thousands of shards). A scan of the seed-sized text."""
    spans: list[tuple[int, int]] = []
    stack: list[list[int]] = []  # per open bracket: its byte, where its first element starts, 1 while on it
    in_string = escaped = False
    for position, byte in enumerate(data):
        if in_string:
            escaped, in_string = (not escaped and byte == 0x5C), escaped or byte != 0x22
            continue
        if byte == 0x22:
            in_string = True
        elif byte in b"[{":
            stack.append([byte, position + 1, 1])
        elif byte in b",]}" and stack:
            kind, start, first = stack[-1]
            if kind == 0x5B and first and data[start:position].strip():
                spans.append((start, position))
            if byte == 0x2C:
                stack[-1][2] = 0
            else:
                stack.pop()
        if len(spans) >= 64:
            break
    return spans


# A value to nest or to replace: a number, or a string (state.json has no numbers).
_VALUE = re.compile(rb'(?<=[:\[,\s])(?:-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|"(?:[^"\\]|\\.)*")(?=\s*[,\]}])')
# What a value becomes: each type JSON has, and numbers at the edges of what Python and numpy hold.
_OTHER_VALUES = [b"null", b"true", b'"x"', b'""', b"[]", b"{}", b"-1", b"0", b"0.5", b"1e308", b"-1e400", b"NaN", b"18446744073709551616"]
_REPEATED_BYTES = 2 << 20  # a repeated list is kept under this (a case is a file the worker opens)


def _json_mutation(draw: st.DrawFn, data: bytearray) -> None:
    """One mutation of JSON's own structure, which leaves it JSON: a value (a number, a string)
    of another type, nested in thousands of brackets or made a number of thousands of digits, or
    an array's first element repeated thousands of times."""
    kind = draw(st.sampled_from(["retype"] * 4 + ["deepen", "digits", "repeat"]))
    if kind == "repeat":
        elements = _first_elements(bytes(data))
        if not elements:
            return
        start, end = draw(st.sampled_from(elements))
        element = bytes(data[start:end])
        count = min(draw(st.sampled_from([2, 100, 10_000])), max(2, _REPEATED_BYTES // (len(element) + 1)))
        data[end:end] = (b"," + element) * (count - 1)
        return
    values = list(_VALUE.finditer(bytes(data)))[:256]
    if not values:
        return
    value = draw(st.sampled_from(values))
    if kind == "retype":
        data[value.start() : value.end()] = draw(st.sampled_from(_OTHER_VALUES))
    elif kind == "deepen":
        levels = draw(st.sampled_from([65, 1_000, 100_000]))
        data[value.start() : value.end()] = b"[" * levels + value.group() + b"]" * levels
    else:
        data[value.start() : value.end()] = b"9" * draw(st.sampled_from([101, 4_301, 100_000]))


def _node_cache_index(data: bytes) -> list[Field]:
    """A node cache's index: each copy of the state's numbers (sequence, store, slots, slots
    used, next segment, replaced, segment count, each segment's number, bytes, charge and live
    entries), then the words of the first slots (hash, segment, offset, length)."""
    state = [Field(copy + offset, 8, "little") for copy in (0, 4096) for offset in [*range(16, 72, 8), *range(80, 80 + 32 * 4, 8)]]
    return state + [Field(offset, 8, "little") for offset in range(8192, min(len(data), 8192 + 32 * 32), 8)]


def _node_cache_log(data: bytes) -> list[Field]:
    """A node cache's segment: each record's name length and value length."""
    fields, at = [], 0
    while at + 24 <= len(data) and len(fields) < 128:
        name, value = int.from_bytes(data[at + 8 : at + 12], "little"), int.from_bytes(data[at + 16 : at + 24], "little")
        fields += [Field(at + 8, 4, "little"), Field(at + 16, 8, "little")]
        at += 24 + name + value
    return fields


PARSERS = {
    "jpeg": _jpeg,
    "png": _png,
    "webp": _riff,
    "wav": _riff,
    "flac": _flac,
    "mp3": lambda data: [],
    "ogg": _ogg,
    "m4a": _mp4,
    "mp4": _mp4,
    "mkv": _ebml,
    "tar": _tar,
    "tar-index": _tar_index,
    "lmdb": lambda data: [Field(offset, 8, "little") for offset in range(16, 136, 8)],  # the meta pages' counts and page numbers
    "parquet": _parquet,
    "ledger": _arrow_stream,
    "jsonl": _json_values,
    "loader-state": _json_values,
    "mixture-state": _json_values,
    "token-state": _json_values,
    "tokenizer": _json_values,  # its sizes and ids; test_tokenizer_fuzz.py mutates its structure
    "jsonl-gz": _gzip,
    "jsonl-zst": _zstd,
    "mds": _mds,
    "mds-zstd": _zstd,
    "mds-index": _json_values,
    "litdata-index": _json_values,
    "datasets-state": _json_values,
    "datasets-info": _json_values,
    "tfrecord": _tfrecord,
    "tfrecord-gz": _gzip,
    "datasets": _arrow_stream,
    # A Lance data file: its footer (the offsets and lengths of its metadata and column tables, the
    # versions, the magic) and the words before it; Lance's reader is Rust, called from Python.
    "lance": lambda data: [Field(offset, 8, "little") for offset in range(max(0, len(data) - 256), len(data) - 7, 8)],
    # Riegeli: the file's first chunk header (hash, data size, record count, decoded size) and the
    # 8-byte words after it; the reader is Google's C++, and it must not take the process down.
    "array_record": lambda data: [Field(offset, 8, "little") for offset in range(0, min(len(data) - 7, 256), 8)],
    "litdata": _mds,  # the same header: a count, item offsets, then each item's size words
    "litdata-arrow": lambda data: [*_mds(data)[:8], Field(len(data) - 12, 4, "little")],  # the header and the footer's length
    # Operator inputs (tests/faults/fuzz/operator_inputs.py): a key list file, and side tables.
    "key-list": _parquet,
    "side-table-parquet": _parquet,
    "side-table-csv": _json_numbers,  # the numbers after each comma
    "side-table-jsonl": _json_values,
    "node-cache-index": _node_cache_index,
    "node-cache-log": _node_cache_log,
    "node-cache-boot": lambda data: [Field(0, 8), Field(9, 4)] if len(data) >= 13 else [],  # the boot id's first two groups
}


# The formats that are JSON text: their mutations include JSON's own (`_json_mutation`).
JSON_KINDS = {"mds-index", "litdata-index", "datasets-state", "datasets-info", "loader-state", "mixture-state", "token-state"}


def _extremes(width: int, order: str = "big") -> list[int]:
    if order == "decimal":
        return [0, 1, (1 << 31) - 1, 1 << 32, (1 << 63) - 1, 1 << 64, 10**30]
    top = (1 << (8 * width)) - 1
    return sorted({0, 1, 2, 0x7F, 0xFF & top, top >> 1, (top >> 1) + 1, top - 1, top})


def _write_field(data: bytearray, field: Field, value: int) -> None:
    if field.offset + field.width > len(data):
        return
    if field.order == "decimal":
        data[field.offset : field.offset + field.width] = str(value).encode()
    elif field.order == "octal":
        text = format(value % (8**field.width), "o").rjust(field.width, "0").encode()[-field.width :]
        data[field.offset : field.offset + field.width] = text
    else:
        data[field.offset : field.offset + field.width] = (value % (1 << (8 * field.width))).to_bytes(field.width, field.order)  # type: ignore[arg-type]


class Mutant(bytes):
    """Mutated bytes whose repr is short (Hypothesis prints a failing case; the suite saves it)."""

    def __repr__(self) -> str:
        return f"<{len(self)} bytes, sha256 {hashlib.sha256(self).hexdigest()[:16]}>"


@st.composite
def mutated(draw: st.DrawFn, seed: bytes, fields: list[Field], json_text: bool = False) -> Mutant:
    """``seed`` with one to four mutations (``json_text``: JSON's own too, `_json_mutation`)."""
    data = bytearray(seed)
    kinds = (
        ["flip", "overwrite", "truncate", "splice"]
        + (["field", "field", "field"] if fields else [])
        + (["json"] * 12 if json_text else [])  # JSON's own most often: they keep it JSON, so reach what reads it
    )
    for _ in range(draw(st.integers(1, 4))):
        if not data:
            break
        kind = draw(st.sampled_from(kinds))
        position = draw(st.integers(0, len(data) - 1))
        if kind == "flip":
            data[position] ^= 1 << draw(st.integers(0, 7))
        elif kind == "overwrite":
            run = draw(st.integers(1, 16))
            value = draw(st.sampled_from([0x00, 0xFF, 0x7F, 0x80, draw(st.integers(0, 255))]))
            data[position : position + run] = bytes([value]) * len(data[position : position + run])
        elif kind == "truncate":
            del data[position:]
        elif kind == "json":
            _json_mutation(draw, data)
        elif kind == "splice":
            length = draw(st.integers(1, 64))
            source = draw(st.integers(0, len(data) - 1))
            data[position:position] = data[source : source + length]
        else:
            field = draw(st.sampled_from(fields))
            value = draw(st.one_of(st.sampled_from(_extremes(field.width, field.order)), st.integers(0, (1 << (8 * field.width)) - 1)))
            _write_field(data, field, value)
    return Mutant(data)
