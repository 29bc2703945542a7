"""JSON Lines files (``.jsonl``, ``.jsonl.gz``, ``.jsonl.zst``): one sample per non-empty line.

The text corpora that language models train on are published this way (one JSON object per
document, its text in a field such as ``"text"``). A sample's bytes are its line, as written:
turning it into text (parsing the JSON, taking the field) is the work of the stage that uses it,
so a malformed line is a bad sample named by file and line, not a storage failure.

Plain files are indexed when the storage first opens them: one pass over the file finds every
line's offset (read in large explicit chunks, never mapped), kept beside the file so that the
next opening reads its header alone (`stoker.storage.local._jsonl_lines`; the line arrays are read
when a line of the file is), and later reads are explicit positional
reads of whole blocks (runs of lines spanning about ``block_bytes``), served from a bounded
cache: the block shuffle reads each block about once an epoch. A compressed file cannot be read
from the middle, so it is one block: decompressed whole (once per epoch under the block shuffle),
counted line by line when the storage opens. Its decompressed size is checked against
``max_block_bytes`` before anything is kept, so a file that inflates without bound (a
decompression bomb, or a corpus that should have been split) is refused by name instead of
exhausting memory.
"""

from __future__ import annotations

import bisect
import gzip
import hashlib
import os
import zlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO

import numpy as np

