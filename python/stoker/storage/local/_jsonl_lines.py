"""The line index of one JSON Lines file, kept beside it so that opening a corpus a second time
reads a header per file instead of every byte of every file.

Format ``stoker.jsonl-lines`` version 1, in ``<file>.stoker-lines`` (little-endian)::

    bytes 0-7     b"\\x89STKLNS\\n"
    bytes 8-15    the header's length (uint64)
    header        JSON: the file's size, modification time, inode and a CRC-32 of its first and
                  last 64 KiB (what says the index still describes it), the line count, the
                  content's size and CRC-32 (the corpus fingerprint), the block bounds for the
                  block size it was cut for, the arrays' digest and lengths
    arrays        each line's start, length and 1-based line number (int64), 8-byte aligned

A file whose stamp differs from the header's is indexed again (and its index rewritten); so is
one whose index cannot be read or does not check (a damaged index is never trusted: its sizes are
checked against the file before anything is allocated, and its arrays against the digest). An
index that cannot be written (a read-only corpus) is only kept in memory.
"""

from __future__ import annotations

import hashlib
import json
import os
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..._bounded import open_regular, parse_json, shown_logger

__all__ = ["LINES_SUFFIX", "FileLines", "LinesHeader", "block_bounds", "cache_path", "read_cached", "stamp", "write_cache"]

_logger = shown_logger("stoker.storage")

FORMAT = "stoker.jsonl-lines"
VERSION = 1
MAGIC = b"\x89STKLNS\n"
MAX_HEADER_BYTES = 64 << 20
_EDGE = 64 << 10
_ARRAYS = ("starts", "lengths", "numbers")
LINES_SUFFIX = ".stoker-lines"


@dataclass
class FileLines:
    """Every non-empty line of a file: start (in its decompressed bytes), length, line number."""

    starts: np.ndarray
    lengths: np.ndarray
    numbers: np.ndarray

    @property
    def nbytes(self) -> int:
        return int(self.starts.nbytes + self.lengths.nbytes + self.numbers.nbytes)

    def digest(self) -> str:
        digest = hashlib.blake2b(digest_size=16)
        for array in (self.starts, self.lengths, self.numbers):
            digest.update(np.ascontiguousarray(array, dtype="<i8").tobytes())
        return digest.hexdigest()


