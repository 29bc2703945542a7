"""The samples of a set of indexed tar shards as one dataset, shared by local and S3 shards:
keys, labels (class names mapped to indices), and which member each read returns.

WebDataset's conventions: a sample is the group of members sharing a key, and its members may
differ from one sample to the next (a ``.jpg`` here, a ``.PNG`` there). So the member a read
returns is chosen per sample, not fixed by the first one.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import ShardError
from ._tar_index import LABEL_EXTENSIONS, Label, ShardIndex, label_member, parse_label

__all__ = ["IMAGE_EXTENSIONS", "ShardBlock", "ShardCatalog", "decode_member"]

IMAGE_EXTENSIONS = ("jpg", "jpeg", "png", "webp")
"""The members a read returns by default, first present wins (any case)."""
_OTHER_PAYLOADS = ("ppm", "bmp", "tif", "tiff", "npy", "bin", "txt", "json")


def decode_member(extension: str, data: bytes) -> Any:
    """A member's bytes as WebDataset's default decoders give them: ``txt`` as text, ``json`` as
    parsed JSON, label members as their label, anything else as bytes.

    Raises:
        ValueError: A ``txt`` member that is not UTF-8 or a ``json`` member that is not JSON.
    """
    kind = extension.lower().rsplit(".", 1)[-1]
    if kind in ("txt", "text"):
        return data.decode("utf-8")
    if kind == "json":
        return json.loads(data)
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


class ShardCatalog:
    """Keys, labels and payload members of ``shards``, in shard order.

    Args:
        shards: The shards' indexes.
        payload: The member every read returns (an extension, any case); None chooses per sample
            the first of ``image_extensions`` present, else another known payload, else the first
            member that is not a label.
        image_extensions: The preference list for that choice.
        classes: Class names from a ``dataset.json``; text labels map to their positions. Without
            it, the sorted set of text labels found becomes the class list.
        name_of: How a sample is named in errors, from (shard number, key).

    Raises:
        ShardError: A key in two shards, text labels not in ``classes``, or text mixed with numbers.
    """

    def __init__(
        self,
        shards: Sequence[ShardIndex],
        *,
        payload: str | None = None,
        image_extensions: Sequence[str] = IMAGE_EXTENSIONS,
        classes: list[str] | None = None,
        name_of: Callable[[int, str], str],
    ) -> None:
        self._block_layouts: dict[int, tuple[list[ShardBlock], np.ndarray]] = {}
        self.shards = list(shards)
        self.name_of = name_of
        preference = [extension.lower() for extension in (payload,) if extension] or [
            *(extension.lower() for extension in image_extensions),
            *_OTHER_PAYLOADS,
        ]
        self._explicit = payload is not None
        self.keys: list[str] = []
        self.where: list[tuple[int, int]] = []
        self.payloads: list[str | None] = []
        raw_labels: list[Label | None] = []
        chosen: dict[tuple[str, ...], str | None] = {}  # most samples share their member names
        seen: dict[str, int] = {}
        for number, shard in enumerate(self.shards):
            for position, key in enumerate(shard.keys):
                if key in seen:
                    raise ShardError(f"key {key!r} is in both {self.shards[seen[key]].shard} and {shard.shard}")
                seen[key] = number
                names = tuple(shard.members[position])
                if names not in chosen:
                    chosen[names] = self._choose(names, preference)
                self.keys.append(key)
                self.where.append((number, position))
                self.payloads.append(chosen[names])
                raw_labels.append(shard.labels[position])
        self.classes, self.labels = _label_indices(raw_labels, classes, self.shards)

    def _choose(self, names: tuple[str, ...], preference: list[str]) -> str | None:
        lowered = {name.lower(): name for name in reversed(names)}
        for extension in preference:
            if extension in lowered:
                return lowered[extension]
        if self._explicit:
            return None
        others = [name for name in names if label_member(name) is None]
        return others[0] if others else (names[0] if names else None)

    def payload_counts(self) -> dict[str, int]:
        """How many samples each read returns which member of (e.g. ``{"jpg": 90, "png": 10}``)."""
        counts: dict[str, int] = {}
        for extension in self.payloads:
            counts[str(extension)] = counts.get(str(extension), 0) + 1
        return counts

    def blocks(self, block_bytes: int | None = None) -> list[ShardBlock]:
        """The blocks, in sample order: each shard whole, or with ``block_bytes`` runs of a
        shard's consecutive samples whose members span at most that many bytes of it (a sample
        larger than that is a block of its own). Empty shards hold no block."""
        blocks: list[ShardBlock] = []
        for number, shard in enumerate(self.shards):
            count, block_start, block_end = 0, 0, 0
            for members in shard.members:
                extents = list(members.values())
                start = min((offset for offset, _ in extents), default=0)
                end = max((offset + size for offset, size in extents), default=start)
                if count and block_bytes is not None and max(end, block_end) - block_start > block_bytes:
                    blocks.append(ShardBlock(number, block_start, block_end, count))
                    count = 0
                if count == 0:
                    block_start, block_end = start, end
                count += 1
                block_start, block_end = min(block_start, start), max(block_end, end)
            if count:
                blocks.append(ShardBlock(number, block_start, block_end, count))
        return blocks

    def block_layout(self, block_bytes: int) -> tuple[list[ShardBlock], np.ndarray]:
        """`blocks` of ``block_bytes`` and each sample's block number, worked out once per size (a
        walk over every sample's members: not paid by a storage that never uses blocks)."""
        layout = self._block_layouts.get(block_bytes)
        if layout is None:
            blocks = self.blocks(block_bytes)
            layout = blocks, np.repeat(np.arange(len(blocks)), [block.samples for block in blocks])
            self._block_layouts[block_bytes] = layout
        return layout

    def max_open_blocks(self, block_bytes: int, cache_bytes: int) -> int:
        """How many blocks of ``block_bytes`` the block shuffle may mix with ``cache_bytes`` of
        them in memory: half of what fits (the next window's blocks are read while the last
        one's are still in use), at least 2."""
        blocks = self.block_layout(block_bytes)[0]
        mean = sum(block.end - block.start for block in blocks) / max(1, len(blocks))
        return max(2, int(cache_bytes // max(1.0, 2 * mean)))

    def block_sizes(self, block_bytes: int | None = None) -> list[int]:
        """Samples per block of `blocks`."""
        return [block.samples for block in self.blocks(block_bytes)]

    def span(self, index: int, extension: str | None = None) -> tuple[str, tuple[int, int]]:
        """(member, (offset, size)) of sample ``index``'s payload, or of its member ``extension``
        (any case).

        Raises:
            ShardError: The sample has no such member; the message names it and lists its members.
        """
        number, position = self.where[index]
        members = self.shards[number].members[position]
        if extension is None:
            member = self.payloads[index]
            wanted = member or "payload"
        else:
            wanted = extension
            member = next((name for name in members if name.lower() == extension.lower()), None)
        if member is None or member not in members:
            raise ShardError(f"{self.name_of(number, self.keys[index])}: no {wanted!r} member (it has {sorted(members)})")
        return member, members[member]


def _label_indices(
    raw: list[Label | None], classes: list[str] | None, shards: Sequence[ShardIndex]
) -> tuple[list[str] | None, list[int | float | None]]:
    """Text labels become class indices (the ``classes`` given, else the sorted names found);
    numbers stay as they are."""
    names = {label for label in raw if isinstance(label, str)}
    if not names:
        return classes, list(raw)  # type: ignore[arg-type]
    if any(isinstance(label, (int, float)) for label in raw):
        where = ", ".join(str(shard.shard) for shard in shards[:3])
        raise ShardError(f"{where}: labels mix class names and numbers; use one kind (names are mapped to indices)")
    if classes is None:
        classes = sorted(names)
    position = {name: index for index, name in enumerate(classes)}
    unknown = sorted(names - position.keys())
    if unknown:
        raise ShardError(f"labels {unknown[:5]} are not among the dataset's {len(classes)} classes (dataset.json)")
    return classes, [None if label is None else position[label] for label in raw]  # type: ignore[index]
