"""Tokenized documents written as indexed tar shards, one ``doc_<n>.npy`` member each: the
format `stoker.storage.TokenShards` reads and `TokenLoader` packs."""

from __future__ import annotations

import io
import os
from collections.abc import Iterable

import numpy as np

from ..errors import ConfigurationError
from ..storage.local import TOKEN_DTYPES, MemoryStorage
from ._convert import convert_storage

__all__ = ["write_token_shards"]


def write_token_shards(
    documents: Iterable[np.ndarray], destination: str | os.PathLike[str], *, dtype: str = "uint32", shard_size: int = 256 << 20
) -> int:
    """Write tokenized documents as indexed tar shards, one ``doc_<n>.npy`` member each.

    Returns:
        How many documents were written.

    Raises:
        ConfigurationError: A token id that does not fit ``dtype`` (naming the document).
    """
    target = np.dtype(dtype)
    if target not in TOKEN_DTYPES:
        raise ConfigurationError(f"dtype must be uint16 or uint32, got {dtype}")
    limit = np.iinfo(target).max
    encoded: dict[str, bytes] = {}
    for number, document in enumerate(documents):
        array = np.asarray(document)
        if array.size and (not np.issubdtype(array.dtype, np.integer) or int(array.min()) < 0 or int(array.max()) > limit):
            raise ConfigurationError(f"document {number}: token ids must be integers in 0..{limit} for {target}")
        buffer = io.BytesIO()
        np.save(buffer, array.astype(target), allow_pickle=False)
        encoded[f"doc_{number:09d}.npy"] = buffer.getvalue()
    convert_storage(MemoryStorage(encoded), destination, shard_size=shard_size, progress=False)
    return len(encoded)
