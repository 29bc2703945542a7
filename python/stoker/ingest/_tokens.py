"""Tokenized documents written for `TokenLoader`: as indexed tar shards, one ``doc_<n>.npy``
member each (`stoker.storage.TokenShards`), or as one flat token file with its offsets
(`stoker.storage.TokenFile`), whose lengths are known before the epoch, as length buckets need."""

from __future__ import annotations

import io
import os
from array import array
from collections.abc import Iterable

import numpy as np

from ..errors import ConfigurationError
from ..storage.local import TOKEN_DTYPES, MemoryStorage
from ._convert import convert_storage

__all__ = ["write_token_file", "write_token_shards"]


def write_token_shards(
    documents: Iterable[np.ndarray], destination: str | os.PathLike[str], *, dtype: str = "uint32", shard_size: int = 256 << 20
) -> int:
    """Write tokenized documents as indexed tar shards, one ``doc_<n>.npy`` member each.

    Returns:
        How many documents were written.

    Raises:
        ConfigurationError: A token id that does not fit ``dtype`` (naming the document).
    """
    target = _token_dtype(dtype)
    encoded: dict[str, bytes] = {}
    for number, document in enumerate(documents):
        buffer = io.BytesIO()
        np.save(buffer, _tokens_of(number, document, target), allow_pickle=False)
        encoded[f"doc_{number:09d}.npy"] = buffer.getvalue()
    convert_storage(MemoryStorage(encoded), destination, shard_size=shard_size, progress=False)
    return len(encoded)


def write_token_file(documents: Iterable[np.ndarray], destination: str | os.PathLike[str], *, dtype: str = "uint16") -> int:
    """Write tokenized documents as one flat token file (``destination``, ``.bin``) and its
    offsets (``<destination>.offsets.npy``): the `stoker.storage.TokenFile` that
    ``TokenLoader(..., buckets=LengthBuckets([...]))`` reads, every length known from the
    offsets before the epoch.

    The documents are streamed to disk (only their offsets are held, 8 bytes each), written
    beside the destination first and renamed into place when whole, so an interrupted write
    leaves no token file that looks complete.

    Args:
        documents: Each document's token ids (a 1-D array of integers), in order; document
            ``i`` of the file is the ``i``-th.
        destination: The token file to write; its offsets go beside it.
        dtype: ``uint16`` (vocabularies under 65,536 tokens), as `TokenFile` reads by default,
            or ``uint32`` (then read it with ``TokenFile(path, dtype="uint32")``: a flat file
            does not say its type).

    Returns:
        How many documents were written.

    Raises:
        ConfigurationError: Another ``dtype``, or a token id that does not fit it (naming the
            document; nothing is left at the destination).
    """
    target = _token_dtype(dtype)
    path = os.fspath(destination)
    offsets_path = path + ".offsets.npy"
    offsets = array("q", [0])
    partial, partial_offsets = path + ".part", offsets_path + ".part"
    try:
        with open(partial, "wb") as file:
            for number, document in enumerate(documents):
                tokens = _tokens_of(number, document, target)
                file.write(tokens.tobytes())
                offsets.append(offsets[-1] + tokens.size)
        with open(partial_offsets, "wb") as file:
            np.save(file, np.frombuffer(offsets, dtype=np.int64), allow_pickle=False)
        os.replace(partial, path)
        os.replace(partial_offsets, offsets_path)
    finally:
        for leftover in (partial, partial_offsets):
            if os.path.exists(leftover):
                os.remove(leftover)
    return len(offsets) - 1


def _token_dtype(dtype: str) -> np.dtype:
    target = np.dtype(dtype)
    if target not in TOKEN_DTYPES:
        raise ConfigurationError(f"dtype must be uint16 or uint32, got {dtype}")
    return target


def _tokens_of(number: int, document: np.ndarray, target: np.dtype) -> np.ndarray:
    """``document``'s ids as ``target``, checked to be integers that fit it.

    Raises:
        ConfigurationError: A 2-D array, or ids that are not integers in range (naming the document).
    """
    tokens = np.asarray(document)
    limit = np.iinfo(target).max
    if tokens.ndim != 1:
        raise ConfigurationError(f"document {number}: token ids are a 1-D array, got shape {tokens.shape}")
    if tokens.size and (not np.issubdtype(tokens.dtype, np.integer) or int(tokens.min()) < 0 or int(tokens.max()) > limit):
        hint = " (a larger vocabulary: dtype='uint32')" if target == np.uint16 and np.issubdtype(tokens.dtype, np.integer) else ""
        raise ConfigurationError(f"document {number}: token ids must be integers in 0..{limit} for {target}{hint}")
    return tokens.astype(target, copy=False)
