"""The index of a tar shard: where every sample's members are, so any sample can be read with one
positional read (a uniform global shuffle over shards), held as a few arrays.

A shard of 10,000 samples is a dozen arrays here, never 10,000 Python objects: keys are one
buffer of UTF-8 bytes cut at ``key_ends`` (a key is made when a sample is named, not before),
each sample names its members by a *pattern* (the tuple of its extensions, which nearly every
sample of a shard shares), and the members' offsets, sizes and CRC-32s are flat columns. How the
index is kept in a file is `_index_file`'s business; this module builds
it from a shard and answers questions about it.

Keys follow WebDataset: a member ``dir/name.ext1.ext2`` belongs to key ``dir/name`` with extension
``ext1.ext2``. A sample's label comes from the first of its members ``cls``, ``cls2``, ``class``,
``label``, ``target`` (any case), or, when the index is built with ``label_key``, from that field
of the sample's ``json`` member: an integer, a float or a text class name.
"""

from __future__ import annotations

import hashlib
import json
import tarfile
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

import numpy as np

from .... import _native
from ...._bounded import MAX_DOCUMENT_BYTES, parse_json, require_regular
from ....errors import CorruptSampleError, JsonError, ShardError

__all__ = [
    "LABEL_EXTENSIONS",
    "Label",
    "ShardIndex",
    "build_index",
    "checksum_mismatch",
    "index_path",
    "label_member",
    "parse_label",
    "split_member",
]

LABEL_EXTENSIONS = ("cls", "cls2", "class", "label", "target")
NO_CHECKSUM = -1
"""In `ShardIndex.member_crc32`: a member whose CRC-32 was not recorded."""

Label = int | float | str
"""A label as a shard holds it: a class index, a regression target, or a class name."""


def index_path(shard: Path) -> Path:
    """Where the index of ``shard`` lives: ``<shard>.idx``."""
    return shard.with_name(shard.name + ".idx")


def split_member(name: str) -> tuple[str, str]:
    """WebDataset's split of a member name into (key, extension)."""
    folder, _, base = name.rpartition("/")
    stem, dot, extension = base.partition(".")
    return (f"{folder}/{stem}" if folder else stem), (extension if dot else "")


