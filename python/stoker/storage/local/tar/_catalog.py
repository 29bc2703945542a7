"""The samples of a set of indexed tar shards as one dataset, shared by local and S3 shards:
keys, labels (class names mapped to indices), which member each read returns, and blocks.

Built from the shards' index headers alone (`IndexHeader`): a sample's global position maps to
its shard by a binary search over the shards' first positions, and a shard's arrays are loaded
when one of its samples is first asked for, then kept in a cache bounded in bytes. Nothing here
holds one Python object per sample: a dataset of 100 million samples opens in the time it takes
to read 10,000 headers, and holds what its reads have touched.

WebDataset's conventions: a sample is the group of members sharing a key, and its members may
differ from one sample to the next (a ``.jpg`` here, a ``.PNG`` there). So the member a read
returns is chosen per member pattern, not fixed by the first sample.
"""

from __future__ import annotations

import bisect
import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...._bounded import MAX_DOCUMENT_BYTES, parse_json
from ....errors import CorruptSampleError, ShardError
from .._held_indexes import HeldIndexes
from ._columns import KeyColumn, LabelColumn
from ._index import LABEL_EXTENSIONS, NO_CHECKSUM, ShardIndex, label_member, parse_label
from ._index_file import IndexHeader, shard_blocks

__all__ = ["SHARD_IMAGE_EXTENSIONS", "ShardBlock", "ShardCatalog", "decode_member"]

SHARD_IMAGE_EXTENSIONS = ("jpg", "jpeg", "png", "webp")
"""The members a read returns by default, first present wins (any case)."""
_OTHER_PAYLOADS = ("ppm", "bmp", "tif", "tiff", "npy", "bin", "txt", "json")
UNIQUE_KEYS_CHECKED_UP_TO = 1 << 20
"""Datasets up to this many samples have their keys checked for repeats across shards when
opened (a set of every key); larger ones when a key is first looked up (`Storage.index_of`)."""


def decode_member(extension: str, data: bytes) -> Any:
    """A member's bytes as WebDataset's default decoders give them: ``txt`` as text, ``json`` as
    parsed JSON, label members as their label, anything else as bytes.

    Raises:
        ValueError: A ``txt`` member that is not UTF-8, or a ``json`` member that is not JSON
            (`stoker.errors.JsonError`: or past the JSON reader's bounds).
    """
    kind = extension.lower().rsplit(".", 1)[-1]
    if kind in ("txt", "text"):
        return data.decode("utf-8")
    if kind == "json":
        return parse_json(data, f"its .{extension} member", max_bytes=MAX_DOCUMENT_BYTES)
    if kind in LABEL_EXTENSIONS:
        return parse_label(data)
    return data


@dataclass(frozen=True)
class ShardBlock:
    """A run of one shard's consecutive samples read as one range: bytes [start, end)."""

    shard: int
    start: int
    end: int
    samples: int


@dataclass
class _Loaded:
    """One shard's arrays, with what the catalog derives from them."""

    index: ShardIndex
    labels: np.ndarray  # in the dataset's label form (class indices, -1 or NaN for none)
    blocks: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=dict)

    @property
    def nbytes(self) -> int:
        shared = self.labels is self.index.labels
        return self.index.nbytes + (0 if shared else self.labels.nbytes)


