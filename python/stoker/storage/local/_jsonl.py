"""JSON Lines files (``.jsonl``, ``.jsonl.gz``, ``.jsonl.zst``): one sample per non-empty line.

The text corpora that language models train on are published this way (one JSON object per
document, its text in a field such as ``"text"``). A sample's bytes are its line, as written:
turning it into text (parsing the JSON, taking the field) is the work of the stage that uses it,
so a malformed line is a bad sample named by file and line, not a storage failure.

Plain files are indexed when the storage opens: one pass over the file finds every line's
offset (read in large explicit chunks, never mapped), and later reads are explicit positional
reads of whole blocks (runs of lines spanning about ``block_bytes``), served from a bounded
cache: the block shuffle reads each block about once an epoch. A compressed file cannot be read
from the middle, so it is one block: decompressed whole (once per epoch under the block shuffle),
counted line by line when the storage opens. Its decompressed size is checked against
``max_block_bytes`` before anything is kept, so a file that inflates without bound (a
decompression bomb, or a corpus that should have been split) is refused by name instead of
exhausting memory.
"""

from __future__ import annotations

import glob
import gzip
import hashlib
import os
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np

from ... import _native
from ..._files import open_regular, require_regular
from ...errors import CorruptSampleError, StorageError
from .._protocol import Storage
from ..policies._block_cache import BlockCache

__all__ = ["JSONL_SUFFIXES", "JsonlStorage", "jsonl_files"]

JSONL_SUFFIXES = (".jsonl", ".jsonl.gz", ".jsonl.zst", ".json.gz", ".json.zst", ".ndjson")
_SCAN_CHUNK = 16 << 20  # bytes read at a time while indexing a file
# What one line's place in the index costs (start, length, line number): counted with a
# compressed file's inflated bytes against max_block_bytes, so a file of short lines that
# inflates far (a bomb of "{}\n") is refused before its index outgrows the bound.
INDEX_BYTES_PER_LINE = 24
_WHITESPACE = np.frombuffer(b" \t\r\n\x0b\x0c", dtype=np.uint8)


def jsonl_files(path: str | os.PathLike[str]) -> list[Path]:
    """The JSON Lines files at ``path``: the file itself, every JSON Lines file under a folder,
    or a glob pattern's matches; sorted.

    Raises:
        FileNotFoundError: Nothing there, or no JSON Lines file.
    """
    text = str(path)
    if any(character in text for character in "*?["):
        found = sorted(Path(name) for name in glob.glob(text, recursive=True) if Path(name).is_file())
    elif Path(text).is_dir():
        found = sorted(file for file in Path(text).rglob("*") if file.is_file() and file.name.endswith(JSONL_SUFFIXES))
    elif Path(text).exists():
        require_regular(text, "JSON Lines")  # a FIFO blocks and /dev/zero never ends
        found = [Path(text)]
    else:
        raise FileNotFoundError(f"{text}: no such file or folder")
    if not found:
        raise FileNotFoundError(f"{text}: no JSON Lines files ({', '.join(JSONL_SUFFIXES)})")
    return found


def _compression(path: Path) -> str | None:
    return "gzip" if path.suffix == ".gz" else "zstd" if path.suffix == ".zst" else None


def _open_decompressed(path: Path) -> IO[bytes]:
    """A stream of ``path``'s decompressed bytes.

    Raises:
        StorageError: A ``.zst`` file without the zstandard package (the message says how to
            install it).
    """
    if _compression(path) == "gzip":
        raw = open_regular(path, "JSON Lines")
        stream = gzip.GzipFile(fileobj=raw, mode="rb")
        stream.myfileobj = raw  # type: ignore[assignment]  # closed with the stream, as gzip.open(path) does with its file
        return stream  # type: ignore[return-value]
    try:
        import zstandard
    except ImportError as error:
        raise StorageError(f"{path}: reading .zst needs zstandard: pip install 'stoker[text]'") from error
    return zstandard.ZstdDecompressor().stream_reader(open_regular(path, "JSON Lines"), closefd=True)


def _line_spans(data: bytes | memoryview, base: int) -> tuple[np.ndarray, np.ndarray]:
    """(start, length) of every non-empty line of ``data`` (``base`` added to the starts); a
    final line without a newline counts. Lines holding only whitespace are not samples."""
    array = np.frombuffer(data, dtype=np.uint8)
    ends = np.flatnonzero(array == 10)
    if len(array) and (not len(ends) or ends[-1] != len(array) - 1):
        ends = np.append(ends, len(array))
    starts = np.concatenate([[0], ends[:-1] + 1]) if len(ends) else np.zeros(0, np.int64)
    lengths = ends - starts
    keep = lengths > 0
    # A line of only whitespace is blank, not a document. Only a line that starts with
    # whitespace can be one (a JSON line starts with "{"), so only those are looked at whole.
    if keep.any():
        maybe_blank = np.flatnonzero(keep & np.isin(array[np.minimum(starts, len(array) - 1)], _WHITESPACE))
        for line in maybe_blank.tolist():
            if not bytes(array[starts[line] : ends[line]]).strip():
                keep[line] = False
    return (starts[keep] + base).astype(np.int64), lengths[keep].astype(np.int64)


