"""The index file of a tar shard, ``<shard>.idx``: a header that opening a dataset reads, and
arrays loaded when the shard is first read.

Format ``stoker.tar-index`` version 3 (binary, little-endian)::

    bytes 0-7     b"\\x89STKIDX\\n"
    bytes 8-15    the header's length in bytes (uint64)
    header        JSON: shard name and size, sample and member counts, the member patterns and
                  how many samples have each, the label kind and class names, the digest of the
                  arrays, the first and last member (to check the index against its shard), the
                  sample counts of the blocks of the default block size, and the arrays' list
    arrays        `ShardIndex`'s columns, each padded to 8 bytes, in the header's order

Opening a dataset of 100 million samples reads 10,000 headers of a few kilobytes, not 10 GB of
arrays: a shard's arrays are read (and checked against the header's digest) when a sample of it
is first read. Versions 1 and 2 (one JSON document per shard, as stoker wrote before) still read
whole; `stoker index` writes version 3. The same JSON form carries small indexes inside an object
store's ``dataset.json``.

Every field of a file is input to be checked, not trusted: the header is bounded in size before
it is read, the arrays must fill the file exactly, and offsets, sizes, codes and patterns are
checked against the shard before anything is read through them.
"""

from __future__ import annotations

import io
import json
import os
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any

import numpy as np

from ...._bounded import MAX_INDEX_BYTES, open_regular, parse_json
from ....errors import JsonError, ShardError, StaleIndexError
from ._index import NO_CHECKSUM, ShardIndex, index_path
from ._index_json import parse_json_index

__all__ = [
    "DEFAULT_BLOCK_BYTES",
    "ForeignIndexError",
    "INDEX_FORMAT",
    "INDEX_VERSION",
    "IndexHeader",
    "header_of",
    "load_index",
    "parse_index",
    "read_header",
    "shard_blocks",
    "validate",
    "write_index",
]

INDEX_FORMAT = "stoker.tar-index"
INDEX_VERSION = 3

MAGIC = b"\x89STKIDX\n"
DEFAULT_BLOCK_BYTES = 8 << 20
"""The block size whose block sample counts an index file carries (`TarShardStorage`'s default)."""
MAX_HEADER_BYTES = 64 << 20
_LABEL_DTYPES = {"int": np.int64, "float": np.float64, "text": np.int32}


class ForeignIndexError(ShardError):
    """The file under an index's name is another tool's (Megatron-Energon's ``energon prepare``
    writes its own binary ``shard.tar.idx``), neither of stoker's index formats."""


@dataclass
class IndexHeader:
    """What opening a dataset needs of one shard's index, without its arrays.

    Attributes:
        shard: The tar file (a name inside a bucket for shards on an object store).
        size: The shard's size in bytes when indexed.
        samples: How many samples the shard holds.
        patterns: The member patterns (see `ShardIndex`), and ``pattern_counts`` samples of each.
        label_kind: As `ShardIndex`'s; ``label_names`` the class names of text labels.
        digest: `ShardIndex.digest` of the arrays.
        ends: The first and last sample's first member as (name in the tar header, data offset).
        block_bytes: The block size ``block_sizes`` (samples per block, in order) were cut for.
        source: The index file its arrays are read from; None where ``loaded`` holds them.
    """

    shard: PurePath
    size: int
    samples: int
    patterns: list[tuple[str, ...]]
    pattern_counts: list[int]
    label_kind: str
    label_names: tuple[str, ...]
    label_key: str | None
    digest: str
    ends: list[tuple[str, int]]
    block_bytes: int
    block_sizes: list[int]
    source: Path | None = None
    layout: list[tuple[str, int, int]] = field(default_factory=list)  # (column, count, offset in the file)
    loaded: ShardIndex | None = None
    data: bytes | None = None  # the file's bytes, where it was fetched rather than opened

    def load(self) -> ShardIndex:
        """The shard's arrays: those held, else read from ``source`` and checked.

        Raises:
            ShardError: The file is cut short, or its arrays disagree with the header or the shard.
        """
        if self.loaded is not None:
            return self.loaded
        assert self.source is not None
        columns: dict[str, np.ndarray] = {}
        with io.BytesIO(self.data) if self.data is not None else open_regular(self.source, "a shard's index") as file:
            for name, count, offset in self.layout:
                dtype = np.dtype(_COLUMN_DTYPES[name] if name != "labels" else _LABEL_DTYPES[self.label_kind])
                file.seek(offset)
                data = file.read(count * dtype.itemsize)
                if len(data) != count * dtype.itemsize:
                    raise ShardError(f"{self.source}: cut short inside its {name!r} array; rebuild it with `stoker index`")
                columns[name] = np.frombuffer(data, dtype=dtype.newbyteorder("<")).astype(dtype, copy=False)
        key_bytes = columns.pop("key_bytes").tobytes()
        index = ShardIndex(
            shard=self.shard,
            size=self.size,
            key_bytes=key_bytes,
            patterns=self.patterns,
            label_kind=self.label_kind,
            label_names=self.label_names,
            label_key=self.label_key,
            label_present=columns.pop("label_present").astype(np.bool_) if "label_present" in columns else None,
            **columns,
        )
        _check_arrays(index, str(self.source))
        if index.digest() != self.digest:
            raise ShardError(
                f"{self.source}: its arrays do not match the digest in its header (the file is damaged); rebuild it with `stoker index`"
            )
        return index