@dataclass
class LinesHeader:
    """What opening needs of one file's line index; ``load`` reads its arrays."""

    lines: int
    content: tuple[int, int]  # decompressed bytes, CRC-32
    block_key: tuple[int, int]  # (block_bytes, max_line_bytes) the bounds were cut for
    bounds: list[int]  # block edges in the file's lines, 0 first and the count last
    digest: str
    source: Path | None = None
    loaded: FileLines | None = None

    def load(self) -> FileLines:
        """The arrays: those held, else read from ``source`` and checked.

        Raises:
            ValueError: The index file changed or is damaged since its header was read.
        """
        if self.loaded is not None:
            return self.loaded
        assert self.source is not None
        with open_regular(self.source, "a line index") as file:
            start = file.read(16)
            length = int.from_bytes(start[8:16], "little")
            file.seek((16 + length + 7) // 8 * 8)
            data = file.read(3 * 8 * self.lines)
        if len(data) != 24 * self.lines:
            raise ValueError(f"{self.source}: cut short")
        arrays = np.frombuffer(data, dtype="<i8").astype(np.int64).reshape(3, self.lines)
        lines = FileLines(*arrays)
        if lines.digest() != self.digest:
            raise ValueError(f"{self.source}: its arrays do not match its header's digest")
        if self.lines and (
            lines.starts.min() < 0
            or lines.lengths.min() < 0
            or (lines.starts + lines.lengths).max() > self.content[0]
            or lines.numbers.min() < 1
        ):
            raise ValueError(f"{self.source}: it places lines outside the file's {self.content[0]} bytes")
        return lines


def cache_path(file: Path) -> Path:
    """Where ``file``'s line index is kept: ``<file>.stoker-lines``."""
    return file.with_name(file.name + LINES_SUFFIX)


def stamp(file: Path) -> dict[str, int]:
    """What says a file is the one an index was made of: size, modification time, inode, and a
    CRC-32 of its first and last 64 KiB (an edit that keeps size and time still shows there)."""
    with open_regular(file, "JSON Lines") as handle:
        status = os.fstat(handle.fileno())
        edges = zlib.crc32(handle.read(_EDGE))
        if status.st_size > _EDGE:
            handle.seek(max(_EDGE, status.st_size - _EDGE))
            edges = zlib.crc32(handle.read(_EDGE), edges)
    return {"size": status.st_size, "mtime_ns": status.st_mtime_ns, "inode": status.st_ino, "edges_crc": edges}


def block_bounds(lines: FileLines, block_bytes: int, max_line_bytes: int, compressed: bool) -> list[int]:
    """Block edges in a file's lines: a compressed file is one block; a plain file's lines are
    grouped by the ``block_bytes`` their start falls in, a line over ``max_line_bytes`` a block
    of its own (never read: the lines around it are read without it)."""
    count = len(lines.starts)
    if compressed or not count:
        return [0, count] if count else [0]
    block_of = lines.starts // block_bytes
    oversized = lines.lengths > max_line_bytes
    breaks = (np.diff(block_of) != 0) | oversized[1:] | oversized[:-1]
    return [0, *(np.flatnonzero(breaks) + 1).tolist(), count]


def read_cached(file: Path, file_stamp: dict[str, int]) -> LinesHeader | None:
    """``file``'s kept line index, if there is one that describes the file as it is now; None
    otherwise (missing, stale, or not a valid index: the file is then indexed again)."""
    path = cache_path(file)
    if not path.exists():
        return None
    try:
        with open_regular(path, "a line index") as handle:
            size = os.fstat(handle.fileno()).st_size
            start = handle.read(16)
            length = int.from_bytes(start[8:16], "little") if len(start) == 16 else -1
            if start[:8] != MAGIC or not 0 < length <= min(MAX_HEADER_BYTES, size - 16):
                raise ValueError("not a line index")
            header = parse_json(handle.read(length), str(path), max_bytes=MAX_HEADER_BYTES)
        return _checked(header, file_stamp, size, (16 + length + 7) // 8 * 8, path)
    except (OSError, ValueError, KeyError, TypeError) as error:
        _logger.warning("%s: %s; indexing %s again", path, error, file)
        return None


def _checked(header: Any, file_stamp: dict[str, int], size: int, arrays_at: int, path: Path) -> LinesHeader | None:
    if not isinstance(header, dict) or header.get("format") != FORMAT or header.get("version") != VERSION:
        raise ValueError("not a line index of this version")
    if header["file"] != file_stamp:
        return None  # the file changed: indexed again, quietly
    lines = header["lines"]
    content = [int(value) for value in header["content"]]
    bounds = [int(value) for value in header["blocks"]["bounds"]]
    block_key = (int(header["blocks"]["block_bytes"]), int(header["blocks"]["max_line_bytes"]))
    if not isinstance(lines, int) or lines < 0 or size != arrays_at + 24 * lines or len(content) != 2:
        raise ValueError(f"its arrays for {lines!r} lines do not fill its {size} bytes")
    if bounds[0] != 0 or bounds[-1] != lines or any(high <= low for low, high in zip(bounds, bounds[1:])):
        raise ValueError("its block bounds are not possible")
    return LinesHeader(lines, (content[0], content[1]), block_key, bounds, str(header["digest"]), source=path)


def write_cache(file: Path, file_stamp: dict[str, int], header: LinesHeader, lines: FileLines) -> None:
    """Keep ``lines`` beside ``file`` (atomically); a folder that cannot be written only loses
    the time of indexing again next time."""
    path = cache_path(file)
    document = {
        "format": FORMAT,
        "version": VERSION,
        "file": file_stamp,
        "lines": header.lines,
        "content": list(header.content),
        "blocks": {"block_bytes": header.block_key[0], "max_line_bytes": header.block_key[1], "bounds": header.bounds},
        "digest": header.digest,
        "arrays": [[name, header.lines] for name in _ARRAYS],
    }
    encoded = json.dumps(document, separators=(",", ":")).encode()
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(temporary, "wb") as out:
            out.write(MAGIC + len(encoded).to_bytes(8, "little") + encoded)
            out.write(bytes((16 + len(encoded) + 7) // 8 * 8 - 16 - len(encoded)))
            out.write(np.stack([lines.starts, lines.lengths, lines.numbers]).astype("<i8").tobytes())
        temporary.replace(path)
    except OSError as error:
        _logger.info("cannot keep the line index of %s beside it (%s); it is kept in memory", file, error)
        temporary.unlink(missing_ok=True)
