"""WebDataset-compatible tar shards with sidecar indexes: random access by key, coalesced reads,
sequential streaming.

Random access is what makes a uniform global shuffle possible over shards (WebDataset can only
shuffle within a buffer of a stream). Reading many keys at once sorts their ranges by offset
within each shard and merges neighbours into large reads (LMDBIO's coalescing), done in the Rust
core with the GIL released.
"""

from __future__ import annotations

import glob
import json
import logging
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from .. import _native
from ._errors import ShardError, StorageError
from ._protocol import Storage
from ._reads import read_spans
from ._tar_index import LABEL_EXTENSIONS, ShardIndex, build_index, index_path, load_index, write_index

__all__ = ["DATASET_FORMAT", "TarShardStorage", "default_payload"]

_logger = logging.getLogger("stoker.storage")

DATASET_FORMAT = "stoker.shards"
PAYLOAD_PREFERENCE = ("jpg", "jpeg", "png", "webp", "ppm", "bmp", "tif", "tiff", "npy", "bin", "txt", "json")


def default_payload(shards: Sequence[ShardIndex]) -> str:
    """The member a read returns when none is named: the first of `PAYLOAD_PREFERENCE` in the
    first sample, else its first member that is not a label (``"jpg"`` for no samples)."""
    if not shards or not shards[0].members:
        return "jpg"
    present = shards[0].members[0]
    for extension in PAYLOAD_PREFERENCE:
        if extension in present:
            return extension
    others = [extension for extension in present if extension not in LABEL_EXTENSIONS]
    return others[0] if others else next(iter(present))


