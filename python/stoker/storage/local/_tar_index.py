"""The sidecar index of a tar shard: where every sample's members are, so any sample can be read
with one positional read (a uniform global shuffle over shards), validated against the shard.

Format ``stoker.tar-index`` version 2: a JSON file named ``<shard>.idx`` beside the shard::

    {
      "format": "stoker.tar-index", "version": 2,
      "shard": {"name": "shard-000000.tar", "size": 268435456},
      "label_key": null,
      "samples": [
        {"key": "n01440764/img_0001",
         "members": {"jpg": [1536, 110203], "cls": [112640, 1]},
         "label": 0,
         "crc32": {"jpg": 2914201913, "cls": 2212294583}},
        ...
      ]
    }

``members`` maps each extension to ``[data offset, size]`` in bytes from the start of the shard;
``label`` is the sample's label as its member holds it: an integer, a float, or a text class name
(null without one). It comes from the first of the members ``cls``, ``cls2``, ``class``,
``label``, ``target`` (any case), or, when the index was built with ``label_key``, from that field
of the sample's ``json`` member. ``crc32`` (optional) holds zlib CRC-32s of the members. Keys
follow WebDataset: a member ``dir/name.ext1.ext2`` belongs to key ``dir/name`` with extension
``ext1.ext2``. Version 1 (integer labels only, no ``label_key``) still reads; other formats and
versions are refused.

Opening validates the index against the shard: same size, and the tar headers of the first and
last members name those members.
"""

from __future__ import annotations

import json
import os
import tarfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ... import _native
from ..._files import require_regular
from ...errors import CorruptSampleError, ShardError, StaleIndexError

INDEX_FORMAT = "stoker.tar-index"
INDEX_VERSION = 2
READABLE_VERSIONS = (1, 2)
LABEL_EXTENSIONS = ("cls", "cls2", "class", "label", "target")

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
    """Every sample of one shard, in shard order."""

    shard: Path
    size: int
    keys: list[str] = field(default_factory=list)
    members: list[dict[str, tuple[int, int]]] = field(default_factory=list)
    labels: list[Label | None] = field(default_factory=list)
    crc32: list[dict[str, int]] | None = None
    label_key: str | None = None

    def corruption(self, position: int, member: str, data: bytes, name: str | Callable[[], str]) -> CorruptSampleError | None:
        """A `CorruptSampleError` naming ``name`` (or ``name()``, worked out only for a mismatch)
        if ``data`` fails the CRC-32 the index holds for ``member`` of the sample at
        ``position``; None if it matches or there is none."""
        expected = self.crc32[position].get(member) if self.crc32 is not None else None
        if expected is None or _native.crc32(data) == expected:
            return None
        return CorruptSampleError(
            f"{name if isinstance(name, str) else name()}: CRC-32 mismatch (the shard's bytes changed since it was indexed, or it was replaced by another "
            f"shard); re-create the shard, or index it again with `stoker index` if the new bytes are right"
        )

    def to_json(self) -> dict[str, Any]:
        samples = []
        for position, key in enumerate(self.keys):
            sample: dict[str, Any] = {
                "key": key,
                "members": {extension: list(span) for extension, span in self.members[position].items()},
                "label": self.labels[position],
            }
            if self.crc32 is not None:
                sample["crc32"] = self.crc32[position]
            samples.append(sample)
        return {
            "format": INDEX_FORMAT,
            "version": INDEX_VERSION,
            "shard": {"name": self.shard.name, "size": self.size},
            "label_key": self.label_key,
            "samples": samples,
        }


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
        value: Any = json.loads(data)
    except ValueError as error:
        raise ShardError(f"{name}: not valid JSON ({error}), so it has no {label_key!r} label") from error
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
    index = ShardIndex(shard=shard, size=size, crc32=[] if checksums else None, label_key=label_key)
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
                    position = position_of[key] = len(index.keys)
                    index.keys.append(key)
                    index.members.append({})
                    index.labels.append(None)
                    label_rank.append(len(LABEL_EXTENSIONS))
                    if index.crc32 is not None:
                        index.crc32.append({})
                if extension in index.members[position]:
                    raise ShardError(f"{shard}: two members {member.name!r} for one sample")
                index.members[position][extension] = (member.offset_data, member.size)
                rank = label_member(extension) if label_key is None else (0 if extension.lower() == "json" else None)
                if checksums or rank is not None:
                    extracted = archive.extractfile(member)
                    data = extracted.read() if extracted is not None else b""
                    if len(data) != member.size:
                        raise ShardError(f"{shard}: truncated inside member {member.name!r}")
                    if index.crc32 is not None:
                        index.crc32[position][extension] = zlib.crc32(data)
                    if rank is not None and rank < label_rank[position]:
                        label_rank[position] = rank
                        name = f"{shard}: member {member.name!r}"
                        index.labels[position] = parse_label(data) if label_key is None else json_label(data, label_key, name)
            end = archive.offset  # just past the last entry, files or not
    except tarfile.TarError as error:
        raise ShardError(f"{shard}: not a readable tar file ({error})") from error
    except EOFError as error:
        raise ShardError(f"{shard}: truncated ({error})") from error
    _check_end_marker(shard, end, size)
    return index