@dataclass
class ShardIndex:
    """Every sample of one shard, in shard order, as arrays (see the module notes).

    Attributes:
        shard: The tar file.
        size: Its size in bytes when indexed.
        key_ends: Where each key ends in ``key_bytes`` (int64, one per sample).
        key_bytes: The keys' UTF-8 bytes, back to back.
        patterns: The distinct tuples of member extensions, in the members' order.
        sample_pattern: Each sample's pattern (int32).
        member_offsets: Each member's data offset in the shard, sample by sample (int64).
        member_sizes: Each member's size (int64).
        member_crc32: Each member's zlib CRC-32, or `NO_CHECKSUM` (int64); None without any.
        label_kind: ``"none"``, ``"int"``, ``"float"`` or ``"text"``.
        labels: Per sample: int64 (``"int"``), float64 with NaN for none (``"float"``), or int32
            codes into ``label_names`` with -1 for none (``"text"``); None for ``"none"``.
        label_present: For ``"int"`` labels where some sample has none: which have one (bool).
        label_names: The class names ``"text"`` codes stand for.
        label_key: The ``json`` field labels were taken from (None: the label members).
    """

    shard: PurePath
    size: int
    key_ends: np.ndarray
    key_bytes: bytes
    patterns: list[tuple[str, ...]]
    sample_pattern: np.ndarray
    member_offsets: np.ndarray
    member_sizes: np.ndarray
    member_crc32: np.ndarray | None = None
    label_kind: str = "none"
    labels: np.ndarray | None = None
    label_present: np.ndarray | None = None
    label_names: tuple[str, ...] = ()
    label_key: str | None = None

    def __post_init__(self) -> None:
        lengths = np.array([len(pattern) for pattern in self.patterns], dtype=np.int64)
        if len(self.sample_pattern) and not 0 <= self.sample_pattern.min() <= self.sample_pattern.max() < len(lengths):
            raise ShardError(f"{self.shard}: its index gives a sample a member pattern it does not have; rebuild it with `stoker index`")
        counts = lengths[self.sample_pattern] if len(self.sample_pattern) else np.zeros(0, np.int64)
        self.member_starts = np.concatenate([np.zeros(1, np.int64), np.cumsum(counts, dtype=np.int64)])

    def __len__(self) -> int:
        return len(self.key_ends)

    @property
    def nbytes(self) -> int:
        """Bytes the arrays hold (what a cache of indexes counts)."""
        arrays = (self.key_ends, self.sample_pattern, self.member_offsets, self.member_sizes, self.member_starts)
        optional = (self.member_crc32, self.labels, self.label_present)
        return len(self.key_bytes) + sum(array.nbytes for array in arrays) + sum(array.nbytes for array in optional if array is not None)

    def key(self, position: int) -> str:
        """The key of the sample at ``position``."""
        start = int(self.key_ends[position - 1]) if position else 0
        return self.key_bytes[start : int(self.key_ends[position])].decode("utf-8")

    def keys_at(self, positions: np.ndarray) -> list[str]:
        """The keys of the samples at ``positions``."""
        ends = self.key_ends[positions]
        starts = np.where(positions > 0, self.key_ends[np.maximum(positions - 1, 0)], 0)
        data = self.key_bytes
        return [data[start:end].decode("utf-8") for start, end in zip(starts.tolist(), ends.tolist())]

    def keys(self) -> list[str]:
        """Every key, in shard order (what a caller walking the whole shard asks for)."""
        ends = self.key_ends.tolist()
        starts = [0, *ends[:-1]]
        data = self.key_bytes
        return [data[start:end].decode("utf-8") for start, end in zip(starts, ends)]

    def positions_of(self, wanted: np.ndarray) -> np.ndarray:
        """Where each of ``wanted`` (keys as UTF-8, a fixed-width bytes array) is in this shard,
        -1 where it is not: every key compared at once (padded to the longest into one array),
        no Python object per key."""
        ends = self.key_ends.astype(np.int64)
        starts = np.concatenate([[0], ends[:-1]]).astype(np.int64)
        lengths = ends - starts
        found = np.full(len(wanted), -1, dtype=np.int64)
        if not len(ends) or not len(wanted):
            return found
        width = max(int(lengths.max()), 1)
        blob = np.frombuffer(self.key_bytes, dtype=np.uint8)
        spread = starts[:, None] + np.arange(width, dtype=np.int64)
        padded = np.where(np.arange(width) < lengths[:, None], blob[np.minimum(spread, len(blob) - 1)], 0).astype(np.uint8)
        keys = padded.view(f"S{width}")[:, 0]
        order = np.argsort(keys, kind="stable")
        sorted_keys = keys[order]
        fitting = np.char.str_len(wanted) <= width
        probe = wanted.astype(f"S{width}")
        at = np.clip(np.searchsorted(sorted_keys, probe), 0, len(sorted_keys) - 1)
        hit = fitting & (sorted_keys[at] == probe)
        found[hit] = order[at[hit]]
        return found

    def members(self, position: int) -> dict[str, tuple[int, int]]:
        """The members of the sample at ``position``: extension to (data offset, size)."""
        first = int(self.member_starts[position])
        pattern = self.patterns[int(self.sample_pattern[position])]
        offsets = self.member_offsets[first : first + len(pattern)].tolist()
        sizes = self.member_sizes[first : first + len(pattern)].tolist()
        return {extension: (offset, size) for extension, offset, size in zip(pattern, offsets, sizes)}

    def label(self, position: int) -> Label | None:
        """The label of the sample at ``position`` as the shard holds it."""
        if self.labels is None:
            return None
        value = self.labels[position]
        if self.label_kind == "text":
            return self.label_names[int(value)] if value >= 0 else None
        if self.label_kind == "float":
            return None if np.isnan(value) else float(value)
        return None if self.label_present is not None and not self.label_present[position] else int(value)

    def corruption(self, position: int, member: str, data: bytes, name: str | Callable[[], str]) -> CorruptSampleError | None:
        """A `CorruptSampleError` naming ``name`` (or ``name()``, worked out only for a mismatch)
        if ``data`` fails the CRC-32 the index holds for ``member`` of the sample at
        ``position``; None if it matches or there is none."""
        if self.member_crc32 is None:
            return None
        pattern = self.patterns[int(self.sample_pattern[position])]
        expected = int(self.member_crc32[int(self.member_starts[position]) + pattern.index(member)])
        if expected == NO_CHECKSUM or _native.crc32(data) == expected:
            return None
        return checksum_mismatch(name if isinstance(name, str) else name())

    def digest(self) -> str:
        """A hash of everything the index says (keys, members, checksums, labels): what a
        dataset's fingerprint is made of, and what its file keeps to detect damage."""
        digest = hashlib.blake2b(digest_size=16)
        digest.update(json.dumps([self.size, self.patterns, self.label_kind, list(self.label_names), self.label_key]).encode())
        digest.update(self.key_bytes)
        for array in (
            self.key_ends,
            self.sample_pattern,
            self.member_offsets,
            self.member_sizes,
            self.member_crc32,
            self.labels,
            self.label_present,
        ):
            digest.update(b"-" if array is None else np.ascontiguousarray(array).tobytes())
        return digest.hexdigest()

    @classmethod
    def from_samples(
        cls,
        shard: PurePath,
        size: int,
        samples: Sequence[tuple[str, dict[str, tuple[int, int]], Label | None, dict[str, int] | None]],
        label_key: str | None = None,
    ) -> ShardIndex:
        """An index from one (key, members, label, CRC-32s or None) per sample: how an index
        read from a JSON form or built by a scan becomes arrays.

        Raises:
            ShardError: Labels that mix class names and numbers.
        """
        keys = [key.encode("utf-8") for key, _, _, _ in samples]
        pattern_of: dict[tuple[str, ...], int] = {}
        sample_pattern = np.empty(len(samples), np.int32)
        offsets: list[int] = []
        sizes: list[int] = []
        checksums: list[int] = []
        with_checksums = bool(samples) and all(crc is not None for _, _, _, crc in samples)
        for position, (_, members, _, crc) in enumerate(samples):
            sample_pattern[position] = pattern_of.setdefault(tuple(members), len(pattern_of))
            for extension, (offset, length) in members.items():
                offsets.append(offset)
                sizes.append(length)
                if with_checksums:
                    checksums.append(crc.get(extension, NO_CHECKSUM) if crc is not None else NO_CHECKSUM)
        kind, labels, present, names = _label_columns([label for _, _, label, _ in samples], str(shard))
        return cls(
            shard=shard,
            size=size,
            key_ends=np.cumsum([len(key) for key in keys], dtype=np.int64),
            key_bytes=b"".join(keys),
            patterns=list(pattern_of),
            sample_pattern=sample_pattern,
            member_offsets=np.array(offsets, dtype=np.int64),
            member_sizes=np.array(sizes, dtype=np.int64),
            member_crc32=np.array(checksums, dtype=np.int64) if with_checksums else None,
            label_kind=kind,
            labels=labels,
            label_present=present,
            label_names=names,
            label_key=label_key,
        )

    def samples(self) -> list[tuple[str, dict[str, tuple[int, int]], Label | None, dict[str, int] | None]]:
        """One (key, members, label, CRC-32s) per sample: the inverse of `from_samples`."""
        out = []
        for position, key in enumerate(self.keys()):
            members = self.members(position)
            crc = None
            if self.member_crc32 is not None:
                first = int(self.member_starts[position])
                values = self.member_crc32[first : first + len(members)].tolist()
                crc = {extension: value for extension, value in zip(members, values) if value != NO_CHECKSUM}
            out.append((key, members, self.label(position), crc))
        return out


