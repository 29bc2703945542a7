"""LitData's optimized chunks (``litdata.optimize``), read in place: ``index.json`` and its
``chunk-R-N.bin`` files.

A chunk begins with ``num_items`` (u32) and ``num_items + 1`` item offsets (u32). Two bodies
follow, depending on what the samples hold:

- items (a sample with an image, an array, a tensor): each item one u32 size per leaf of the
  sample's tree, then the leaves' bytes: MDS's layout with every column of variable size, so
  it is parsed by the same array code (`scan_mds_shard`);
- an Arrow IPC file at the end of the chunk (samples of bytes, numbers and text, which LitData
  0.2.7x stores as Arrow rows), its length and the magic ``LDARW01\\0`` last: read without a copy,
  each value a range of the chunk (`scan_batches`).

A chunk compressed whole with zstd (``.zstd.bin``) is inflated whole. LitData's zstd frames
inside a chunk (``compression_level="batch"`` or ``"sample"``), Arrow rows compressed with zstd,
and encrypted chunks are refused by name: their samples are not ranges of a file.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from ..._bounded import MAX_INDEX_BYTES, parse_json
from ...errors import ShardError, StorageError
from ._arrow import scan_batches
from ._fields import choose_fields
from ._mds import MdsLayout, scan_mds_shard
from ._paths import relative_name
from ._records import FileRecords, RecordFile

__all__ = ["parse_litdata_index", "scan_litdata_chunk"]

_FOOTER_MAGIC = b"LDARW01\0"
_FRAMED_MAGIC = b"LDFZ01\0\0"
# LitData's leaf formats as the MDS encodings with the same bytes (numbers: little-endian).
_AS_MDS = {"int": "int64", "float": "float64", "bool": "uint8", "bytes": "bytes", "str": "str", "jpeg": "jpeg", "png": "png", "text": "str"}


def _leaf_names(spec: Any, source: str, prefix: str = "") -> list[str]:
    """The leaves of a LitData tree spec (a flattened pytree), named by their path."""
    if not isinstance(spec, dict):
        raise ValueError("a tree spec that is not an object")
    children = spec.get("children_spec") or []
    kind = spec.get("type")
    if kind is None and not children:
        return [prefix or "0"]
    if kind == "builtins.dict":
        keys = [str(key) for key in parse_json(spec["context"], f"{source}: a tree spec's context", max_bytes=MAX_INDEX_BYTES)]
    else:
        keys = [str(number) for number in range(len(children))]
    if len(keys) != len(children):
        raise ValueError("a tree spec whose keys and children differ in number")
    names: list[str] = []
    for key, child in zip(keys, children):
        names.extend(_leaf_names(child, source, f"{prefix}/{key}" if prefix else key))
    return names


def parse_litdata_index(data: bytes, source: str, payload: str | None, label: str | None) -> MdsLayout:
    """A LitData ``index.json``, checked: its chunks and leaves, and the fields to read.

    Raises:
        StorageError: Not a LitData index, encrypted or compressed in a way whose samples are not
            ranges, a chunk name leaving the folder; names ``source``.
        ConfigurationError: A named field that is not there or cannot serve.
    """
    document = parse_json(data, source, max_bytes=MAX_INDEX_BYTES)
    try:
        config, chunks = document["config"], document["chunks"]
        formats = [str(name) for name in config["data_format"]]
        spec = config["data_spec"]
        if isinstance(spec, str):  # the tree spec, JSON in a string: nested as deep again, bounded the same
            spec = parse_json(spec, f"{source}: its data_spec", max_bytes=MAX_INDEX_BYTES)
        leaves = _leaf_names(spec[1] if isinstance(spec, list) else spec, source)
    except StorageError:  # the JSON reader's, named
        raise
    except (ValueError, KeyError, TypeError, IndexError) as error:
        raise StorageError(f"{source}: not a LitData index ({type(error).__name__}: {error})") from error
    if len(leaves) != len(formats):
        raise StorageError(f"{source}: {len(leaves)} leaves in its tree but {len(formats)} data formats")
    if config.get("encryption"):
        raise StorageError(f"{source}: encrypted chunks; stoker reads LitData chunks that are not encrypted")
    level = config.get("compression_level")
    if config.get("compression") and level in ("batch", "sample"):
        raise StorageError(
            f"{source}: chunks compressed per {level} (compression_level={level!r}): their samples are not ranges of a file; "
            "stoker reads raw chunks and chunks compressed whole (compression_level='chunk')"
        )
    if not isinstance(chunks, list) or not chunks:
        raise StorageError(f"{source}: lists no chunks")
    files = []
    for number, chunk in enumerate(chunks):
        where = f"{source} (chunk {number})"
        if not isinstance(chunk, dict):
            raise StorageError(f"{where}: not an object")
        name = relative_name(chunk.get("filename"), where)
        count, size = chunk.get("chunk_size"), chunk.get("chunk_bytes")
        if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count < 1 << 31:
            raise StorageError(f"{where}: chunk_size {count!r} is not a count")
        compressed = ".zstd." in name or name.endswith(".zstd")
        stored = size if isinstance(size, int) and not isinstance(size, bool) and size >= 0 and not compressed else None
        files.append(RecordFile(name, stored, stored, "zstd" if compressed else None, count))
    encodings = [_AS_MDS.get(fmt.split(":", 1)[0], fmt) for fmt in formats]  # others (pil, numpy, tensor) stay payloads only by name
    payloads = [leaf for leaf, encoding in zip(leaves, encodings) if encoding in ("jpeg", "png", "bytes", "str")]
    labels = [leaf for leaf, encoding in zip(leaves, encodings) if encoding in ("int64", "float64", "uint8")]
    fields = choose_fields(leaves, payloads, labels, payload, label, source)
    return MdsLayout(files, leaves, encodings, [None] * len(leaves), fields)


def scan_litdata_chunk(layout: MdsLayout, file: RecordFile, raw: bytes | memoryview, name: str) -> FileRecords:
    """Where each item's payload lies in one chunk (its raw bytes), and each item's label.

    Raises:
        ShardError: A chunk shorter than its header, offsets past its end, an Arrow footer that
            does not read, a count other than its index's; names the chunk.
    """
    size = len(raw)
    if size >= 8 and bytes(raw[:8]) == _FRAMED_MAGIC:
        raise ShardError(f"{name}: zstd frames inside the chunk (compression_level='batch'); stoker reads raw chunks")
    if size >= 12 and bytes(raw[-8:]) == _FOOTER_MAGIC:
        return _scan_footer(layout, file, raw, name)
    return scan_mds_shard(layout, file, raw, name)


def _scan_footer(layout: MdsLayout, file: RecordFile, raw: bytes | memoryview, name: str) -> FileRecords:
    import pyarrow as pa

    size = len(raw)
    (length,) = struct.unpack_from("<I", raw, size - 12)
    start = size - 12 - length
    if start < 4 or length < 8:
        raise ShardError(f"{name}: its Arrow footer declares {length} bytes, more than the chunk holds")
    count = int(np.frombuffer(raw, dtype="<u4", count=1)[0])
    if file.samples is not None and count != file.samples:
        raise ShardError(f"{name}: holds {count} items, its index says {file.samples}")
    buffer = pa.py_buffer(raw)
    try:
        reader = pa.ipc.open_file(buffer.slice(start, length))
        batches = (reader.get_batch(number) for number in range(reader.num_record_batches))
    except (pa.ArrowException, OSError, ValueError) as error:
        raise ShardError(f"{name}: its Arrow footer does not read ({error})") from error
    offsets, lengths, labels = scan_batches(batches, buffer.address, size, layout.fields, name)
    if len(offsets) != count:
        raise ShardError(f"{name}: its Arrow footer holds {len(offsets)} rows, its header {count}")
    return FileRecords(offsets, lengths, labels)