class ShardCatalog:
    """Keys, labels, payload members and blocks of ``shards``, in shard order.

    Args:
        shards: The shards' index headers.
        payload: The member every read returns (an extension, any case); None chooses per member
            pattern the first of ``image_extensions`` present, else another known payload, else
            the first member that is not a label.
        image_extensions: The preference list for that choice.
        classes: Class names from a ``dataset.json``; text labels map to their positions. Without
            it, the sorted set of text labels found becomes the class list.
        name_of: How a sample is named in errors, from (shard number, key).
        cache_bytes: Bytes of shard arrays kept loaded (least recently used let go first).

    Raises:
        ShardError: Text labels not in ``classes``, text mixed with numbers, or (datasets up to
            `UNIQUE_KEYS_CHECKED_UP_TO` samples) a key in two shards.
    """

    def __init__(
        self,
        shards: Sequence[IndexHeader],
        *,
        payload: str | None = None,
        image_extensions: Sequence[str] = SHARD_IMAGE_EXTENSIONS,
        classes: list[str] | None = None,
        name_of: Callable[[int, str], str],
        cache_bytes: int = 8 << 30,
    ) -> None:
        self.shards = list(shards)
        self.name_of = name_of
        self.starts = np.concatenate([np.zeros(1, np.int64), np.cumsum([shard.samples for shard in self.shards], dtype=np.int64)])
        self._start_list: list[int] = self.starts.tolist()
        preference = [extension.lower() for extension in (payload,) if extension] or [
            *(extension.lower() for extension in image_extensions),
            *_OTHER_PAYLOADS,
        ]
        self._explicit = payload is not None
        self._payloads = [[self._choose(pattern, preference) for pattern in shard.patterns] for shard in self.shards]
        self._payload_slots = [
            np.array(
                [pattern.index(member) if member in pattern else -1 for pattern, member in zip(shard.patterns, payloads)], dtype=np.int64
            )
            for shard, payloads in zip(self.shards, self._payloads)
        ]
        self.classes, self._class_codes, self.label_dtype = _label_scheme(self.shards, classes)
        self.keys = KeyColumn(self)
        self.labels = LabelColumn(self)
        self._held: HeldIndexes[_Loaded] = HeldIndexes(self._load, cache_bytes)
        self._block_layouts: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._block_starts: dict[int, np.ndarray] = {}
        if len(self) <= UNIQUE_KEYS_CHECKED_UP_TO:
            self.check_unique_keys()

    def __len__(self) -> int:
        return int(self.starts[-1])

    def _choose(self, names: tuple[str, ...], preference: list[str]) -> str | None:
        lowered = {name.lower(): name for name in reversed(names)}
        for extension in preference:
            if extension in lowered:
                return lowered[extension]
        if self._explicit:
            return None
        others = [name for name in names if label_member(name) is None]
        return others[0] if others else (names[0] if names else None)

    # ---- shards, loaded on demand -----------------------------------------------------------

    def locate(self, index: int) -> tuple[int, int]:
        """(shard number, position in it) of sample ``index``."""
        number = bisect.bisect_right(self._start_list, index) - 1  # bisect: a tenth of numpy's cost for one value
        return number, index - self._start_list[number]

    def locate_many(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(shard numbers, positions in them) of the samples at ``indices``."""
        numbers = np.searchsorted(self.starts, indices, side="right") - 1
        return numbers, indices - self.starts[numbers]

    def payload_rows(self, number: int, positions: np.ndarray) -> np.ndarray:
        """Where the payload member of each sample at ``positions`` of shard ``number`` is in
        its member columns; -1 for a sample that has no payload member."""
        slots = self._payload_slots[number]
        shard = self.shard(number).index
        chosen = slots[shard.sample_pattern[positions]]
        return np.where(chosen >= 0, shard.member_starts[positions] + chosen, -1)

    def payload_checksums(self, number: int) -> np.ndarray | None:
        """The CRC-32 of each sample's payload in shard ``number``, as its index records it
        (`NO_CHECKSUM` where it does not, or the sample has no payload), or None for an index
        without checksums: what a sample's bytes are, known without reading them."""
        shard = self.shard(number).index
        if shard.member_crc32 is None:
            return None
        rows = self.payload_rows(number, np.arange(self.shards[number].samples, dtype=np.int64))
        return np.where(rows >= 0, shard.member_crc32[np.maximum(rows, 0)], NO_CHECKSUM).astype(np.int64)

    def shard(self, number: int) -> _Loaded:
        """Shard ``number``'s arrays, read on first use and kept while the cache has room."""
        return self._held.get(number)

    def _load(self, number: int) -> _Loaded:
        index = self.shards[number].load()
        return _Loaded(index, self._labels_of(number, index))

    def _labels_of(self, number: int, index: ShardIndex) -> np.ndarray:
        """Shard ``number``'s labels in the dataset's form: class indices or numbers, -1 (NaN
        for float labels) where a sample has none."""
        missing = -1 if self.label_dtype.kind == "i" else np.nan
        if index.labels is None:
            return np.full(len(index), missing, dtype=self.label_dtype)
        if index.label_kind == "text":
            codes = self._class_codes[number]
            return np.where(index.labels >= 0, codes[np.maximum(index.labels, 0)], -1).astype(np.int64)
        if index.label_present is None:
            return index.labels.astype(self.label_dtype, copy=False)  # the shard's own array where it already fits
        labels = index.labels.astype(self.label_dtype)
        labels[~index.label_present] = missing
        return labels

    def key(self, index: int) -> str:
        """The key of sample ``index``."""
        number, position = self.locate(index)
        return self.shard(number).index.key(position)

    def label(self, index: int) -> int | float | None:
        """The label of sample ``index`` (a class index for text labels), None without one."""
        number, position = self.locate(index)
        return self.label_at(number, self.shard(number).index, position)

    def label_at(self, number: int, index: ShardIndex, position: int) -> int | float | None:
        """The label of the sample at ``position`` of shard ``number`` (its ``index``), a class
        index for text labels."""
        if index.label_kind != "text":
            return index.label(position)  # type: ignore[return-value]  # a number: only text labels are text
        code = int(index.labels[position])  # type: ignore[index]
        return int(self._class_codes[number][code]) if code >= 0 else None

    def check_unique_keys(self) -> None:
        """Refuse a key held by two shards (a set of every key: time and memory in samples).

        Raises:
            ShardError: The first repeated key, with both shards.
        """
        seen: dict[str, int] = {}
        for number in range(len(self.shards)):
            for key in self.shard(number).index.keys():
                if seen.setdefault(key, number) != number:
                    raise ShardError(f"key {key!r} is in both {self.shards[seen[key]].shard} and {self.shards[number].shard}")

    # ---- members --------------------------------------------------------------------------

    def payload_counts(self) -> dict[str, int]:
        """How many samples each read returns which member of (e.g. ``{"jpg": 90, "png": 10}``),
        from the index headers."""
        counts: dict[str, int] = {}
        for shard, payloads in zip(self.shards, self._payloads):
            for member, count in zip(payloads, shard.pattern_counts):
                counts[str(member)] = counts.get(str(member), 0) + count
        return counts

    def span(self, index: int, extension: str | None = None) -> tuple[str, tuple[int, int]]:
        """(member, (offset, size)) of sample ``index``'s payload, or of its member ``extension``
        (any case).

        Raises:
            ShardError: The sample has no such member; the message names it and lists its members.
        """
        number, position = self.locate(index)
        shard = self.shard(number).index
        pattern_number = int(shard.sample_pattern[position])
        pattern = shard.patterns[pattern_number]
        if extension is None:
            member = self._payloads[number][pattern_number]
            wanted = member or "payload"
        else:
            wanted = extension
            member = next((name for name in pattern if name.lower() == extension.lower()), None)
        if member is None or member not in pattern:
            raise ShardError(f"{self.name_of(number, shard.key(position))}: no {wanted!r} member (it has {sorted(pattern)})")
        first = int(shard.member_starts[position]) + pattern.index(member)
        return member, (int(shard.member_offsets[first]), int(shard.member_sizes[first]))

    def corruption(self, index: int, member: str, data: bytes, name: str | Callable[[], str]) -> CorruptSampleError | None:
        """See `ShardIndex.corruption`, for sample ``index``."""
        number, position = self.locate(index)
        return self.shard(number).index.corruption(position, member, data, name)

    def content_digest(self) -> str:
        """A hash of every shard's index (the digests their headers carry: no array is read),
        the class list and the payload choice: a dataset's fingerprint, in time in shards."""
        digest = hashlib.blake2b(digest_size=16)
        digest.update(json.dumps([self.classes, self._payloads]).encode())
        for shard in self.shards:
            digest.update(f"{shard.shard.name}:{shard.digest};".encode())
        return digest.hexdigest()

    # ---- blocks ---------------------------------------------------------------------------

    def _blocks(self, block_bytes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(samples per block, each block's shard, each shard's first block number) for
        ``block_bytes``: from the headers where they were cut for that size, else from every
        shard's arrays (read once for it)."""
        layout = self._block_layouts.get(block_bytes)
        if layout is None:
            per_shard = [
                np.asarray(shard.block_sizes, np.int64) if shard.block_bytes == block_bytes else self._shard_blocks(number, block_bytes)[0]
                for number, shard in enumerate(self.shards)
            ]
            counts = np.array([len(sizes) for sizes in per_shard], dtype=np.int64)
            sizes = np.concatenate(per_shard) if per_shard else np.zeros(0, np.int64)
            layout = sizes, np.repeat(np.arange(len(self.shards)), counts), np.concatenate([np.zeros(1, np.int64), np.cumsum(counts)])
            self._block_layouts[block_bytes] = layout
        return layout

    def _shard_blocks(self, number: int, block_bytes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        loaded = self.shard(number)
        if block_bytes not in loaded.blocks:
            loaded.blocks[block_bytes] = shard_blocks(loaded.index, block_bytes)
        return loaded.blocks[block_bytes]

    def block_sizes(self, block_bytes: int) -> list[int]:
        """Samples per block: runs of a shard's consecutive samples that start within the same
        ``block_bytes`` of it (a sample larger than that is a block of its own); empty shards
        hold no block."""
        return self._blocks(block_bytes)[0].tolist()

    def block(self, number: int, block_bytes: int) -> ShardBlock:
        """Block ``number`` of `block_sizes`: its shard and byte range."""
        _, shard_of, first_block = self._blocks(block_bytes)
        shard = int(shard_of[number])
        sizes, starts, ends = self._shard_blocks(shard, block_bytes)
        local = number - int(first_block[shard])
        return ShardBlock(shard, int(starts[local]), int(ends[local]), int(sizes[local]))

    def block_of(self, index: int, block_bytes: int) -> int:
        """The block sample ``index`` is in."""
        starts = self._block_starts.get(block_bytes)
        if starts is None:
            sizes = self._blocks(block_bytes)[0]
            starts = self._block_starts[block_bytes] = np.concatenate([np.zeros(1, np.int64), np.cumsum(sizes)[:-1]])
        return int(np.searchsorted(starts, index, side="right")) - 1

    def max_open_blocks(self, block_bytes: int, cache_bytes: int) -> int:
        """How many blocks of ``block_bytes`` the block shuffle may mix with ``cache_bytes`` of
        them in memory: half of what fits (the next window's blocks are read while the last
        one's are still in use), at least 2."""
        blocks = max(1, len(self._blocks(block_bytes)[0]))
        mean = sum(shard.size for shard in self.shards) / blocks
        return max(2, int(cache_bytes // max(1.0, 2 * mean)))


def _label_scheme(shards: Sequence[IndexHeader], classes: list[str] | None) -> tuple[list[str] | None, list[np.ndarray], np.dtype]:
    """(classes, each shard's class index per text label code, the dataset's label dtype)."""
    kinds = {shard.label_kind for shard in shards} - {"none"}
    if "text" in kinds and len(kinds) > 1:
        where = ", ".join(str(shard.shard) for shard in shards[:3])
        raise ShardError(f"{where}: labels mix class names and numbers; use one kind (names are mapped to indices)")
    dtype = np.dtype(np.float64 if "float" in kinds else np.int64)
    empty = np.zeros(0, np.int64)
    if "text" not in kinds:
        return classes, [empty] * len(shards), dtype
    names = {name for shard in shards for name in shard.label_names}
    if classes is None:
        classes = sorted(names)
    position = {name: index for index, name in enumerate(classes)}
    unknown = sorted(names - position.keys())
    if unknown:
        raise ShardError(f"labels {unknown[:5]} are not among the dataset's {len(classes)} classes (dataset.json)")
    return classes, [np.array([position[name] for name in shard.label_names], dtype=np.int64) for shard in shards], dtype
