"""WebDataset-compatible tar shards with sidecar indexes: random access by key, coalesced reads,
sequential streaming.

Random access is what makes a uniform global shuffle possible over shards (WebDataset can only
shuffle within a buffer of a stream). Reading many keys at once sorts their ranges by offset
within each shard and merges neighbours into large reads (LMDBIO's coalescing), done in the Rust
core with the GIL released.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from .... import _native
from ...._bounded import MAX_MANIFEST_BYTES, matching_files, read_json, shown_logger
from ....errors import ConfigurationError, ShardError, StorageError
from ..._protocol import Storage
from ...policies import BlockCache
from .._reads import read_spans
from ._catalog import SHARD_IMAGE_EXTENSIONS, ShardBlock, ShardCatalog, decode_member
from ._index import NO_CHECKSUM, ShardIndex, build_index, checksum_mismatch, index_path
from ._index_file import ForeignIndexError, IndexHeader, header_of, read_header, write_index

__all__ = ["DATASET_FORMAT", "PARTIAL_MARKER", "TarShardStorage"]

_logger = shown_logger("stoker.storage")

DATASET_FORMAT = "stoker.shards"
PARTIAL_MARKER = ".stoker-convert.json"
"""In a folder a conversion is still writing (or was interrupted writing): it is not a dataset yet."""


def _shard_paths(source: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> tuple[list[Path], dict | None]:
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if path.is_dir():
            manifest = path / "dataset.json"
            if not manifest.exists() and ((path / PARTIAL_MARKER).exists() or any(path.glob("*.tar.part"))):
                raise StorageError(
                    f"{path} is a partial conversion (interrupted, or still being written): it has no dataset.json yet; "
                    f"run the same `stoker convert` again to finish it"
                )
            if manifest.exists():
                data = read_json(manifest, what="a dataset's manifest", max_bytes=MAX_MANIFEST_BYTES)
                return [path / name for name in _manifest_shards(data, manifest)], data
            paths = sorted(path.glob("*.tar"))
        elif any(character in str(source) for character in "*?["):
            paths = matching_files(str(source))
        else:
            paths = [path]
    else:
        paths = [Path(item) for item in source]
    if not paths:
        raise StorageError(f"{source}: no tar shards found")
    return paths, None


def _manifest_shards(data: Any, manifest: Path) -> list[str]:
    """The shard names a local ``dataset.json`` lists, checked: names inside its folder, class
    names that are names.

    Raises:
        StorageError: Not a manifest of this format, or a field of the wrong kind; named.
    """
    if not isinstance(data, dict) or data.get("format") != DATASET_FORMAT:
        raise StorageError(f"{manifest}: not a {DATASET_FORMAT} manifest")
    shards, classes = data.get("shards"), data.get("classes")
    names: list[Any] = [shard.get("name") for shard in shards if isinstance(shard, dict)] if isinstance(shards, list) else []
    if not isinstance(shards, list) or len(names) != len(shards) or not all(isinstance(name, str) and name for name in names):
        raise StorageError(f"{manifest}: its 'shards' must be a list of {{'name': file name}}")
    outside = [name for name in names if PurePosixPath(name).is_absolute() or ".." in PurePosixPath(name).parts]
    if outside:
        raise StorageError(f"{manifest}: a shard name {outside[0]!r} outside the dataset's folder")
    if classes is not None and not (isinstance(classes, list) and all(isinstance(name, str) for name in classes)):
        raise StorageError(f"{manifest}: its 'classes' must be a list of names")
    return names


class TarShardStorage(Storage):
    """Samples in tar shards, each with a ``<shard>.idx`` sidecar index.

    Args:
        source: A folder (its ``dataset.json`` manifest, else every ``*.tar`` in name order), a
            glob pattern, a shard path, or a list of shard paths.
        payload: Which member every read returns (an extension such as ``"jpg"``, any case);
            default: chosen per sample, the first of ``image_extensions`` it has (WebDataset's
            samples may mix ``.jpg`` and ``.png``).
        image_extensions: The preference list for that choice.
        label_key: Take labels from this field of each sample's ``json`` member (a dotted path
            reaches inside objects) instead of its ``cls``/``class``/``label``/``target``
            member. An index built without it is rebuilt in memory.
        missing_index: For a shard without an index: ``"build"`` indexes it in memory (reads the
            shard once), ``"write"`` also saves the index beside it, ``"error"`` refuses.
        verify: Check each read against the CRC-32 in the index, where the index has them (on by
            default: a flipped bit or a replaced shard is a `CorruptSampleError` naming the
            sample, never wrong pixels; it costs about 1% of a decode).
        max_gap: Largest hole (bytes) read through to merge two requests.
        max_read: Largest merged read (bytes).
        block_bytes: The blocks of the block shuffle are runs of a shard's samples spanning at
            most this many bytes.
        block_cache_bytes: Bytes of blocks kept in memory while block streaming (`stream_blocks`:
            each block one read, its samples served from memory).
        index_cache_bytes: Bytes of the shards' index arrays kept in memory. Opening reads only
            each index's header; a shard's arrays (about 60 bytes a sample with a 14-character
            key) are read when one of its samples is first read, and the least recently used are
            let go past this. A uniform shuffle touches every shard all epoch: keep the whole
            index (the default, 8 GiB, holds 100 million samples); the block shuffle touches a
            window of shards at a time, so a smaller cache costs it nothing.
        max_concurrent_reads: See `Storage`.

    Raises:
        FileNotFoundError: A shard named by the manifest or the arguments is missing.
        ShardError: A truncated shard, or an index that does not match its shard.
        ShardError: Also: text labels mixed with numbers, or two shards holding the same key
            (checked at opening up to a million samples; past that, at the first lookup by key).
        StorageError: No shards.
    """

    def __init__(
        self,
        source: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
        *,
        payload: str | None = None,
        image_extensions: Sequence[str] = SHARD_IMAGE_EXTENSIONS,
        label_key: str | None = None,
        missing_index: str = "build",
        verify: bool = True,
        max_gap: int = 64 * 1024,
        max_read: int = 8 * 1024 * 1024,
        block_bytes: int = 8 << 20,
        block_cache_bytes: int = 1 << 30,
        index_cache_bytes: int = 8 << 30,
        max_concurrent_reads: int = 16,
    ) -> None:
        super().__init__(max_concurrent_reads)
        if missing_index not in ("build", "write", "error"):
            raise ConfigurationError(f'missing_index must be "build", "write" or "error", got {missing_index!r}')
        self.source = source
        self.verify = verify
        self.max_gap = max_gap
        self.max_read = max_read
        self.block_bytes = block_bytes
        self.block_cache_bytes = block_cache_bytes
        self._block_cache: BlockCache | None = None
        self._unreadable_blocks: set[int] = set()
        paths, manifest = _shard_paths(source)
        for path in paths:
            if not path.exists():
                raise FileNotFoundError(f"missing shard {path}")
        self.label_key = label_key
        self.shards: list[IndexHeader] = [self._open_index(path, missing_index) for path in paths]
        self.catalog = ShardCatalog(
            self.shards,
            payload=payload,
            image_extensions=image_extensions,
            classes=manifest.get("classes") if manifest else None,
            name_of=lambda number, key: f"sample {key!r} in {self.shards[number].shard}",
            cache_bytes=index_cache_bytes,
        )
        self.classes = self.catalog.classes
        self._keys = self.catalog.keys
        self._labels = self.catalog.labels
        counts = self.catalog.payload_counts()
        self.payload = payload or (max(counts, key=counts.__getitem__) if counts else "jpg")

    def _open_index(self, shard: Path, missing_index: str) -> IndexHeader:
        if index_path(shard).exists():
            try:
                header = read_header(shard)
            except ForeignIndexError:
                # Megatron-Energon's prepared datasets: its index stays as it is, ours is built.
                _logger.info("%s: %s is another tool's index (Megatron-Energon's); indexing in memory", shard, index_path(shard).name)
                return header_of(build_index(shard, checksums=False, label_key=self.label_key))
            if header.label_key == self.label_key:
                return header
            # Labels come from another member than the saved index read them from.
            _logger.info("%s: indexing again in memory for label_key=%r (its index has %r)", shard, self.label_key, header.label_key)
            rebuilt = build_index(shard, checksums=False, label_key=self.label_key)
            saved = header.load()
            if np.array_equal(saved.member_offsets, rebuilt.member_offsets):  # the same members: their checksums hold
                rebuilt.member_crc32 = saved.member_crc32
            return header_of(rebuilt)
        if missing_index == "error":
            raise ShardError(f"{shard} has no index {index_path(shard).name}; run `stoker index {shard}`")
        index = build_index(shard, checksums=False, label_key=self.label_key)
        if missing_index == "write":
            try:
                write_index(index)
            except OSError as error:
                _logger.warning("cannot save the index of %s (%s); it is kept in memory", shard, error)
        return header_of(index)

    def content_digest(self) -> str:
        """A hash of every shard's index, from the digests their headers carry (see
        `ShardCatalog.content_digest`): a Loader's dataset fingerprint, in time in shards."""
        return self.catalog.content_digest()

    def sample_checksums(self) -> np.ndarray | None:
        """Every sample's payload CRC-32 from the shards' indexes (-1 where one is not recorded),
        without reading a payload; None when no shard's index records them. A resume after the
        dataset changed names the samples whose bytes changed under the same key with it."""
        found = [self.catalog.payload_checksums(number) for number in range(len(self.catalog.shards))]
        if all(checksums is None for checksums in found):
            return None
        return np.concatenate(
            [
                checksums if checksums is not None else np.full(shard.samples, -1, np.int64)
                for checksums, shard in zip(found, self.catalog.shards)
            ]
        )

    def indices_of(self, keys: Sequence[str]) -> tuple[np.ndarray, list[str]]:
        """See `Storage.indices_of`: each shard's keys compared with all of ``keys`` at once
        (a shard's index read as an epoch reads it), never a table of every key."""
        wanted = np.array([key.encode("utf-8") for key in keys], dtype=bytes) if keys else np.zeros(0, "S1")
        positions = np.full(len(keys), -1, dtype=np.int64)
        for number in range(len(self.catalog.shards)):
            missing = np.flatnonzero(positions < 0)
            if not len(missing):
                break
            found = self.catalog.shard(number).index.positions_of(wanted[missing])
            hit = found >= 0
            positions[missing[hit]] = int(self.catalog.starts[number]) + found[hit]
        absent = positions < 0
        return positions[~absent], [keys[slot] for slot in np.flatnonzero(absent).tolist()]

    def block_sizes(self) -> list[int]:
        """Samples per block: runs of a shard's samples that start within the same
        ``block_bytes`` of it (a larger sample is a block of its own)."""
        return self.catalog.block_sizes(self.block_bytes)

    def max_open_blocks(self) -> int:
        """See `ShardCatalog.max_open_blocks` (with ``block_cache_bytes``)."""
        return self.catalog.max_open_blocks(self.block_bytes, self.block_cache_bytes)

    def stream_blocks(self) -> None:
        """Read whole blocks from now on: the first sample asked for from a block reads all of
        it in one request, and its other samples come from memory. On a cold page cache that
        turns the block shuffle's scattered small reads into few large sequential ones.
        `Loader(shuffle="block")` turns this on."""
        if self._block_cache is None:
            self._block_cache = BlockCache(self.block_cache_bytes)

    def prefetch_blocks(self, blocks: Sequence[int]) -> None:
        """Nothing: a local block is read when its first sample is asked for, in one read as
        fast as a prefetch would be (`BlockStorage`)."""

    def describe(self) -> str:
        return f"tar shards {self.source}"

    def stats(self) -> dict[str, int]:
        """While block streaming: ``block_reads`` (blocks read so far) and ``block_bytes_held``."""
        cache = self._block_cache
        return {"block_reads": cache.reads, "block_bytes_held": cache.bytes_held} if cache is not None else {}

    def members(self, key: str) -> dict[str, bytes]:
        """Every member of one sample, by extension (one coalesced read)."""
        number, position = self.catalog.locate(self.index_of(key))
        spans = self.catalog.shard(number).index.members(position)
        data = _native.read_ranges(self.shards[number].shard, list(spans.values()), self.max_gap, self.max_read)
        return dict(zip(spans, data))

    def _read_indices(self, indices: Sequence[int]) -> list[bytes | Exception]:
        if self._block_cache is not None:
            return self._read_from_blocks(indices, self._block_cache)
        return self._read_payloads(indices)

    def _read_payloads(self, indices: Sequence[int]) -> list[bytes | Exception]:
        """Each sample's payload, read coalesced per shard and CRC-checked (an exception in place
        of a sample that failed): the read of every batch, worked out a shard's samples at a time
        on its arrays."""
        results: list[bytes | Exception] = [ShardError("not read")] * len(indices)
        numbers, positions = self.catalog.locate_many(np.asarray(indices, dtype=np.int64))
        for number in np.unique(numbers).tolist():
            slots = np.flatnonzero(numbers == number)
            rows = self.catalog.payload_rows(number, positions[slots])
            shard = self.catalog.shard(number).index
            path = self.shards[number].shard
            for slot in slots[rows < 0].tolist():
                try:
                    self.catalog.span(indices[slot])  # names the sample and the members it has
                except ShardError as error:
                    results[slot] = error
            slots, rows = slots[rows >= 0], rows[rows >= 0]
            spans = list(zip(shard.member_offsets[rows].tolist(), shard.member_sizes[rows].tolist()))
            names = _Names(shard, positions[slots])
            data = read_spans(path, spans, names, max_gap=self.max_gap, max_read=self.max_read, error_type=ShardError)
            checksums = shard.member_crc32[rows].tolist() if self.verify and shard.member_crc32 is not None else None
            for number_in_shard, (slot, part) in enumerate(zip(slots.tolist(), data)):
                expected = checksums[number_in_shard] if checksums is not None else NO_CHECKSUM
                if isinstance(part, bytes) and expected != NO_CHECKSUM and _native.crc32(part) != expected:
                    part = checksum_mismatch(f"sample {names[number_in_shard]!r} in {path}")  # checked once, here
                results[slot] = part
        return results

    def _read_from_blocks(self, indices: Sequence[int], cache: BlockCache) -> list[bytes | Exception]:
        """Each sample's payload as a slice of its block (one read per block), CRC-checked. A
        block that cannot be read whole (a shard cut short) is read sample by sample from then
        on, so only the samples that are gone fail."""
        results: list[bytes | Exception] = []
        for index in indices:
            number = self.catalog.block_of(index, self.block_bytes)
            block = self.catalog.block(number, self.block_bytes)
            data = None
            if number not in self._unreadable_blocks:
                try:
                    data = cache.get(number, lambda: self._read_block(block), samples=block.samples)  # noqa: B023 - called at once
                except OSError as error:
                    _logger.warning(
                        "%s: block %d-%d cannot be read whole (%s); reading its samples one by one",
                        self.shards[block.shard].shard,
                        block.start,
                        block.end,
                        error,
                    )
                    self._unreadable_blocks.add(number)
            if data is None:
                [result] = self._read_member_lists([index], [None])
                results.append(result if isinstance(result, Exception) else result[0])
                continue
            cache.served(number)
            try:
                member, (offset, size) = self.catalog.span(index)
            except ShardError as error:
                results.append(error)
                continue
            payload = data[offset - block.start : offset - block.start + size]
            results.append(self._corruption(index, member, payload) or payload)
        return results

    def _read_block(self, block: ShardBlock) -> bytes:
        """``block``'s bytes in one read (OSError: unreadable, or the shard cut short)."""
        length = block.end - block.start
        return bytes(_native.read_ranges(self.shards[block.shard].shard, [(block.start, length)], 0, length)[0])

    def try_read_members(self, indices: Sequence[int], extensions: Sequence[str]) -> list[dict[str, Any] | Exception]:
        """Members ``extensions`` of each sample, decoded as WebDataset does (`decode_member`:
        ``txt`` as text, ``json`` parsed, labels as labels, others bytes), CRC-checked; an
        exception in place of a sample that lacks one or fails to read or decode."""
        results: list[dict[str, Any] | Exception] = []
        for index, found in zip(indices, self._read_member_lists(indices, list(extensions))):
            if isinstance(found, Exception):
                results.append(found)
                continue
            try:
                results.append({extension: decode_member(extension, data) for extension, data in zip(extensions, found)})
            except ValueError as error:
                results.append(ShardError(f"sample {self._keys[index]!r}: a member does not decode ({error})"))
        return results

    def _read_member_lists(self, indices: Sequence[int], extensions: Sequence[str | None]) -> list[list[bytes] | Exception]:
        """For each sample, its members ``extensions`` (None: its payload), read coalesced per
        shard and CRC-checked; an exception in place of a sample that failed."""
        results: list[list[bytes] | Exception] = [ShardError("not read")] * len(indices)
        by_shard: dict[int, list[tuple[int, int]]] = {}
        for slot, index in enumerate(indices):
            by_shard.setdefault(self.catalog.locate(index)[0], []).append((slot, index))
        for number, wanted in by_shard.items():
            shard = self.shards[number]
            spans: list[tuple[int, int]] = []
            names: list[str] = []
            readable: list[tuple[int, int, list[str]]] = []
            for slot, index in wanted:
                try:
                    found = [self.catalog.span(index, extension) for extension in extensions]
                except ShardError as error:
                    results[slot] = error
                    continue
                readable.append((slot, index, [member for member, _ in found]))
                spans.extend(span for _, span in found)
                key = self.catalog.key(index)
                names.extend(key if extension is None else f"{key}.{member}" for extension, (member, _) in zip(extensions, found))
            data = read_spans(shard.shard, spans, names, max_gap=self.max_gap, max_read=self.max_read, error_type=ShardError)
            cursor = 0
            for slot, index, members in readable:
                parts = data[cursor : cursor + len(members)]
                cursor += len(members)
                failed: Exception | None = next((part for part in parts if isinstance(part, Exception)), None)
                for member, part in zip(members, parts):
                    if failed is None and isinstance(part, bytes):
                        failed = self._corruption(index, member, part)
                results[slot] = failed if failed is not None else [part for part in parts if isinstance(part, bytes)]
        return results

    def _corruption(self, index: int, member: str, data: bytes) -> Exception | None:
        """A `CorruptSampleError` when ``data`` fails the CRC-32 the index holds for it."""
        if not self.verify:
            return None
        return self.catalog.corruption(
            index, member, data, lambda: f"sample {self.catalog.key(index)!r} in {self.shards[self.catalog.locate(index)[0]].shard}"
        )

    def iter_sequential(self, chunk: int = 1024) -> Iterator[tuple[str, bytes]]:
        """Every sample shard by shard in file order, as large sequential reads; the next chunk
        is read on an I/O thread while this one is consumed, so the disk never waits on us.

        Raises:
            CorruptSampleError: A sample fails its CRC-32 (with ``verify``).
            ShardError: A sample has no payload member.
        """
        starts = self.catalog.starts.tolist()
        parts = [
            (number, range(start, min(start + chunk, starts[number + 1])))
            for number in range(len(self.shards))
            for start in range(starts[number], starts[number + 1], chunk)
        ]
        if not parts:
            return
        pool = self._io_threads()
        pending = pool.submit(self._read_sequential_part, *parts[0])
        for position in range(len(parts)):
            keys, data = pending.result()
            if position + 1 < len(parts):
                pending = pool.submit(self._read_sequential_part, *parts[position + 1])
            yield from zip(keys, data)

    def _read_sequential_part(self, number: int, indices: range) -> tuple[list[str], list[bytes]]:
        found = [self.catalog.span(index) for index in indices]
        # Everything between consecutive payloads (headers, labels) is read through: one stream.
        with self._read_slots:
            data = _native.read_ranges(self.shards[number].shard, [span for _, span in found], 1 << 20, 32 << 20)
        for index, (member, _), payload in zip(indices, found, data):
            corrupt = self._corruption(index, member, payload)
            if corrupt is not None:
                raise corrupt
        shard = self.catalog.shard(number).index
        first = int(self.catalog.starts[number])
        return [shard.key(index - first) for index in indices], data


class _Names(Sequence[str]):
    """The keys of some of a shard's samples, made only if a read fails and names them."""

    def __init__(self, shard: ShardIndex, positions: np.ndarray) -> None:
        self._shard = shard
        self._positions = positions

    def __len__(self) -> int:
        return len(self._positions)

    def __getitem__(self, number: Any) -> Any:
        return self._shard.key(int(self._positions[number]))