def checksum_mismatch(name: str) -> CorruptSampleError:
    """The error for a member whose bytes fail the CRC-32 its index holds, naming the sample."""
    return CorruptSampleError(
        f"{name}: CRC-32 mismatch (the shard's bytes changed since it was indexed, or it was replaced by another "
        f"shard); re-create the shard, or index it again with `stoker index` if the new bytes are right"
    )


def _label_columns(labels: Sequence[Label | None], where: str) -> tuple[str, np.ndarray | None, np.ndarray | None, tuple[str, ...]]:
    """(kind, values, present, names) of one shard's labels (see `ShardIndex`)."""
    texts = any(isinstance(label, str) for label in labels)
    numbers = any(isinstance(label, (int, float)) for label in labels)
    if texts and numbers:
        raise ShardError(f"{where}: labels mix class names and numbers; use one kind (names are mapped to indices)")
    if texts:
        names = tuple(sorted({label for label in labels if isinstance(label, str)}))
        code = {name: number for number, name in enumerate(names)}
        return "text", np.array([-1 if label is None else code[label] for label in labels], dtype=np.int32), None, names  # type: ignore[index]
    if any(isinstance(label, float) for label in labels):
        return "float", np.array([np.nan if label is None else label for label in labels], dtype=np.float64), None, ()
    if numbers:
        present = np.array([label is not None for label in labels], dtype=np.bool_)
        values = np.array([0 if label is None else label for label in labels], dtype=np.int64)
        return "int", values, None if present.all() else present, ()
    return "none", None, None, ()