_COLUMN_DTYPES: dict[str, Any] = {
    "key_ends": np.int64,
    "key_bytes": np.uint8,
    "sample_pattern": np.int32,
    "member_offsets": np.int64,
    "member_sizes": np.int64,
    "member_crc32": np.int64,
    "label_present": np.uint8,
}


def shard_blocks(index: ShardIndex, block_bytes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The shard cut into blocks of ``block_bytes``: runs of consecutive samples that start in
    the same ``block_bytes`` of the shard, a sample larger than that a block of its own (as JSON
    Lines cuts its blocks). Returns each block's sample count, first byte and end byte."""
    if len(index) == 0:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty
    firsts = index.member_starts[:-1]
    starts = np.minimum.reduceat(index.member_offsets, firsts)
    ends = np.maximum.reduceat(index.member_offsets + index.member_sizes, firsts)
    window = (starts - starts.min()) // max(1, block_bytes)
    oversized = ends - starts > block_bytes
    breaks = np.flatnonzero((np.diff(window) != 0) | oversized[1:] | oversized[:-1]) + 1
    edges = np.concatenate([[0], breaks])
    return np.diff(np.concatenate([edges, [len(index)]])), np.minimum.reduceat(starts, edges), np.maximum.reduceat(ends, edges)


def header_of(index: ShardIndex, source: Path | None = None) -> IndexHeader:
    """The header of ``index`` (which it holds, unless ``source`` is the file to read it from)."""
    counts = np.bincount(index.sample_pattern, minlength=len(index.patterns)) if len(index) else np.zeros(len(index.patterns), np.int64)
    ends = []
    for position in sorted({0, len(index) - 1}) if len(index) else []:
        extension, (offset, _) = next(iter(index.members(position).items()))
        key = index.key(position)
        ends.append((f"{key}.{extension}" if extension else key, offset))
    return IndexHeader(
        shard=index.shard,
        size=index.size,
        samples=len(index),
        patterns=index.patterns,
        pattern_counts=counts.tolist(),
        label_kind=index.label_kind,
        label_names=index.label_names,
        label_key=index.label_key,
        digest=index.digest(),
        ends=ends,
        block_bytes=DEFAULT_BLOCK_BYTES,
        block_sizes=shard_blocks(index, DEFAULT_BLOCK_BYTES)[0].tolist(),
        source=source,
        loaded=None if source is not None else index,
    )


def _columns(index: ShardIndex) -> list[tuple[str, np.ndarray]]:
    columns = [
        ("key_ends", index.key_ends),
        ("key_bytes", np.frombuffer(index.key_bytes, dtype=np.uint8)),
        ("sample_pattern", index.sample_pattern),
        ("member_offsets", index.member_offsets),
        ("member_sizes", index.member_sizes),
    ]
    if index.member_crc32 is not None:
        columns.append(("member_crc32", index.member_crc32))
    if index.labels is not None:
        columns.append(("labels", index.labels))
    if index.label_present is not None:
        columns.append(("label_present", index.label_present.astype(np.uint8)))
    return columns


def _padded(size: int) -> int:
    return (size + 7) // 8 * 8


def write_index(index: ShardIndex, path: Path | None = None) -> Path:
    """Write ``index`` in version 3 atomically (a temporary file renamed into place). Returns
    its path."""
    target = path or index_path(Path(index.shard))
    header = header_of(index)
    columns = _columns(index)
    document = {
        "format": INDEX_FORMAT,
        "version": INDEX_VERSION,
        "shard": {"name": index.shard.name, "size": index.size},
        "label_key": index.label_key,
        "samples": header.samples,
        "patterns": [list(pattern) for pattern in header.patterns],
        "pattern_counts": header.pattern_counts,
        "label_kind": header.label_kind,
        "label_names": list(header.label_names),
        "digest": header.digest,
        "ends": header.ends,
        "blocks": {"bytes": header.block_bytes, "sizes": header.block_sizes},
        "arrays": [[name, len(array)] for name, array in columns],
    }
    encoded = json.dumps(document, separators=(",", ":")).encode()
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    with open(temporary, "wb") as file:
        file.write(MAGIC + len(encoded).to_bytes(8, "little") + encoded)
        file.write(bytes(_padded(len(encoded) + 16) - len(encoded) - 16))
        for _, array in columns:
            data = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes()
            file.write(data + bytes(_padded(len(data)) - len(data)))
    temporary.replace(target)
    return target


def read_header(shard: Path, path: Path | None = None) -> IndexHeader:
    """The header of ``shard``'s index (version 3: the arrays stay on disk; versions 1 and 2:
    the whole JSON is read and held), checked against the shard.

    Raises:
        FileNotFoundError: The index is missing.
        StaleIndexError: The index does not describe this shard (size or tar headers differ).
        ShardError: The file is not an index this version reads.
    """
    source = path or index_path(shard)
    with open_regular(source, "a shard's index") as file:
        file_size = os.fstat(file.fileno()).st_size
        start = file.read(16)
        if start[:8] != MAGIC:
            if start.lstrip()[:1] not in (b"{", b""):
                raise ForeignIndexError(f"{source}: not a stoker index, another tool's file under the same name")
            if file_size > MAX_INDEX_BYTES:  # refused by its size: a sparse file of terabytes is not read
                raise ShardError(
                    f"{source}: a {INDEX_FORMAT} file of JSON form of {file_size:,} bytes, over the {MAX_INDEX_BYTES:,} stoker reads; "
                    "rebuild it with `stoker index` (version 3 reads a header only)"
                )
            header = header_of(parse_index(_json(start + file.read(MAX_INDEX_BYTES), source), shard, str(source)))
        else:
            header = _binary_header(file, start, file_size, shard, source)
    validate(header, source, Path(shard))
    return header


def load_index(shard: Path, path: Path | None = None) -> ShardIndex:
    """Read and validate the whole index of ``shard`` (see `read_header`)."""
    return read_header(shard, path).load()


def _json(data: bytes, source: Path | str) -> Any:
    try:
        return parse_json(data, str(source), max_bytes=MAX_INDEX_BYTES)
    except JsonError as error:
        raise ShardError(f"{source}: not a valid index ({error.reason})") from error


def _binary_header(file: Any, start: bytes, file_size: int, shard: PurePath, source: Path) -> IndexHeader:
    length = int.from_bytes(start[8:16], "little") if len(start) == 16 else -1
    if not 0 < length <= min(MAX_HEADER_BYTES, file_size - 16):
        raise ShardError(f"{source}: its header declares {length} bytes, the file has {file_size}; rebuild it with `stoker index`")
    document = _json(file.read(length), source)
    try:
        header = _checked_header(document, shard, source)
        offset = _padded(16 + length)
        for name, count in document["arrays"]:
            if name not in _COLUMN_DTYPES and name != "labels" or not isinstance(count, int) or count < 0:
                raise ValueError(f"array {name!r} of {count!r} items")
            itemsize = np.dtype(_LABEL_DTYPES[header.label_kind] if name == "labels" else _COLUMN_DTYPES[name]).itemsize
            header.layout.append((name, count, offset))
            offset += _padded(count * itemsize)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as error:
        raise ShardError(f"{source}: not a valid index ({type(error).__name__}: {error})") from error
    names = [name for name, _, _ in header.layout]
    required = ["key_ends", "key_bytes", "sample_pattern", "member_offsets", "member_sizes"]
    if names[:5] != required or len(set(names)) != len(names) or ("labels" in names) != (header.label_kind != "none"):
        raise ShardError(f"{source}: not a valid index (arrays {names})")
    if offset != file_size:
        raise ShardError(
            f"{source}: its arrays need {offset} bytes, the file has {file_size} (cut short or damaged); rebuild it with `stoker index`"
        )
    return header


def _checked_header(document: Any, shard: PurePath, source: Path) -> IndexHeader:
    if not isinstance(document, dict) or document.get("format") != INDEX_FORMAT or document.get("version") != INDEX_VERSION:
        raise ValueError(f"not a {INDEX_FORMAT} version {INDEX_VERSION} header")
    size, samples = document["shard"]["size"], document["samples"]
    patterns = [tuple(str(extension) for extension in pattern) for pattern in document["patterns"]]
    counts = [int(count) for count in document["pattern_counts"]]
    blocks = [int(count) for count in document["blocks"]["sizes"]]
    kind, names, label_key = document["label_kind"], tuple(document["label_names"]), document["label_key"]
    checks = {
        "shard size": isinstance(size, int) and 0 <= size < 1 << 62,
        "samples": isinstance(samples, int) and 0 <= samples < 1 << 40,
        "pattern counts": len(counts) == len(patterns) and min(counts, default=0) >= 0 and sum(counts) == samples,
        "block sizes": min(blocks, default=1) > 0 and sum(blocks) == samples,
        "label kind": kind in ("none", "int", "float", "text") and all(isinstance(name, str) for name in names),
        "label_key": label_key is None or isinstance(label_key, str),
        "patterns": all(pattern for pattern in patterns),
    }
    wrong = [name for name, good in checks.items() if not good]
    if wrong:
        raise ValueError(f"its {', '.join(wrong)} are not possible")
    ends = [(str(name), int(offset)) for name, offset in document["ends"]]
    return IndexHeader(
        shard=shard,
        size=size,
        samples=samples,
        patterns=patterns,
        pattern_counts=counts,
        label_kind=kind,
        label_names=names,
        label_key=label_key,
        digest=str(document["digest"]),
        ends=ends,
        block_bytes=int(document["blocks"]["bytes"]),
        block_sizes=blocks,
        source=source,
    )


def _check_arrays(index: ShardIndex, source: str) -> None:
    """Every array of the length and range the others and the shard allow (ShardError)."""
    count, members = len(index.key_ends), int(index.member_starts[-1]) if len(index.sample_pattern) else 0
    problems = []
    if len(index.sample_pattern) != count or (
        count and not 0 <= index.sample_pattern.min() <= index.sample_pattern.max() < len(index.patterns)
    ):
        problems.append("sample patterns")
    elif len(index.member_offsets) != members or len(index.member_sizes) != members:
        problems.append("member counts")
    elif members and (
        index.member_offsets.min() < 512 or index.member_sizes.min() < 0 or (index.member_offsets + index.member_sizes).max() > index.size
    ):
        problems.append("members outside the shard")
    if count and (np.diff(index.key_ends).min(initial=0) < 0 or index.key_ends[0] < 0 or index.key_ends[-1] != len(index.key_bytes)):
        problems.append("key ends")
    if index.member_crc32 is not None and (
        len(index.member_crc32) != members
        or (members and not NO_CHECKSUM <= index.member_crc32.min() <= index.member_crc32.max() < 1 << 32)
    ):
        problems.append("checksums")
    if index.labels is not None and len(index.labels) != count or index.label_present is not None and len(index.label_present) != count:
        problems.append("labels")
    elif index.label_kind == "text" and count and not -1 <= index.labels.min() <= index.labels.max() < len(index.label_names):  # type: ignore[union-attr]
        problems.append("label codes")
    if problems:
        raise ShardError(f"{source}: not a valid index ({', '.join(problems)} do not fit); rebuild it with `stoker index`")
    try:
        index.key_bytes.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ShardError(f"{source}: not a valid index (keys are not UTF-8: {error})") from error


def parse_index(data: Any, shard: PurePath, source: str) -> ShardIndex:
    """An index from its JSON form (versions 1 and 2, from a file or an object store's
    ``dataset.json``) or its version 3 bytes, without checking it against the shard.

    Raises:
        ShardError: ``data`` is not an index this version reads; the message names ``source``.
    """
    if isinstance(data, (bytes, bytearray, memoryview)):
        return _parse_bytes(bytes(data), shard, source)
    index = parse_json_index(data, shard, source)
    _check_arrays(index, source)
    return index


def _parse_bytes(data: bytes, shard: PurePath, source: str) -> ShardIndex:
    """A version 3 index held in memory (fetched from an object store), or a JSON one."""
    if data[:8] != MAGIC:
        return parse_index(_json(data, source), shard, source)
    reader = io.BytesIO(data)
    header = _binary_header(reader, reader.read(16), len(data), shard, Path(source))
    header.data = data
    return header.load()


def _header_name(file: Any, data_offset: int) -> str:
    file.seek(data_offset - 512)
    header = file.read(512)
    if len(header) < 512:
        return ""
    name = header[:100].split(b"\0", 1)[0].decode("utf-8", "replace")
    prefix = header[345:500].split(b"\0", 1)[0].decode("utf-8", "replace") if header[257:262] == b"ustar" else ""
    return f"{prefix}/{name}" if prefix else name


def validate(header: IndexHeader, source: Path, shard: Path) -> None:
    """Check an index against its shard: the size, and the tar headers of the first and last
    members (a long name is stored truncated in the header, so a prefix must match)."""
    size = os.stat(shard).st_size
    if size != header.size:
        raise StaleIndexError(
            f"{source} describes {header.size} bytes but {shard} has {size}: the shard changed or is truncated; rebuild the index (stoker index)"
        )
    with open(shard, "rb") as file:
        for expected, offset in header.ends:
            found = _header_name(file, offset) if 512 <= offset <= size else ""
            if not found or not expected.startswith(found):
                raise StaleIndexError(
                    f"{source} says {expected!r} starts at byte {offset} of {shard}, but the tar header there names {found!r}; rebuild the index"
                )