def _shard_paths(source: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> tuple[list[Path], dict | None]:
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if path.is_dir():
            manifest = path / "dataset.json"
            if manifest.exists():
                data = json.loads(manifest.read_text())
                if data.get("format") != DATASET_FORMAT:
                    raise StorageError(f"{manifest}: not a {DATASET_FORMAT} manifest")
                return [path / shard["name"] for shard in data["shards"]], data
            paths = sorted(path.glob("*.tar"))
        elif any(character in str(source) for character in "*?["):
            paths = sorted(Path(match) for match in glob.glob(str(source)))
        else:
            paths = [path]
    else:
        paths = [Path(item) for item in source]
    if not paths:
        raise StorageError(f"{source}: no tar shards found")
    return paths, None


class TarShardStorage(Storage):
    """Samples in tar shards, each with a ``<shard>.idx`` sidecar index.

    Args:
        source: A folder (its ``dataset.json`` manifest, else every ``*.tar`` in name order), a
            glob pattern, a shard path, or a list of shard paths.
        payload: Which member a read returns (an extension such as ``"jpg"``); default: the
            first of jpg, jpeg, png, webp, ... present in the first sample.
        missing_index: For a shard without an index: ``"build"`` indexes it in memory (reads the
            shard once), ``"write"`` also saves the index beside it, ``"error"`` refuses.
        verify: Check each read against the CRC-32 in the index, where the index has them (on by
            default: a flipped bit or a replaced shard is a `CorruptSampleError` naming the
            sample, never wrong pixels; it costs about 1% of a decode).
        max_gap: Largest hole (bytes) read through to merge two requests.
        max_read: Largest merged read (bytes).
        max_concurrent_reads: See `Storage`.

    Raises:
        FileNotFoundError: A shard named by the manifest or the arguments is missing.
        ShardError: A truncated shard, or an index that does not match its shard.
        StorageError: Two shards hold the same key, or no shards.
    """

    def __init__(
        self,
        source: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
        *,
        payload: str | None = None,
        missing_index: str = "build",
        verify: bool = True,
        max_gap: int = 64 * 1024,
        max_read: int = 8 * 1024 * 1024,
        max_concurrent_reads: int = 16,
    ) -> None:
        super().__init__(max_concurrent_reads)
        if missing_index not in ("build", "write", "error"):
            raise ValueError(f'missing_index must be "build", "write" or "error", got {missing_index!r}')
        self.source = source
        self.verify = verify
        self.max_gap = max_gap
        self.max_read = max_read
        paths, manifest = _shard_paths(source)
        for path in paths:
            if not path.exists():
                raise FileNotFoundError(f"missing shard {path}")
        self.shards: list[ShardIndex] = [self._open_index(path, missing_index) for path in paths]
        self.classes = manifest.get("classes") if manifest else None
        self._keys: list[str] = []
        self._labels: list[int | None] = []
        self._where: list[tuple[int, int]] = []  # (shard number, position in shard) per sample
        seen: dict[str, int] = {}
        for number, shard in enumerate(self.shards):
            for position, key in enumerate(shard.keys):
                if key in seen:
                    raise StorageError(f"key {key!r} is in both {self.shards[seen[key]].shard} and {shard.shard}")
                seen[key] = number
                self._keys.append(key)
                self._labels.append(shard.labels[position])
                self._where.append((number, position))
        self._index_of = {key: index for index, key in enumerate(self._keys)}
        self.payload = payload or default_payload(self.shards)

    def _open_index(self, shard: Path, missing_index: str) -> ShardIndex:
        if index_path(shard).exists():
            return load_index(shard)
        if missing_index == "error":
            raise ShardError(f"{shard} has no index {index_path(shard).name}; run `stoker index {shard}`")
        index = build_index(shard, checksums=False)
        if missing_index == "write":
            try:
                write_index(index)
            except OSError as error:
                _logger.warning("cannot save the index of %s (%s); it is kept in memory", shard, error)
        return index

    def describe(self) -> str:
        return f"tar shards {self.source}"

    def members(self, key: str) -> dict[str, bytes]:
        """Every member of one sample, by extension (one coalesced read)."""
        number, position = self._where[self.index_of(key)]
        shard = self.shards[number]
        spans = shard.members[position]
        data = _native.read_ranges(shard.shard, list(spans.values()), self.max_gap, self.max_read)
        return dict(zip(spans, data))

    def _span(self, number: int, position: int, key: str) -> tuple[int, int]:
        try:
            return self.shards[number].members[position][self.payload]
        except KeyError:
            raise KeyError(f"sample {key!r} in {self.shards[number].shard} has no {self.payload!r} member (it has {sorted(self.shards[number].members[position])})") from None

    def _read_indices(self, indices: Sequence[int]) -> list[bytes | Exception]:
        results: list[bytes | Exception] = [ShardError("not read")] * len(indices)
        by_shard: dict[int, list[tuple[int, int, str]]] = {}
        for slot, index in enumerate(indices):
            number, position = self._where[index]
            by_shard.setdefault(number, []).append((slot, position, self._keys[index]))
        for number, wanted in by_shard.items():
            shard = self.shards[number]
            spans: list[tuple[int, int]] = []
            readable: list[tuple[int, int, str]] = []
            for slot, position, key in wanted:
                try:
                    spans.append(self._span(number, position, key))
                    readable.append((slot, position, key))
                except KeyError as error:
                    results[slot] = ShardError(error.args[0])
            payloads = read_spans(shard.shard, spans, [key for _, _, key in readable], max_gap=self.max_gap, max_read=self.max_read, error_type=ShardError)
            for (slot, position, key), payload in zip(readable, payloads):
                results[slot] = payload if isinstance(payload, Exception) else self._checked(shard, position, key, payload)
        return results

    def _checked(self, shard: ShardIndex, position: int, key: str, payload: bytes) -> bytes | Exception:
        """``payload``, or a `CorruptSampleError` when it fails the CRC-32 in the index."""
        corrupt = shard.corruption(position, self.payload, payload, f"sample {key!r} in {shard.shard}") if self.verify else None
        return corrupt or payload

    def iter_sequential(self, chunk: int = 1024) -> Iterator[tuple[str, bytes]]:
        """Every sample shard by shard in file order, as large sequential reads; the next chunk
        is read on an I/O thread while this one is consumed, so the disk never waits on us.

        Raises:
            CorruptSampleError: A sample fails its CRC-32 (with ``verify``).
        """
        parts = [(shard, shard.keys[start : start + chunk]) for shard in self.shards for start in range(0, len(shard.keys), chunk)]
        if not parts:
            return
        pool = self._io_threads()
        pending = pool.submit(self._read_sequential_part, *parts[0])
        for position in range(len(parts)):
            keys, data = pending.result()
            if position + 1 < len(parts):
                pending = pool.submit(self._read_sequential_part, *parts[position + 1])
            yield from zip(keys, data)

    def _read_sequential_part(self, shard: ShardIndex, keys: list[str]) -> tuple[list[str], list[bytes]]:
        positions = [self._where[self.index_of(key)][1] for key in keys]
        ranges = [shard.members[position][self.payload] for position in positions]
        # Everything between consecutive payloads (headers, labels) is read through: one stream.
        with self._read_slots:
            data = _native.read_ranges(shard.shard, ranges, 1 << 20, 32 << 20)
        for key, position, payload in zip(keys, positions, data):
            checked = self._checked(shard, position, key, payload)
            if isinstance(checked, Exception):
                raise checked
        return keys, data