def label_member(extension: str) -> int | None:
    """The rank of ``extension`` among the label members (lower wins), None if it is not one."""
    try:
        return LABEL_EXTENSIONS.index(extension.lower())
    except ValueError:
        return None


def parse_label(data: bytes) -> Label | None:
    """A label member's bytes as WebDataset reads them: an integer, else a float, else the text
    (a class name); None when empty."""
    text = data.decode("utf-8", "replace").strip()
    if not text:
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def json_label(data: bytes, label_key: str, name: str) -> Label | None:
    """Field ``label_key`` of a ``json`` member (a dotted path reaches into objects); None when
    absent.

    Raises:
        ShardError: The member is not JSON, or the field holds a list or an object.
    """
    try:
        value: Any = parse_json(data, name, max_bytes=MAX_DOCUMENT_BYTES)
    except JsonError as error:
        raise ShardError(f"{name}: {error.reason}, so it has no {label_key!r} label") from error
    for part in label_key.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    if value is None or isinstance(value, (int, float, str)) and not isinstance(value, bool):
        return value
    raise ShardError(f"{name}: field {label_key!r} holds {type(value).__name__} {str(value)[:40]!r}, not a number or a class name")


def build_index(shard: Path, *, checksums: bool = True, label_key: str | None = None) -> ShardIndex:
    """Scan ``shard`` and index it (reads the whole shard when ``checksums``).

    Args:
        shard: The tar file.
        checksums: Record each member's CRC-32 (reads every byte).
        label_key: Take labels from this field of each sample's ``json`` member instead of
            its ``cls``/``class``/``label``/``target`` member.

    Raises:
        FileNotFoundError: The shard is missing.
        ShardError: The shard is truncated or not a tar file, or a label member is unreadable.
        StorageError: The shard is not a regular file (a FIFO, a device).
    """
    size = require_regular(shard, "a tar shard").st_size  # a FIFO would block, a device never end
    samples: list[tuple[str, dict[str, tuple[int, int]], Label | None, dict[str, int] | None]] = []
    label_rank: list[int] = []
    position_of: dict[str, int] = {}
    try:
        with tarfile.open(shard, mode="r:") as archive:
            for member in archive:
                if not member.isfile():
                    continue
                if member.offset_data + member.size > size:
                    raise ShardError(
                        f"{shard}: truncated: member {member.name!r} ends at byte {member.offset_data + member.size}, the file has {size}"
                    )
                key, extension = split_member(member.name)
                position = position_of.get(key)
                if position is None:
                    position = position_of[key] = len(samples)
                    samples.append((key, {}, None, {} if checksums else None))
                    label_rank.append(len(LABEL_EXTENSIONS))
                _, members, label, crc = samples[position]
                if extension in members:
                    raise ShardError(f"{shard}: two members {member.name!r} for one sample")
                members[extension] = (member.offset_data, member.size)
                rank = label_member(extension) if label_key is None else (0 if extension.lower() == "json" else None)
                if checksums or rank is not None:
                    extracted = archive.extractfile(member)
                    data = extracted.read() if extracted is not None else b""
                    if len(data) != member.size:
                        raise ShardError(f"{shard}: truncated inside member {member.name!r}")
                    if crc is not None:
                        crc[extension] = zlib.crc32(data)
                    if rank is not None and rank < label_rank[position]:
                        label_rank[position] = rank
                        name = f"{shard}: member {member.name!r}"
                        label = parse_label(data) if label_key is None else json_label(data, label_key, name)
                        samples[position] = (key, members, label, crc)
            end = archive.offset  # just past the last entry, files or not
    except tarfile.TarError as error:
        raise ShardError(f"{shard}: not a readable tar file ({error})") from error
    except EOFError as error:
        raise ShardError(f"{shard}: truncated ({error})") from error
    _check_end_marker(shard, end, size)
    return ShardIndex.from_samples(shard, size, samples, label_key)


def _check_end_marker(shard: Path, end: int, size: int) -> None:
    """A complete tar ends with two zero blocks after its last entry; tarfile stops quietly at
    a cut-off header, so this is how a shard truncated between members is caught."""
    with open(shard, "rb") as file:
        file.seek(end)
        marker = file.read(1024)
    if len(marker) < 1024 or any(marker):
        raise ShardError(f"{shard}: truncated: no end-of-archive marker after the last member (byte {end} of {size})")
