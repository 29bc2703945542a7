"""Where a sample's bytes are: the file, shard or object that holds it, and its offset there.

For a provenance record (`stoker.observe.ProvenanceLedger`): a person chasing a bad batch wants the
shard and offset to look at, not only the key. Each storage family answers in its own terms; the
answer is what the storage knows without a read.
"""

from __future__ import annotations

from typing import Any

from ._protocol import Storage

__all__ = ["sample_location"]


def sample_location(storage: Storage, index: int) -> tuple[str, int]:
    """(where, offset) of sample ``index``: a tar shard's path and the payload's byte offset in it;
    a file's path and 0; an object's URL (with ``#key`` inside a shard object) or a table row's
    name and -1 (no offset known); else the storage's description and the key, and -1."""
    catalog: Any = getattr(storage, "catalog", None)
    if catalog is not None and hasattr(catalog, "span"):
        _, (offset, _size) = catalog.span(index)
        namer = getattr(storage, "sample_name", None)
        if namer is not None:
            return namer(index).split("#", 1)[0], int(offset)
        number, _ = catalog.where[index]
        return str(catalog.shards[number].shard), int(offset)
    namer = getattr(storage, "sample_name", None)
    if namer is not None:
        return str(namer(index)), -1
    path_of = getattr(storage, "path_of", None)
    key = storage.keys[index]
    if path_of is not None:
        return str(path_of(key)), 0
    return f"{storage.describe()}: {key}", -1