class _Lazy(Sequence[str]):
    """Keys ``<file>:<line>`` made when asked for: a corpus of millions of lines keeps arrays,
    not millions of strings."""

    def __init__(self, names: list[str], file_starts: np.ndarray, line_numbers: np.ndarray) -> None:
        self._names = names
        self._file_starts = file_starts
        self._line_numbers = line_numbers

    def __len__(self) -> int:
        return len(self._line_numbers)

    def __getitem__(self, index: int) -> str:  # type: ignore[override]
        if isinstance(index, slice):
            return [self[position] for position in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        number = int(np.searchsorted(self._file_starts, index, side="right")) - 1
        return f"{self._names[number]}:{int(self._line_numbers[index])}"

    def __iter__(self) -> Iterator[str]:
        return (self[index] for index in range(len(self)))


class _LineIndex:
    """The line index of one file as it is built: per chunk, (start, length, line number) arrays,
    and how many lines came before the chunk (line numbers count every line, blank ones too)."""

    def __init__(self) -> None:
        self.parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.lines = 0  # indexed lines so far
        self.newlines = 0  # newlines before the next chunk

    def add(self, numbered: tuple[np.ndarray, np.ndarray, np.ndarray], *, newlines: int) -> None:
        starts, lengths, numbers = numbered
        self.parts.append((starts, lengths, numbers + self.newlines))
        self.lines += len(starts)
        self.newlines += newlines

    def add_line(self, start: int, length: int) -> None:
        """One line indexed without its bytes (over ``max_line_bytes``)."""
        self.add((np.array([start], np.int64), np.array([length], np.int64), np.ones(1, np.int64)), newlines=1)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if not self.parts:
            empty = np.zeros(0, np.int64)
            return empty, empty, empty
        return tuple(np.concatenate([part[column] for part in self.parts]) for column in range(3))  # type: ignore[return-value]


class _NoLabels(Sequence[None]):
    """No label for any line: None one at a time, and -1 for an index array (the Loader's label
    column), without an object per line."""

    dtype = np.dtype(np.int64)

    def __init__(self, count: int) -> None:
        self._count = count

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, np.ndarray):
            return np.full(index.shape, -1, np.int64)
        if not -self._count <= index < self._count:
            raise IndexError(index)
        return None