def _check_end_marker(shard: Path, end: int, size: int) -> None:
    """A complete tar ends with two zero blocks after its last entry; tarfile stops quietly at
    a cut-off header, so this is how a shard truncated between members is caught."""
    with open(shard, "rb") as file:
        file.seek(end)
        marker = file.read(1024)
    if len(marker) < 1024 or any(marker):
        raise ShardError(f"{shard}: truncated: no end-of-archive marker after the last member (byte {end} of {size})")


def write_index(index: ShardIndex, path: Path | None = None) -> Path:
    """Write ``index`` atomically (a temporary file renamed into place). Returns its path."""
    target = path or index_path(index.shard)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(index.to_json(), separators=(",", ":")))
    temporary.replace(target)
    return target


def load_index(shard: Path, path: Path | None = None) -> ShardIndex:
    """Read and validate the index of ``shard``.

    Raises:
        FileNotFoundError: The shard or its index is missing.
        StaleIndexError: The index does not describe this shard (size or headers differ).
        ShardError: The index file is not a valid index.
    """
    source = path or index_path(shard)
    try:
        data = json.loads(source.read_text())
    except ValueError as error:
        raise ShardError(f"{source}: not a valid index ({error})") from error
    index = parse_index(data, shard, str(source))
    validate(index, source)
    return index


def parse_index(data: Any, shard: Path, source: str) -> ShardIndex:
    """An index from its JSON form (read from a file or an object store) without checking it
    against the shard.

    Raises:
        ShardError: ``data`` is not an index this version reads; the message names ``source``.
    """
    if not isinstance(data, dict) or data.get("format") != INDEX_FORMAT:
        raise ShardError(f"{source}: not a {INDEX_FORMAT} file")
    if data.get("version") not in READABLE_VERSIONS:
        raise ShardError(
            f"{source}: index version {data.get('version')}, this stoker reads versions {READABLE_VERSIONS}; rebuild it with `stoker index`"
        )
    try:
        return _checked_index(data, shard)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as error:
        raise ShardError(f"{source}: not a valid index ({type(error).__name__}: {error})") from error


def _span(span: Any, size: int, key: str, extension: str) -> tuple[int, int]:
    """A member's (offset, size), checked to lie inside the shard's ``size`` bytes after a header."""
    offset, length = span
    if not (isinstance(offset, int) and isinstance(length, int) and 512 <= offset and 0 <= length and offset + length <= size):
        raise ValueError(f"sample {key!r} member {extension!r} at {span!r} is not inside the shard's {size} bytes")
    return offset, length


def _checked_index(data: dict[str, Any], shard: Path) -> ShardIndex:
    """The index, every field of the type and range it must have (a ValueError, KeyError or
    TypeError otherwise, which `parse_index` names)."""
    size = data["shard"]["size"]
    if not isinstance(size, int) or not 0 <= size < 1 << 62:
        raise ValueError(f"shard size {size!r}")
    samples = data["samples"]
    keys = [sample["key"] for sample in samples]
    if not all(isinstance(key, str) for key in keys):
        raise ValueError("a sample key that is not text")
    members = [
        {str(extension): _span(span, size, key, extension) for extension, span in sample["members"].items()}
        for key, sample in zip(keys, samples)
    ]
    labels = [sample.get("label") for sample in samples]
    if not all(label is None or isinstance(label, (int, float, str)) for label in labels):
        raise ValueError("a label that is not a number, a class name or null")
    crc32 = [sample["crc32"] for sample in samples] if samples and all("crc32" in sample for sample in samples) else None
    if crc32 is not None and not all(isinstance(value, int) and 0 <= value < 1 << 32 for sums in crc32 for value in sums.values()):
        raise ValueError("a CRC-32 that is not a 32-bit number")
    label_key = data.get("label_key")
    if label_key is not None and not isinstance(label_key, str):
        raise ValueError(f"label_key {label_key!r}")
    return ShardIndex(shard=shard, size=size, keys=keys, members=members, labels=labels, crc32=crc32, label_key=label_key)


def _header_name(file: Any, data_offset: int) -> str:
    file.seek(data_offset - 512)
    header = file.read(512)
    if len(header) < 512:
        return ""
    name = header[:100].split(b"\0", 1)[0].decode("utf-8", "replace")
    prefix = header[345:500].split(b"\0", 1)[0].decode("utf-8", "replace") if header[257:262] == b"ustar" else ""
    return f"{prefix}/{name}" if prefix else name


def validate(index: ShardIndex, source: Path) -> None:
    """Check ``index`` against its shard: the size, and the tar headers of the first and last
    members (a long name is stored truncated in the header, so a prefix must match)."""
    size = os.stat(index.shard).st_size
    if size != index.size:
        raise StaleIndexError(
            f"{source} describes {index.size} bytes but {index.shard} has {size}: the shard changed or is truncated; rebuild the index (stoker index)"
        )
    if not index.keys:
        return
    with open(index.shard, "rb") as file:
        for position in {0, len(index.keys) - 1}:
            key = index.keys[position]
            extension, (offset, _) = next(iter(index.members[position].items()))
            expected = f"{key}.{extension}" if extension else key
            found = _header_name(file, offset)
            if not found or not expected.startswith(found):
                raise StaleIndexError(
                    f"{source} says {expected!r} starts at byte {offset} of {index.shard}, but the tar header there names {found!r}; rebuild the index"
                )