from ... import _native
from ..._bounded import matching_files, open_regular, require_regular, walk_files
from ...errors import ConfigurationError, CorruptSampleError, StorageError
from .._labels import NoLabels
from .._protocol import Storage
from ..policies import BlockCache
from ._held_indexes import HeldIndexes
from ._jsonl_lines import LINES_SUFFIX, FileLines, LinesHeader, block_bounds, cache_path, read_cached, stamp, write_cache

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
        # A pattern such as "corpus/*" also matches the line indexes kept beside the files.
        found = [file for file in matching_files(text) if not file.name.endswith(LINES_SUFFIX)]
    elif Path(text).is_dir():
        found = walk_files(text, lambda name: name.endswith(JSONL_SUFFIXES))
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
    not millions of strings (a file's line numbers read with its line index, when asked for)."""

    def __init__(self, names: list[str], file_starts: np.ndarray, lines_of: Callable[[int], FileLines]) -> None:
        self._names = names
        self._file_starts = file_starts
        self._starts = file_starts.tolist()
        self._lines_of = lines_of

    def __len__(self) -> int:
        return self._starts[-1]

    def __getitem__(self, index: int) -> str:  # type: ignore[override]
        if isinstance(index, slice):
            return [self[position] for position in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(f"no line {index} of {len(self)}")
        number = bisect.bisect_right(self._starts, index) - 1
        return f"{self._names[number]}:{int(self._lines_of(number).numbers[index - self._starts[number]])}"

    def __iter__(self) -> Iterator[str]:
        for number, name in enumerate(self._names):
            yield from (f"{name}:{line}" for line in self._lines_of(number).numbers.tolist())


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
        keep_index: Keep each file's line index beside it (``<file>.stoker-lines``, see
            `stoker.storage.local._jsonl_lines`), so that the next opening reads a header per
            file instead of the whole corpus; a kept index is used while the file's size, time,
            inode and first and last 64 KiB are those it was made of. A folder that cannot be
            written keeps it in memory only.
        index_cache_bytes: Bytes of kept line indexes held in memory (24 bytes a line), read
            when a file's line is first read; the least recently used are let go past this.

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
        keep_index: bool = True,
        index_cache_bytes: int = 4 << 30,
    ) -> None:
        super().__init__(max_concurrent_reads)
        if min(block_bytes, max_block_bytes, max_line_bytes) < 1:
            raise ConfigurationError(
                f"block_bytes, max_block_bytes and max_line_bytes must be positive, got {block_bytes}, {max_block_bytes} "
                f"and {max_line_bytes}"
            )
        self.path = str(path)
        self.max_block_bytes = max_block_bytes
        self.max_line_bytes = max_line_bytes
        self.files = jsonl_files(path)
        self._cache = BlockCache(cache_bytes)
        self._contents: list[tuple[int, int]] = []  # per file: (bytes, CRC-32), decompressed
        self._headers: list[LinesHeader] = []
        self._held: HeldIndexes[FileLines] = HeldIndexes(
            lambda number: self._checked_load(self._headers[number], self.files[number]), index_cache_bytes
        )
        self._blocks: list[tuple[int, int, int]] = []  # (file, first line, end line) in storage order
        file_starts = [0]
        for number, file in enumerate(self.files):
            header = self._open_lines(file, block_bytes, keep_index)
            self._headers.append(header)
            first = file_starts[-1]
            self._blocks.extend((number, first + low, first + high) for low, high in zip(header.bounds, header.bounds[1:]))
            file_starts.append(first + header.lines)
        self._file_starts = np.array(file_starts, np.int64)
        self._file_start_list: list[int] = file_starts
        self._block_ends = np.array([end for _, _, end in self._blocks], np.int64)
        if not file_starts[-1]:
            raise StorageError(f"{self.path}: the JSON Lines files hold no lines")
        self._keys = _Lazy([str(file) for file in self.files], self._file_starts, self._lines)
        self._file_numbers = {str(file): number for number, file in enumerate(self.files)}
        self._labels = NoLabels(file_starts[-1])

    def _open_lines(self, file: Path, block_bytes: int, keep_index: bool) -> LinesHeader:
        """``file``'s line index: the one kept beside it while it describes the file, else one
        made by reading the file (and kept beside it, with ``keep_index``)."""
        compressed = _compression(file) is not None
        block_key = (block_bytes, self.max_line_bytes)
        file_stamp = stamp(file) if keep_index else None
        header = read_cached(file, file_stamp) if file_stamp is not None else None
        if header is not None:
            inflated = header.content[0] + INDEX_BYTES_PER_LINE * header.lines
            if compressed and inflated > self.max_block_bytes:
                raise StorageError(
                    f"{file}: decompresses to more than max_block_bytes={self.max_block_bytes:,} bytes with its line index "
                    f"({header.content[0]:,} bytes and {header.lines:,} lines); a compressed file is read whole, so split it into "
                    "smaller files (or raise max_block_bytes)"
                )
            self._contents.append(header.content)
            if header.block_key != block_key:  # cut for other blocks: cut again from its arrays
                header.loaded = self._checked_load(header, file)
                header.bounds = block_bounds(header.loaded, block_bytes, self.max_line_bytes, compressed)
                header.block_key = block_key
            return header
        lines = FileLines(*self._index(file))
        header = LinesHeader(
            lines=len(lines.starts),
            content=self._contents[-1],
            block_key=block_key,
            bounds=block_bounds(lines, block_bytes, self.max_line_bytes, compressed),
            digest=lines.digest(),
            loaded=lines,
        )
        if file_stamp is not None:
            write_cache(file, file_stamp, header, lines)
        return header

    @staticmethod
    def _checked_load(header: LinesHeader, file: Path) -> FileLines:
        try:
            return header.load()
        except (OSError, ValueError) as error:
            raise StorageError(
                f"{file}: its line index {cache_path(file)} is damaged ({error}); delete it to index the file again"
            ) from error

    def _lines(self, number: int) -> FileLines:
        """File ``number``'s line arrays: held from indexing, else read from its kept index and
        held while ``index_cache_bytes`` allows."""
        header = self._headers[number]
        if header.loaded is not None:
            return header.loaded
        return self._held.get(number)

    def _locate(self, index: int) -> tuple[int, int]:
        """(file number, line number in its index) of sample ``index``."""
        number = bisect.bisect_right(self._file_start_list, index) - 1
        return number, index - self._file_start_list[number]

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

    def index_of(self, key: str) -> int:
        """Position of ``key`` (``<file>:<line>``), found from the file's line numbers (a binary
        search in one file's index), with no table of every key.

        Raises:
            KeyError: No such line (a blank one, one past the end, another file).
        """
        name, _, line = key.rpartition(":")
        number = self._file_numbers.get(name)
        if number is not None and line.isdigit():
            numbers = self._lines(number).numbers
            position = int(np.searchsorted(numbers, int(line)))
            if position < len(numbers) and numbers[position] == int(line):
                return self._file_start_list[number] + position
        raise KeyError(f"{self.describe()}: no sample with key {key!r}")

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
        mean = max(1, sum(header.content[0] for header in self._headers) // max(1, len(self._blocks)))  # no line index read
        return max(2, self._cache.capacity // (2 * mean))

    def stream_blocks(self) -> None:
        """Nothing: blocks are always read whole (`BlockStorage`)."""

    def prefetch_blocks(self, blocks: Sequence[int]) -> None:
        """Nothing: a block is read when its first line is asked for (`BlockStorage`)."""

    def _block_bytes(self, block: int) -> int:
        number, first, end = self._blocks[block]
        lines = self._lines(number)
        low, high = first - self._file_start_list[number], end - self._file_start_list[number]
        if high - low == 1 and lines.lengths[low] > self.max_line_bytes:
            return 0  # an oversized line's block is never read
        return int(lines.starts[high - 1] + lines.lengths[high - 1] - lines.starts[low])

    def _load_block(self, block: int) -> bytes:
        number, first, end = self._blocks[block]
        file = self.files[number]
        if _compression(file) is not None:
            return self._decompress(file)
        if not self._block_bytes(block):
            return b""
        start = int(self._lines(number).starts[first - self._file_start_list[number]])
        (data,) = _native.read_ranges(file, [(start, self._block_bytes(block))])
        return data

    # ---- reads ----------------------------------------------------------------------------

    def _read_indices(self, indices: Sequence[int]) -> list[bytes | Exception]:
        results: list[bytes | Exception] = [b""] * len(indices)
        by_block: dict[int, list[tuple[int, int]]] = {}
        for slot, index in enumerate(indices):
            number, line = self._locate(index)
            length = int(self._lines(number).lengths[line])
            if length > self.max_line_bytes:
                results[slot] = CorruptSampleError(
                    f"{self._keys[index]}: a line of {length:,} bytes, over max_line_bytes={self.max_line_bytes:,} (not read)"
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
            lines = self._lines(number)
            offset = self._file_start_list[number]
            base = 0 if _compression(self.files[number]) is not None else int(lines.starts[first - offset])
            view = memoryview(data)
            for slot, index in wanted:
                start = int(lines.starts[index - offset]) - base
                length = int(lines.lengths[index - offset])
                if start + length > len(data):
                    results[slot] = StorageError(f"{self._keys[index]}: the file is shorter than when it was indexed (changed since)")
                else:
                    results[slot] = bytes(view[start : start + length])
        return results

    def stats(self) -> dict[str, int]:
        """``blocks`` in the files and ``blocks_read`` so far."""
        return {"blocks": len(self._blocks), "blocks_read": self._cache.reads}
