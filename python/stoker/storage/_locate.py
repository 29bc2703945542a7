"""Where samples' bytes are: the file, shard or object that holds each, and its offset there.

For a provenance record (`stoker.observe.ProvenanceLedger`): a person chasing a bad batch wants the
shard and offset to look at, not only the key. Each storage family answers in its own terms; the
answer is what the storage knows without a read. Called for every delivered batch, so the common
families take a fast path (string joins, no `pathlib` per sample).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from ._protocol import Storage

__all__ = ["sample_locations"]


def sample_locations(storage: Storage, indices: Sequence[int]) -> tuple[list[str], list[int]]:
    """(where, offset) of each sample: a tar shard's path and the payload's byte offset in it; a
    file's path and 0; an object's URL (the shard object's, for shards on an object store) or a
    table row's name and -1 (no offset known); else the storage's description with the key, and -1."""
    base, kept = getattr(storage, "base", None), getattr(storage, "kept", None)
    if isinstance(base, Storage) and kept is not None:  # a view: where its base holds the samples
        return sample_locations(base, [int(at) for at in kept[list(indices)]])
    keys = storage.keys
    catalog: Any = getattr(storage, "catalog", None)
    if catalog is not None and hasattr(catalog, "span"):
        namer = getattr(storage, "sample_name", None)
        places, offsets = [], []
        for index in indices:
            _, (offset, _size) = catalog.span(index)
            offsets.append(int(offset))
            if namer is not None:
                places.append(namer(index).split("#", 1)[0])
            else:
                places.append(str(catalog.shards[catalog.locate(index)[0]].shard))
        return places, offsets
    namer = getattr(storage, "sample_name", None)
    if namer is not None:
        return [str(namer(index)) for index in indices], [-1] * len(indices)
    path_of = getattr(storage, "path_of", None)
    if path_of is not None:
        root = os.fspath(path_of("")).rstrip("/")
        return [f"{root}/{keys[index]}" for index in indices], [0] * len(indices)
    where = storage.describe()
    return [f"{where}: {keys[index]}" for index in indices], [-1] * len(indices)
