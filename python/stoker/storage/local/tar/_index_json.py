"""The JSON form of a tar shard's index (``stoker.tar-index`` versions 1 and 2): what stoker
wrote beside shards before version 3, and what an object store's ``dataset.json`` carries for
small datasets (one request opens them). Read into `ShardIndex`'s arrays, written from them.

Version 2::

    {"format": "stoker.tar-index", "version": 2,
     "shard": {"name": "shard-000000.tar", "size": 268435456}, "label_key": null,
     "samples": [{"key": "n01440764/img_0001", "members": {"jpg": [1536, 110203], "cls": [112640, 1]},
                  "label": 0, "crc32": {"jpg": 2914201913, "cls": 2212294583}}, ...]}

Version 1 is the same without ``label_key`` (integer labels only).
"""

from __future__ import annotations

from pathlib import PurePath
from typing import Any

from ....errors import ShardError
from ._index import Label, ShardIndex

__all__ = ["JSON_VERSIONS", "index_to_json", "parse_json_index"]

FORMAT = "stoker.tar-index"
JSON_VERSIONS = (1, 2)


def parse_json_index(data: Any, shard: PurePath, source: str) -> ShardIndex:
    """An index from its JSON form, each field of the type and range it must have.

    Raises:
        ShardError: Not a version 1 or 2 index; the message names ``source``.
    """
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ShardError(f"{source}: not a {FORMAT} file")
    if data.get("version") not in (1, 2):
        raise ShardError(
            f"{source}: index version {data.get('version')}, this stoker reads versions {(*JSON_VERSIONS, 3)}; rebuild it with `stoker index`"
        )
    try:
        size = data["shard"]["size"]
        if not isinstance(size, int) or not 0 <= size < 1 << 62:
            raise ValueError(f"shard size {size!r}")
        samples = [_json_sample(sample, size) for sample in data["samples"]]
        label_key = data.get("label_key")
        if label_key is not None and not isinstance(label_key, str):
            raise ValueError(f"label_key {label_key!r}")
        return ShardIndex.from_samples(shard, size, samples, label_key)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as error:
        raise ShardError(f"{source}: not a valid index ({type(error).__name__}: {error})") from error


def _json_sample(sample: Any, size: int) -> tuple[str, dict[str, tuple[int, int]], Label | None, dict[str, int] | None]:
    key = sample["key"]
    if not isinstance(key, str):
        raise ValueError("a sample key that is not text")
    members = {str(extension): _span(span, size, key, extension) for extension, span in sample["members"].items()}
    if not members:
        raise ValueError(f"sample {key!r} has no members")
    label = sample.get("label")
    if not (label is None or isinstance(label, (int, float, str)) and not isinstance(label, bool)):
        raise ValueError("a label that is not a number, a class name or null")
    crc = sample.get("crc32")
    if crc is not None and not (isinstance(crc, dict) and all(isinstance(value, int) and 0 <= value < 1 << 32 for value in crc.values())):
        raise ValueError("a CRC-32 that is not a 32-bit number")
    return key, members, label, crc


def _span(span: Any, size: int, key: str, extension: str) -> tuple[int, int]:
    """A member's (offset, size), checked to lie inside the shard's ``size`` bytes after a header."""
    offset, length = span
    if not (isinstance(offset, int) and isinstance(length, int) and 512 <= offset and 0 <= length and offset + length <= size):
        raise ValueError(f"sample {key!r} member {extension!r} at {span!r} is not inside the shard's {size} bytes")
    return offset, length


def index_to_json(index: ShardIndex) -> dict[str, Any]:
    """``index`` in the JSON form (version 2): what an object store's ``dataset.json`` carries."""
    samples = []
    for key, members, label, crc in index.samples():
        sample: dict[str, Any] = {"key": key, "members": {extension: list(span) for extension, span in members.items()}, "label": label}
        if crc is not None:
            sample["crc32"] = crc
        samples.append(sample)
    return {
        "format": FORMAT,
        "version": 2,
        "shard": {"name": index.shard.name, "size": index.size},
        "label_key": index.label_key,
        "samples": samples,
    }