class JsonlStorage(Storage):
    """Samples as the non-empty lines of JSON Lines files (plain, ``.gz`` or ``.zst``).

    Args:
        path: A file, a folder (every JSON Lines file under it, sorted) or a glob pattern.
        block_bytes: Lines of a plain file are grouped into blocks of about this many bytes
            (the unit read and cached, and the block shuffle's blocks).
        cache_bytes: Bytes of blocks kept in memory.
        max_block_bytes: Largest block held in memory: a compressed file is one block, and one
            that decompresses to more (its line index counted too, `INDEX_BYTES_PER_LINE` a
            line) is refused when the storage opens (split it).
        max_line_bytes: Longest line read as a sample. A longer one is indexed without being
            held (a 2 GiB line costs no memory to open) and reading it is a
            `CorruptSampleError` naming the file and line: a bad sample, counted and handled
            by the Loader's ``on_error`` like any other.
        max_concurrent_reads: See `Storage`.

    Raises:
        FileNotFoundError: No JSON Lines files at ``path``.
        StorageError: A file that cannot be read or decompressed, one over ``max_block_bytes``
            decompressed, or no lines at all; the message names the file.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        block_bytes: int = 8 << 20,
        cache_bytes: int = 512 << 20,
        max_block_bytes: int = 1 << 30,
        max_concurrent_reads: int = 16,
        max_line_bytes: int = 64 << 20,
    ) -> None:
        super().__init__(max_concurrent_reads)
        if min(block_bytes, max_block_bytes, max_line_bytes) < 1:
            raise ValueError(
                f"block_bytes, max_block_bytes and max_line_bytes must be positive, got {block_bytes}, {max_block_bytes} "
                f"and {max_line_bytes}"
            )
        self.path = str(path)
        self.max_block_bytes = max_block_bytes
        self.max_line_bytes = max_line_bytes
        self.files = jsonl_files(path)
        self._cache = BlockCache(cache_bytes)
        self._contents: list[tuple[int, int]] = []  # per file: (bytes, CRC-32), decompressed
        starts: list[np.ndarray] = []  # per line: offset in its file (plain) or its decompressed bytes
        lengths: list[np.ndarray] = []
        numbers: list[np.ndarray] = []  # per line: its 1-based line number, for names
        self._blocks: list[tuple[int, int, int]] = []  # (file, first line, end line) in storage order
        file_starts = [0]
        for number, file in enumerate(self.files):
            file_line_starts, file_lengths, file_numbers = self._index(file)
            first = file_starts[-1]
            count = len(file_line_starts)
            if _compression(file) is not None:
                if count:
                    self._blocks.append((number, first, first + count))
            else:
                block_of = (file_line_starts // block_bytes) if count else np.zeros(0, np.int64)
                # A line over max_line_bytes is a block of its own, never read: the lines around it
                # are read without it.
                oversized = file_lengths > max_line_bytes
                breaks = (np.diff(block_of) != 0) | oversized[1:] | oversized[:-1]
                edges = np.flatnonzero(breaks) + 1 if count else np.zeros(0, np.int64)
                bounds = [0, *edges.tolist(), count]
                self._blocks.extend((number, first + low, first + high) for low, high in zip(bounds, bounds[1:]) if high > low)
            starts.append(file_line_starts)
            lengths.append(file_lengths)
            numbers.append(file_numbers)
            file_starts.append(first + count)
        self._starts = np.concatenate(starts)
        self._lengths = np.concatenate(lengths)
        self._file_starts = np.array(file_starts, np.int64)
        self._block_ends = np.array([end for _, _, end in self._blocks], np.int64)
        if not len(self._starts):
            raise StorageError(f"{self.path}: the JSON Lines files hold no lines")
        self._keys = _Lazy([str(file) for file in self.files], self._file_starts, np.concatenate(numbers))
        self._labels = _NoLabels(len(self._starts))

    def _index(self, file: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(start, length, line number) of every non-empty line of ``file`` (starts in its
        decompressed bytes for a compressed file)."""
        compressed = _compression(file) is not None
        try:
            with _open_decompressed(file) if compressed else open_regular(file, "JSON Lines") as stream:
                return self._index_stream(stream, file, compressed=compressed)
        except StorageError:
            raise
        except Exception as error:  # damaged data: gzip raises OSError, EOFError or zlib.error, zstandard ZstdError
            raise StorageError(f"{file}: cannot be read ({type(error).__name__}: {error})") from error

    @staticmethod
    def _numbered(data: bytes | memoryview, base: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        starts, lengths = _line_spans(data, base)
        array = np.frombuffer(data, dtype=np.uint8)
        newlines = np.flatnonzero(array == 10)
        line_numbers = np.searchsorted(newlines, starts - base, side="left") + 1
        return starts, lengths, line_numbers.astype(np.int64)

    def _index_stream(self, stream: IO[bytes], file: Path, *, compressed: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`_index` over a stream read a chunk at a time: what is held at once is a chunk and the
        unfinished line, and an unfinished line past ``max_line_bytes`` is not held at all (its
        end is looked for, and it is indexed as one oversized line)."""
        index = _LineIndex()
        checksum = 0  # CRC-32 of every byte (decompressed): the file's content, for `content_digest`
        offset = 0  # where the unfinished line begins
        read = 0  # bytes read so far (decompressed)
        carry = b""
        skipping = False  # inside a line over max_line_bytes
        while True:
            chunk = stream.read(_SCAN_CHUNK)
            ended = not chunk
            read += len(chunk)
            checksum = zlib.crc32(chunk, checksum)
            if compressed and read + INDEX_BYTES_PER_LINE * index.lines > self.max_block_bytes:
                raise StorageError(
                    f"{file}: decompresses to more than max_block_bytes={self.max_block_bytes:,} bytes with its line index "
                    f"({read:,} bytes and {index.lines:,} lines so far); a compressed file is read whole, so split it into "
                    "smaller files (or raise max_block_bytes)"
                )
            if skipping:
                newline = chunk.find(b"\n")
                if newline < 0 and not ended:
                    continue
                end = read if newline < 0 else read - len(chunk) + newline
                index.add_line(offset, end - offset)
                if ended:
                    break
                offset, carry, chunk, skipping = end + 1, b"", chunk[newline + 1 :], False
            data = carry + chunk
            if ended:
                if data:
                    index.add(self._numbered(data, offset), newlines=0)
                break
            last = data.rfind(b"\n")
            if last >= 0:
                whole = memoryview(data)[: last + 1]
                index.add(self._numbered(whole, offset), newlines=int(np.count_nonzero(np.frombuffer(whole, np.uint8) == 10)))
                offset += last + 1
                carry = data[last + 1 :]
            else:
                carry = data
            if len(carry) > self.max_line_bytes:
                skipping, carry = True, b""
        self._contents.append((read, checksum))
        return index.arrays()

    def _decompress(self, file: Path) -> bytes:
        """The whole decompressed file, refused past ``max_block_bytes`` before it is kept."""
        parts: list[bytes] = []
        total = 0
        with _open_decompressed(file) as stream:
            while True:
                part = stream.read(_SCAN_CHUNK)
                if not part:
                    break
                total += len(part)
                if total > self.max_block_bytes:
                    raise StorageError(
                        f"{file}: decompresses to more than max_block_bytes={self.max_block_bytes:,} bytes; a compressed "
                        "file is read whole, so split it into smaller files (or raise max_block_bytes)"
                    )
                parts.append(part)
        return b"".join(parts)

    def describe(self) -> str:
        return self.path

    def content_digest(self) -> str:
        """A hash of every file's content, in order (its decompressed size and CRC-32, taken
        while the storage indexed it: no extra read). Two corpora with the same lines in the
        same files but other text differ here, where their keys (``file:line``) do not."""
        digest = hashlib.blake2b(digest_size=12)
        for size, checksum in self._contents:
            digest.update(f"{size}:{checksum};".encode())
        return digest.hexdigest()

    def sample_name(self, index: int) -> str:
        """``<file>:<line>``: where sample ``index`` is."""
        return self._keys[index]

    # ---- blocks ---------------------------------------------------------------------------

    def block_sizes(self) -> list[int]:
        """Lines per block, in storage order: runs of about ``block_bytes`` of a plain file, or a
        whole compressed file."""
        return [end - first for _, first, end in self._blocks]

    def max_open_blocks(self) -> int:
        """Blocks the block shuffle may mix: half of what the cache holds, at least 2."""
        mean = max(1, int(np.mean([self._block_bytes(block) for block in range(len(self._blocks))])))
        return max(2, self._cache.capacity // (2 * mean))

    def stream_blocks(self) -> None:
        """Nothing: blocks are always read whole (`BlockStorage`)."""

    def prefetch_blocks(self, blocks: Sequence[int]) -> None:
        """Nothing: a block is read when its first line is asked for (`BlockStorage`)."""

    def _block_bytes(self, block: int) -> int:
        _, first, end = self._blocks[block]
        if end - first == 1 and self._lengths[first] > self.max_line_bytes:
            return 0  # an oversized line's block is never read
        return int(self._starts[end - 1] + self._lengths[end - 1] - self._starts[first])

    def _load_block(self, block: int) -> bytes:
        number, first, end = self._blocks[block]
        file = self.files[number]
        if _compression(file) is not None:
            return self._decompress(file)
        if not self._block_bytes(block):
            return b""
        start = int(self._starts[first])
        (data,) = _native.read_ranges(file, [(start, self._block_bytes(block))])
        return data

    # ---- reads ----------------------------------------------------------------------------

    def _read_indices(self, indices: Sequence[int]) -> list[bytes | Exception]:
        results: list[bytes | Exception] = [b""] * len(indices)
        by_block: dict[int, list[tuple[int, int]]] = {}
        for slot, index in enumerate(indices):
            if self._lengths[index] > self.max_line_bytes:
                results[slot] = CorruptSampleError(
                    f"{self._keys[index]}: a line of {int(self._lengths[index]):,} bytes, over max_line_bytes={self.max_line_bytes:,} "
                    "(not read)"
                )
                continue
            block = int(np.searchsorted(self._block_ends, index, side="right"))
            by_block.setdefault(block, []).append((slot, index))
        for block, wanted in by_block.items():
            number, first, end = self._blocks[block]
            try:
                data = self._cache.get(block, lambda: self._load_block(block), samples=end - first)  # noqa: B023 - called at once
            except Exception as error:
                for slot, index in wanted:
                    results[slot] = StorageError(f"{self._keys[index]}: cannot be read ({type(error).__name__}: {error})")
                continue
            self._cache.served(block, len(wanted))
            base = 0 if _compression(self.files[number]) is not None else int(self._starts[first])
            view = memoryview(data)
            for slot, index in wanted:
                start = int(self._starts[index]) - base
                length = int(self._lengths[index])
                if start + length > len(data):
                    results[slot] = StorageError(f"{self._keys[index]}: the file is shorter than when it was indexed (changed since)")
                else:
                    results[slot] = bytes(view[start : start + length])
        return results

    def stats(self) -> dict[str, int]:
        """``blocks`` in the files and ``blocks_read`` so far."""
        return {"blocks": len(self._blocks), "blocks_read": self._cache.reads}
